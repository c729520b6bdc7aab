#!/usr/bin/env bash
# SNMP GET rate: net-snmp's snmpd and nl6 (1 device; 1 000 and 10 000 devices per port, the latter
# also served by epoll where the build has -snmp-io; 10 000 and
# 30 000, 1 000 000 (127.0.0.0/12) and 10 000 000 (127.0.0.0/8) devices under -device-net) under the
# same load, one after the other in one run, as one table; and the 10 000 -device-net fleet once more
# at 80 % of the GET/s it just served, open-loop (`-rate`), for the latency below the maximum.
# The load is benches/snmp_load.rs (GET sysName.0, SNMPv2c, community public): T client threads with K
# requests in flight each, spread over every device's address or port; GET/s and the answers' latency
# percentiles come from it, RSS (VmRSS after the load) and CPU (user + system over the load, boot
# excluded, % of one core) from /proc, boot from the agent's start to its first answer (waited for up to
# READY_WITHIN seconds, default 120: the 10 000 000 fleet may boot slowly).
# Needs snmpd (Debian package `snmpd`; scripts/setup.sh checks it). Loopback only. Not a test: it prints
# figures (the machine's other load shows in the header's load average).
# Usage: [NL6_BEFORE=older/nl6] [NL6=nl6 LOAD=snmp_load] scripts/bench-snmp.sh [SECONDS per row, default 10] [THREADS, default 2]
# [IN FLIGHT per thread, default 8]
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-10}
THREADS=${2:-2}
INFLIGHT=${3:-8}
READY_WITHIN=${READY_WITHIN:-120}
SNMPD=$(command -v snmpd || echo /usr/sbin/snmpd)
[ -x "$SNMPD" ] || { echo "bench-snmp: snmpd is missing (apt-get install snmpd)" >&2; exit 2; }
# One build for both (a `cargo bench` build would rebuild the library under another profile): the
# load generator is the bench target's executable. NL6= and LOAD= (both) use binaries already built.
if { [ -n "${NL6:-}" ] && [ -z "${LOAD:-}" ]; } || { [ -z "${NL6:-}" ] && [ -n "${LOAD:-}" ]; }; then
  echo "bench-snmp: give both NL6= and LOAD= (prebuilt binaries), or neither (this script builds both)" >&2
  exit 2
fi
if [ -z "${NL6:-}" ]; then
  LOAD=$(cargo build --quiet --release --bin nl6 --bench snmp_load --message-format=json 2>/dev/null |
    grep '"kind":\["bench"\]' | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)
  NL6=${CARGO_TARGET_DIR:-target}/release/nl6
fi
[ -x "$LOAD" ] || { echo "bench-snmp: the snmp_load bench did not build" >&2; exit 1; }
[ -x "$NL6" ] || { echo "bench-snmp: no nl6 binary at $NL6" >&2; exit 1; }
OUT=${CARGO_TARGET_DIR:-target}/bench-snmp
mkdir -p "$OUT"
# 10 000 per-port sockets plus the rest: the hard limit of this shell, whatever the soft one is.
ulimit -n "$(ulimit -Hn)"

PID=""
LAGS="" # the open-loop rows' send lags, printed after the table
cleanup() { [ -z "$PID" ] || kill "$PID" 2>/dev/null || true; }
trap cleanup EXIT

# A base port with COUNT free UDP ports above it (below the ephemeral range, so no client takes one
# while the agent starts). Another process can still bind one first: the agent then refuses to start,
# and run() tries another base.
free_base() {
  python3 - "$1" <<'EOF'
import random, socket, sys
count = int(sys.argv[1])
for _ in range(50):
    base = random.randrange(10000, 32000 - count)
    socks = []
    try:
        for p in range(base, base + count):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind(("0.0.0.0" if count == 1 else "127.0.0.1", p))
            socks.append(s)
    except OSError:
        continue
    finally:
        for s in socks:
            s.close()
    print(base)
    sys.exit(0)
sys.exit("bench-snmp: no run of %d free UDP ports found" % count)
EOF
}

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p; s/^$1=\([^ ]*\).*/\1/p" <<<"$2" | head -1; }
ms() { awk -v v="$1" 'BEGIN { printf "%.3f", v / 1000 }'; } # µs as ms, 3 decimals
ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }

