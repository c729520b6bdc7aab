#!/bin/bash
# RssAnon of a running nl6 (4 devices) at idle and after its first 1 s CPU profile.
# Usage: scripts/rss-first-profile.sh BINARY (e.g. target/x86_64-unknown-linux-musl/release/nl6)
set -euo pipefail
B=$1
P=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
$B -listen 127.0.0.1:$P -devices 4 -snmp-port 0 >/dev/null 2>&1 &
PID=$!
sleep 1.5
curl -s -XPOST "http://127.0.0.1:$P/api/v1/profiling" -d '{"enabled":true,"server_address":""}' >/dev/null
a=$(grep RssAnon /proc/$PID/status | awk '{print $2}')
curl -s -o /dev/null -w '%{http_code} ' "http://127.0.0.1:$P/debug/pprof/profile?seconds=1"
b=$(grep RssAnon /proc/$PID/status | awk '{print $2}')
echo "$B: RssAnon idle $a KiB, after the first 1 s CPU profile $b KiB"
kill "$PID"
