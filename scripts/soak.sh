#!/usr/bin/env bash
# Signal-safety soak: `scripts/soak.sh [SECONDS]` (default 600; CI runs 60).
#
# Two loads run side by side for SECONDS on the static musl release build:
#   A. examples/cpu_stress: CPU sampling at the highest rate the kernel delivers (cpu::MAX_HZ) over workers
#      that allocate and free, spawn and join threads, bounce UDP datagrams and write pipes, with a window
#      taken every second and all-thread stack captures every 2 s; it fails itself on a stalled worker
#      (deadlock), a leaked timer or no samples.
#   B. the nl6 binary with the sampling allocator at a small rate (-profiling-heap-rate 4096, so nearly
#      every request's allocations are sampled), the gate pull-only, and a driver that keeps a CPU profile
#      running (profile?seconds=5), captures every thread's stack (goroutine?debug=2), reads heap/allocs
#      and delta_heap, and toggles the gate (each open/close builds and drops gate state), all over
#      loopback HTTP.
# Both processes' VmRSS and thread counts are sampled every 5 s. Fails when either process dies, when A
# exits non-zero or overruns SECONDS + 60 s (a deadlock), when B stops answering GET /api/v1/profiling
# within 5 s, or when RSS after warm-up grows by more than max(4 MiB, 10 %) (see RSS_BOUND below).
# Figures are printed at the end and kept in target/soak/.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${1:-600}
[[ "$DURATION" =~ ^[0-9]+$ ]] && [ "$DURATION" -ge 20 ] || { echo "soak: SECONDS must be an integer ≥ 20" >&2; exit 2; }
TARGET=${NL6_SOAK_TARGET:-x86_64-unknown-linux-musl}
OUT=target/soak
mkdir -p "$OUT"
# Warm-up: allocator arenas, thread stacks and the symbol cache settle in the first minute (or 1/5 of a
# short run); RSS growth is judged only after it.
WARMUP=$(( DURATION / 5 < 60 ? DURATION / 5 : 60 ))

cargo build --quiet --release --target "$TARGET" --example cpu_stress --bin nl6
STRESS=target/$TARGET/release/examples/cpu_stress
NL6=target/$TARGET/release/nl6

cleanup() {
  # Only the processes this script started, by pid.
  [ -n "${STRESS_PID:-}" ] && kill "$STRESS_PID" 2>/dev/null || true
  [ -n "${NL6_PID:-}" ] && kill "$NL6_PID" 2>/dev/null || true
  [ -n "${DRIVER_PID:-}" ] && kill "$DRIVER_PID" 2>/dev/null || true
}
trap cleanup EXIT

: >"$OUT/driver.err"
"$STRESS" "$DURATION" >"$OUT/stress.out" 2>"$OUT/stress.err" &
STRESS_PID=$!

"$NL6" -listen 127.0.0.1:0 -profiling-heap-rate 4096 2>"$OUT/nl6.err" &
NL6_PID=$!
ADDR=""
for _ in $(seq 100); do
  ADDR=$(sed -n 's/^nl6 listening on \([^;]*\);.*/\1/p' "$OUT/nl6.err" 2>/dev/null | head -1 || true)
  [ -n "$ADDR" ] && break
  sleep 0.1
done
[ -n "$ADDR" ] || { echo "soak: FAIL nl6 did not boot: $(cat "$OUT/nl6.err")" >&2; exit 1; }
BASE="http://$ADDR"
c() { curl -sS -o /dev/null --max-time "$1" -w '%{http_code}' "${@:2}" || echo 000; }

# Driver for B: runs until DURATION is over; every response must carry an expected status.
(
  end=$(( $(date +%s) + DURATION ))
  c 5 -X POST "$BASE/api/v1/profiling" -H 'Content-Type: application/json' -d '{"enabled":true,"server_address":""}' >/dev/null
  round=0
  while [ "$(date +%s)" -lt "$end" ]; do
    round=$((round + 1))
    c 15 "$BASE/debug/pprof/profile?seconds=5" >/dev/null &
    cpu_pid=$!
    for p in "goroutine?debug=2" heap allocs delta_heap "goroutine" threadcreate; do
      s=$(c 10 "$BASE/debug/pprof/$p")
      [ "$s" = 200 ] || echo "driver: $p answered $s" >>"$OUT/driver.err"
    done
    wait "$cpu_pid" || true
    if [ $((round % 5)) = 0 ]; then
      c 25 -X POST "$BASE/api/v1/profiling" -H 'Content-Type: application/json' -d '{"enabled":false}' >/dev/null
      c 5 -X POST "$BASE/api/v1/profiling" -H 'Content-Type: application/json' -d '{"enabled":true,"server_address":""}' >/dev/null
    fi
    echo "$round" >"$OUT/driver.rounds"
  done
) &
DRIVER_PID=$!