# row NAME LOAD_ARGS -- AGENT COMMAND…: starts the agent, loads it, prints one table row, stops it.
# BASE in the arguments is replaced by a free base port; a refused start is retried on another.
row() {
  local name=$1 count=$2; shift 2
  local key=${name//[^A-Za-z0-9]/_}
  local load_args=() agent=()
  while [ "$1" != "--" ]; do load_args+=("$1"); shift; done
  shift
  agent=("$@")
  local attempt line
  for attempt in 1 2 3; do
    local base; base=$(free_base "$count")
    local t0; t0=$(date +%s%N)
    "${agent[@]//BASE/$base}" >"$OUT/$key.out" 2>"$OUT/$key.err" &
    PID=$!
    # First the boot: one GET a millisecond until the agent answers (a short load, thrown away).
    local ready; ready=$("$LOAD" "${load_args[@]//BASE/$base}" -threads 1 -inflight 1 -secs 0.01 \
      -ready-since "$t0" -ready-within "$READY_WITHIN" 2>>"$OUT/$key.err") || ready=""
    local before; before=$(ticks "$PID" 2>/dev/null || echo 0)
    line=""
    [ -z "$ready" ] || line=$("$LOAD" "${load_args[@]//BASE/$base}" -threads "$THREADS" \
      -inflight "$INFLIGHT" -secs "$SECS" 2>>"$OUT/$key.err") || line=""
    if [ -n "$line" ] && kill -0 "$PID" 2>/dev/null; then
      local after rss; after=$(ticks "$PID"); rss=$(awk '$1 == "VmRSS:" { print $2 }' "/proc/$PID/status")
      kill "$PID"; wait "$PID" 2>/dev/null || true; PID=""
      local cpu; cpu=$(awk -v t=$((after - before)) -v s="$SECS" 'BEGIN { printf "%.0f", t / (s + 0.5) }')
      printf '| %s | %s | %s ms | %s ms | %s ms | %s | %.1f MB | %s s | %s %% |\n' "$name" \
        "$(field gets_per_s "$line")" \
        "$(ms "$(field p50_us "$line")")" \
        "$(ms "$(field p99_us "$line")")" \
        "$(ms "$(field p999_us "$line")")" \
        "$(field lost "$line")" "$(awk -v k="$rss" 'BEGIN { print k / 1000 }')" \
        "$(field ready_s "$ready")" "$cpu"
      echo "$line" >"$OUT/$key.load"
      local lag; lag=$(field send_lag_p99_us "$line")
      [ -z "$lag" ] || [ "$lag" = - ] || LAGS+="- $name: $(ms "$lag") ms"$'\n'
      return 0
    fi
    kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; PID=""
  done
  echo "| $name | did not run: $(tail -2 "$OUT/$key.err" | tr '\n' ' ') |||||||"
}

# 80 % of the GET/s the row NAME served (0 when it did not run).
rate_of() {
  awk -v g="$(field gets_per_s "$(cat "$OUT/${1//[^A-Za-z0-9]/_}.load" 2>/dev/null || true)")" 'BEGIN { printf "%.0f", 0.8 * g }'
}

SNMPD_DIR=$(mktemp -d "$OUT/snmpd.XXXXXX")
cat >"$SNMPD_DIR/snmpd.conf" <<EOF
rocommunity public 127.0.0.1
sysName bench-snmpd
EOF

echo "snmp_load: GET sysName.0, $THREADS client threads × $INFLIGHT in flight, $SECS s a row ($(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg))"
echo
echo "| agent | GET/s | p50 | p99 | p99.9 | lost | RSS | boot | CPU |"
echo "|---|---|---|---|---|---|---|---|---|"
# -f: stay in the foreground; -C: no other config file; -Lf: its log in the temp dir; the persistent
# state goes to the temp dir too (SNMP_PERSISTENT_DIR), never to /var/lib/snmp.
row "net-snmp snmpd, 1 agent" 1 127.0.0.1:BASE -- env SNMP_PERSISTENT_DIR="$SNMPD_DIR" \
  "$SNMPD" -f -C -c "$SNMPD_DIR/snmpd.conf" -Lf "$SNMPD_DIR/log" -p "$SNMPD_DIR/pid" udp:127.0.0.1:BASE
# nl6_rows TAG BINARY: the nl6 rows for one build.
nl6_rows() {
  local tag=$1 bin=$2
  local net="nl6$tag, 10 000 devices, -device-net"
  row "nl6$tag, 1 device" 1 127.0.0.1:BASE -- "$bin" -listen 127.0.0.1:0 -devices 1 -snmp-port BASE
  row "nl6$tag, 1 000 devices per port" 1000 127.0.0.1:BASE -ports 1000 -- \
    "$bin" -listen 127.0.0.1:0 -devices 1000 -bind 127.0.0.1 -snmp-port BASE
  row "nl6$tag, 10 000 devices per port" 10000 127.0.0.1:BASE -ports 10000 -- \
    "$bin" -listen 127.0.0.1:0 -devices 10000 -bind 127.0.0.1 -snmp-port BASE
  # The same served by epoll, where the build has -snmp-io (per port it serves through io_uring).
  if "$bin" -h 2>&1 | grep -q -- '-snmp-io'; then
    row "nl6$tag, 10 000 devices per port, -snmp-io epoll" 10000 127.0.0.1:BASE -ports 10000 -- \
      "$bin" -listen 127.0.0.1:0 -devices 10000 -bind 127.0.0.1 -snmp-port BASE -snmp-io epoll
  fi
  row "$net" 1 127.1.0.1:BASE -addrs 10000 -- \
    "$bin" -listen 127.0.0.1:0 -devices 10000 -device-net 127.1.0.0/16 -snmp-port BASE
  local rate; rate=$(rate_of "$net")
  [ "$rate" = 0 ] || row "$net, open-loop at $rate GET/s" 1 127.1.0.1:BASE -addrs 10000 -rate "$rate" -- \
    "$bin" -listen 127.0.0.1:0 -devices 10000 -device-net 127.1.0.0/16 -snmp-port BASE
  row "nl6$tag, 30 000 devices, -device-net" 1 127.1.0.1:BASE -addrs 30000 -- \
    "$bin" -listen 127.0.0.1:0 -devices 30000 -device-net 127.1.0.0/16 -snmp-port BASE
  row "nl6$tag, 1 000 000 devices, -device-net /12" 1 127.0.0.1:BASE -addrs 1000000 -- \
    "$bin" -listen 127.0.0.1:0 -devices 1000000 -device-net 127.0.0.0/12 -snmp-port BASE
  row "nl6$tag, 10 000 000 devices, -device-net /8" 1 127.0.0.1:BASE -addrs 10000000 -- \
    "$bin" -listen 127.0.0.1:0 -devices 10000000 -device-net 127.0.0.0/8 -snmp-port BASE
}
# NL6_BEFORE=path/to/an/older/nl6: its rows too, in the same run, for a before/after comparison.
[ -z "${NL6_BEFORE:-}" ] || nl6_rows " (before)" "$NL6_BEFORE"
nl6_rows "" "$NL6"
# The open-loop rows' latency runs from each request's send; how late the generator itself sent them
# (short of CPU on a machine it shares) is apart.
[ -z "$LAGS" ] || printf '\nThe generator'"'"'s own send lag, p99 (open-loop rows):\n%s' "$LAGS"
