#!/usr/bin/env bash
# Where the wall soak's RSS goes: `scripts/soak-wall-rss.sh BINARY SECONDS OUTDIR` runs BINARY (an nl6
# build) with `-traffic 10ms -profiling-heap-rate 65536`, keeps `/debug/fgprof?seconds=5` running back to
# back, and every 10 s appends (seconds, VmRSS KiB, threads, Anonymous KiB) to OUTDIR/rss.tsv; it saves
# /debug/pprof/heap and /proc/PID/smaps at 60 s and at the end (compare them with
# `go tool pprof -top -diff_base OUTDIR/heap-start.pb.gz OUTDIR/heap-end.pb.gz`). NL6_ENV is passed to
# the binary's environment. nl6 bounds glibc malloc to two arenas with fixed thresholds itself unless the
# environment chose: NL6_ENV=GLIBC_TUNABLES=glibc.malloc.check=0 (a tunable at its default) runs it with
# glibc's own settings, NL6_ENV=MALLOC_ARENA_MAX=1 with one arena.
# Kills only the processes it started.
set -euo pipefail
[ $# = 3 ] || { echo "usage: $0 BINARY SECONDS OUTDIR" >&2; exit 2; }
BIN=$1 DUR=$2 OUT=$3
[[ "$DUR" =~ ^[0-9]+$ ]] && [ "$DUR" -ge 70 ] || { echo "soak-wall-rss: SECONDS must be an integer ≥ 70" >&2; exit 2; }
mkdir -p "$OUT"
# shellcheck disable=SC2086 # NL6_ENV is a list of VAR=VALUE words
env ${NL6_ENV:-} "$BIN" -listen 127.0.0.1:0 -snmp-port 0 -traffic 10ms -profiling-heap-rate 65536 2>"$OUT/nl6.err" &
P=$!
LOOP=""
cleanup() {
  [ -n "$LOOP" ] && kill "$LOOP" 2>/dev/null || true
  kill "$P" 2>/dev/null || true
}
trap cleanup EXIT
A=""
for _ in $(seq 600); do
  A=$(sed -n 's/^nl6 listening on \([^;]*\);.*/\1/p' "$OUT/nl6.err" | head -1)
  [ -n "$A" ] && break
  sleep 0.2
done
[ -n "$A" ] || { echo "soak-wall-rss: nl6 did not boot: $(cat "$OUT/nl6.err")" >&2; exit 1; }
curl -sS -o /dev/null -X POST "http://$A/api/v1/profiling" -H 'Content-Type: application/json' \
  -d '{"enabled":true,"server_address":""}'
: >"$OUT/fgprof.log"
( while kill -0 "$P" 2>/dev/null; do
    curl -s -m 60 -o /dev/null -w '%{http_code} %{time_total}\n' "http://$A/debug/fgprof?seconds=5" >>"$OUT/fgprof.log" || true
  done ) &
LOOP=$!
field() { awk -v k="$1" '$1 == k { print $2 }' "$2"; }
T0=$(date +%s)
: >"$OUT/rss.tsv"
while [ $(( $(date +%s) - T0 )) -lt "$DUR" ]; do
  t=$(( $(date +%s) - T0 ))
  printf '%s\t%s\t%s\t%s\n' "$t" "$(field VmRSS: "/proc/$P/status")" "$(field Threads: "/proc/$P/status")" \
    "$(field Anonymous: "/proc/$P/smaps_rollup")" >>"$OUT/rss.tsv"
  if [ ! -f "$OUT/heap-start.pb.gz" ] && [ "$t" -ge 60 ]; then
    curl -s -m 60 -o "$OUT/heap-start.pb.gz" "http://$A/debug/pprof/heap"
    cp "/proc/$P/smaps" "$OUT/smaps-start"
  fi
  sleep 10
done
curl -s -m 60 -o "$OUT/heap-end.pb.gz" "http://$A/debug/pprof/heap"
cp "/proc/$P/smaps" "$OUT/smaps-end"
echo "soak-wall-rss: $(grep -c '^200' "$OUT/fgprof.log") profiles answered 200, $(grep -vc '^200' "$OUT/fgprof.log") not; rss.tsv:"
cat "$OUT/rss.tsv"
