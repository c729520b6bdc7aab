#!/usr/bin/env bash
# A fleet fully alive (benches/fleet_alive.rs): nl6 with N devices on -device-net sending traps, syslog and
# NetFlow at the default intervals to counting sinks on loopback while benches/snmp_load.rs GETs across
# every device's address, for a 60 s window; prints packets/s per kind (sent and received), drops (nl6's,
# the kernel's at each sink, and what is unaccounted), the scheduler's lateness p50/p99, GET/s and CPU.
# Loopback only. Not a test: it prints figures (the machine's load is printed first).
# Usage: scripts/bench-alive.sh [DEVICES, default 1000000] [SECONDS, default 60]
#   NL6_ALIVE_TRAPD=1: traps to snmptrapd (Debian package snmptrapd) instead of the counting sink;
#   NL6_ALIVE_PROFILE=FILE: a 5 s CPU profile of nl6 mid-window (read it with go tool pprof -top FILE);
#   NL6_ALIVE_LOAD="THREADS INFLIGHT" (default "1 4") shapes the SNMP load.
set -euo pipefail
cd "$(dirname "$0")/.."
export NL6_ALIVE_DEVICES=${1:-1000000} NL6_ALIVE_SECS=${2:-60}
cargo build --quiet --release --bin nl6
# The bench's own executable (deps/NAME-hash): cargo also lists the nl6 binary a bench depends on.
bench_exe() {
  cargo bench --quiet --bench "$1" --no-run --message-format=json 2>/dev/null |
    sed -n "s/.*\"executable\":\"\([^\"]*\/deps\/$1-[^\"]*\)\".*/\1/p" | tail -1
}
NL6_SNMP_LOAD=$(bench_exe snmp_load)
ALIVE=$(bench_exe fleet_alive)
[ -x "$NL6_SNMP_LOAD" ] && [ -x "$ALIVE" ] || { echo "bench-alive: the benches did not build" >&2; exit 1; }
export NL6_SNMP_LOAD
export NL6_BIN=${NL6_BIN:-${CARGO_TARGET_DIR:-target}/release/nl6}
ulimit -n "$(ulimit -Hn)"
echo "machine: $(nproc) cores; $(uptime)"
"$ALIVE"
