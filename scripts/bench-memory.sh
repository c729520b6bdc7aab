#!/usr/bin/env bash
# Memory per device: boot time, RSS (and bytes a device), threads, the time of one /api/v1/devices page
# (100 devices from the middle of the fleet) and of a name filter, at 30 000, 1 000 000 and 10 000 000
# devices under -device-net (127.0.0.0/8), for nl6 and, side by side in the same run, an older nl6 binary
# (NL6_BEFORE, e.g. a release build of main) so the machine's load weighs on both alike.
# Boot is from the start of the process to its boot line ("nl6 listening on"); RSS is VmRSS 2 s after;
# a page time is the best of three curl requests. Not a test: it prints figures (the machine's other
# load shows in the header's load average). Loopback only.
# Usage: [NL6_BEFORE=path/to/old/nl6] scripts/bench-memory.sh [DEVICE COUNTS..., default 30000 1000000 10000000]
set -euo pipefail
cd "$(dirname "$0")/.."
COUNTS=("$@")
[ ${#COUNTS[@]} -gt 0 ] || COUNTS=(30000 1000000 10000000)
cargo build --quiet --release --bin nl6
AFTER=${CARGO_TARGET_DIR:-target}/release/nl6
BINARIES=("$AFTER")
[ -z "${NL6_BEFORE:-}" ] || BINARIES=("$NL6_BEFORE" "$AFTER")
OUT=$(mktemp -d)
PID=""
cleanup() { [ -z "$PID" ] || kill "$PID" 2>/dev/null || true; rm -rf "$OUT"; }
trap cleanup EXIT

status() { awk -v k="$2" '$1 == k { print $2 }' "/proc/$1/status"; }
# The best of three times (seconds) of GET $1.
page() {
  local best=""
  for _ in 1 2 3; do
    t=$(curl -s -o /dev/null -w '%{time_total}' "$1")
    best=$(awk -v a="$t" -v b="${best:-$t}" 'BEGIN { print (a < b ? a : b) }')
  done
  echo "$best"
}

# One row: binary $1, $2 devices.
row() {
  local bin=$1 n=$2 log="$OUT/stderr" t0 addr boot rss threads
  : >"$log"
  t0=$(date +%s.%N)
  "$bin" -devices "$n" -device-net 127.0.0.0/8 -snmp-port 0 -listen 127.0.0.1:0 2>"$log" &
  PID=$!
  for _ in $(seq 1 1200); do
    grep -q '^nl6 listening on ' "$log" && break
    kill -0 "$PID" 2>/dev/null || { echo "bench-memory: $bin exited: $(cat "$log")" >&2; exit 1; }
    sleep 0.05
  done
  boot=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
  addr=$(sed -n 's/^nl6 listening on \([^;]*\);.*/\1/p' "$log" | head -1)
  [ -n "$addr" ] || { echo "bench-memory: no boot line from $bin within 60 s" >&2; exit 1; }
  sleep 2
  rss=$(status "$PID" VmRSS:)
  threads=$(status "$PID" Threads:)
  local mid=$((n / 2))
  local p f
  p=$(page "http://$addr/api/v1/devices?offset=$mid&limit=100")
  f=$(page "http://$addr/api/v1/devices?name=nl6-dev-99&limit=100")
  kill "$PID"
  wait "$PID" 2>/dev/null || true
  PID=""
  printf '%-34s %10s %8s s %9s MB %8s B %7s %9.1f ms %9.1f ms\n' "$bin" "$n" "$boot" \
    "$((rss / 1000))" "$((rss * 1024 / n))" "$threads" "$(awk -v x="$p" 'BEGIN { print x * 1000 }')" \
    "$(awk -v x="$f" 'BEGIN { print x * 1000 }')"
}

echo "bench-memory: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-34s %10s %10s %12s %10s %7s %12s %12s\n' binary devices boot RSS "per device" threads \
  "page (100)" "name filter"
for n in "${COUNTS[@]}"; do
  for bin in "${BINARIES[@]}"; do
    row "$bin" "$n"
  done
done
