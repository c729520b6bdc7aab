#!/usr/bin/env bash
# Serving throughput: requests/s and p99 latency of GET /api/v1/profiling under
# `wrk --latency -t2 -c50 -d10s`, on the release build, in three states:
#   closed  — the gate closed (no sampler, no push);
#   pull    — the gate open pull-only (no sampler running between scrapes: the baseline for "push");
#   push    — pushing to the Pyroscope stand-in every 1 s (-profiling-upload-interval 1s: the CPU sampler
#             runs the whole time and an upload of CPU, heap and threads goes out every second — the worst
#             case of the push; the default 15 s cadence costs less).
# Needs wrk (Debian package `wrk`) and the /ingest double ($NL6_PYROSCOPE_INGEST, or target/pyroscope-ingest
# built from tests/pyroscope-ingest by scripts/build-pyroscope-ingest.sh). Loopback only. Not a test: it
# prints figures.
# Usage: scripts/bench-serving.sh [DURATION, default 10s]
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-10s}
command -v wrk >/dev/null || { echo "bench-serving: wrk is missing (apt-get install wrk)" >&2; exit 2; }
INGEST=${NL6_PYROSCOPE_INGEST:-target/pyroscope-ingest}
[ -n "${NL6_PYROSCOPE_INGEST:-}" ] || bash scripts/build-pyroscope-ingest.sh "$INGEST"
cargo build --quiet --release --bin nl6
NL6=target/release/nl6
OUT=target/bench-serving
mkdir -p "$OUT"

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# boot NAME ARGS…: starts nl6, waits for its boot line, sets ADDR and NL6_PID.
boot() {
  local name=$1; shift
  "$NL6" -listen 127.0.0.1:0 "$@" 2>"$OUT/$name.err" &
  NL6_PID=$!
  PIDS+=("$NL6_PID")
  ADDR=""
  for _ in $(seq 100); do
    ADDR=$(sed -n 's/^nl6 listening on \([^;]*\);.*/\1/p' "$OUT/$name.err" 2>/dev/null | head -1 || true)
    [ -n "$ADDR" ] && return 0
    sleep 0.1
  done
  echo "bench-serving: nl6 did not boot: $(cat "$OUT/$name.err")" >&2
  exit 1
}

measure() {
  local name=$1
  wrk --latency -t2 -c50 -d"$DURATION" "http://$ADDR/api/v1/profiling" >"$OUT/$name.wrk"
  local rps p99 p50 errors threads
  rps=$(awk '/^Requests\/sec:/ { print $2 }' "$OUT/$name.wrk")
  p50=$(awk '$1 == "50%" { print $2 }' "$OUT/$name.wrk")
  p99=$(awk '$1 == "99%" { print $2 }' "$OUT/$name.wrk")
  errors=$(awk '/Non-2xx|Socket errors/ { print }' "$OUT/$name.wrk" | tr '\n' ' ')
  threads=$(awk '$1 == "Threads:" { print $2 }' "/proc/$NL6_PID/status")
  printf '%-7s %10s req/s   p50 %8s   p99 %8s   threads %3s   %s\n' "$name" "$rps" "$p50" "$p99" "$threads" "${errors:-no errors}"
  kill "$NL6_PID"
  wait "$NL6_PID" 2>/dev/null || true
}

echo "wrk --latency -t2 -c50 -d$DURATION GET /api/v1/profiling ($(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg))"
boot closed
measure closed

boot pull
curl -sS -o /dev/null -X POST "http://$ADDR/api/v1/profiling" -H 'Content-Type: application/json' -d '{"enabled":true,"server_address":""}'
measure pull

INGEST_PORT=$(free_port)
"$INGEST" -listen "127.0.0.1:$INGEST_PORT" >/dev/null 2>&1 &
PIDS+=("$!")
for _ in $(seq 100); do curl -fsS -o /dev/null "http://127.0.0.1:$INGEST_PORT/ready" 2>/dev/null && break; sleep 0.1; done
boot push -profiling-pyroscope "http://127.0.0.1:$INGEST_PORT" -profiling-upload-interval 1s
measure push
uploads=$(curl -sS "http://127.0.0.1:$INGEST_PORT/api/requests" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(len(r), "uploads,", sum(1 for x in r if x.get("status")==200), "answered 200")')
echo "push: the stand-in saw $uploads"