: >"$OUT/rss.tsv"
: >"$OUT/driver.err"
status_field() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }
START=$(date +%s)
FAILED=""
while kill -0 "$STRESS_PID" 2>/dev/null; do
  now=$(( $(date +%s) - START ))
  printf '%s\t%s\t%s\t%s\t%s\n' "$now" "$(status_field "$STRESS_PID" VmRSS)" "$(status_field "$STRESS_PID" Threads)" \
    "$(status_field "$NL6_PID" VmRSS)" "$(status_field "$NL6_PID" Threads)" >>"$OUT/rss.tsv"
  kill -0 "$NL6_PID" 2>/dev/null || { FAILED="nl6 died: $(tail -5 "$OUT/nl6.err")"; break; }
  s=$(c 5 "$BASE/api/v1/profiling")
  [ "$s" = 200 ] || { FAILED="GET /api/v1/profiling answered $s at ${now}s"; break; }
  if [ "$now" -gt $((DURATION + 60)) ]; then
    FAILED="cpu_stress overran ${DURATION}s by 60 s (deadlock?)"
    kill -ABRT "$STRESS_PID" 2>/dev/null || true
    break
  fi
  sleep 5
done
STRESS_RC=0
wait "$STRESS_PID" || STRESS_RC=$?
STRESS_PID=""
kill "$DRIVER_PID" 2>/dev/null || true
wait "$DRIVER_PID" 2>/dev/null || true
DRIVER_PID=""
NL6_THREADS_END=$(status_field "$NL6_PID" Threads)
kill -TERM "$NL6_PID" 2>/dev/null || true
wait "$NL6_PID" || true
NL6_PID=""

cat "$OUT/stress.out"
[ -s "$OUT/stress.err" ] && cat "$OUT/stress.err" >&2
[ "$STRESS_RC" = 0 ] || FAILED="${FAILED:+$FAILED; }cpu_stress exited $STRESS_RC"
echo "soak: nl6 driver rounds: $(cat "$OUT/driver.rounds" 2>/dev/null || echo 0); unexpected statuses: $(wc -l <"$OUT/driver.err" 2>/dev/null || echo 0); nl6 threads at end: $NL6_THREADS_END"

# RSS_BOUND: after warm-up, neither process may grow by more than max(4 MiB, 10 % of its post-warm-up
# RSS). Why that much slack: glibc/musl arenas and thread stacks of the spawn churn jitter by a few hundred
# KiB; why that little: a leak of one 64-byte allocation per CPU sample (250 Hz x 5 threads) is 4.8 MiB a
# minute, so any per-sample or per-request leak crosses it within the run.
python3 - "$OUT/rss.tsv" "$WARMUP" <<'PY' || FAILED="${FAILED:+$FAILED; }RSS grew after warm-up"
import sys
rows = [list(map(int, l.split('\t'))) for l in open(sys.argv[1]) if l.strip()]
warm = int(sys.argv[2])
after = [r for r in rows if r[0] >= warm]
ok = True
for name, col in (("cpu_stress", 1), ("nl6", 3)):
    if len(after) < 2:
        print(f"soak: {name}: too few RSS samples after warm-up"); ok = False; continue
    base, peak, last = after[0][col], max(r[col] for r in after), after[-1][col]
    n = len(after); xs = [r[0] for r in after]; ys = [r[col] for r in after]
    mx, my = sum(xs) / n, sum(ys) / n
    den = sum((x - mx) ** 2 for x in xs) or 1
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den * 60
    bound = max(4096, base // 10)
    verdict = "ok" if peak - base <= bound else "FAIL"
    ok &= verdict == "ok"
    print(f"soak: {name}: RSS after warm-up {base} KiB, peak {peak} KiB, last {last} KiB, "
          f"growth {peak - base} KiB (bound {bound}), slope {slope:+.1f} KiB/min, "
          f"threads {min(r[col + 1] for r in after)}..{max(r[col + 1] for r in after)}: {verdict}")
sys.exit(0 if ok else 1)
PY
if [ -n "$FAILED" ]; then
  echo "soak: FAIL $FAILED" >&2
  exit 1
fi
echo "soak: ok (${DURATION}s)"
