#!/usr/bin/env bash
# Installs what nl6's build and tests need on a fresh Debian machine (idempotent; needs root for apt).
#   - the musl target (static binary) through rustup;
#   - golang-go + google/pprof sources: `go tool pprof` and the Pyroscope /ingest stand-in;
#   - net-snmp tools and snmptrapd, tshark: real peers for the fleet tests;
#   - chromium: the console test; openssl: self-signed certificates for the HTTPS push test;
#   - wrk: the serving-under-load figures;
#   - binutils (objcopy: engine_symbols strips DWARF to test the release shape), libc6-dbg (names libc's
#     internal functions in profiles, from the debug file found by build ID).
set -euo pipefail
need=()
command -v go >/dev/null || need+=(golang-go)
[ -d /usr/share/gocode/src/github.com/google/pprof/profile ] || need+=(golang-github-google-pprof-dev)
command -v snmpget >/dev/null || need+=(snmp)
command -v snmptrapd >/dev/null || need+=(snmptrapd)
command -v tshark >/dev/null || need+=(tshark)
command -v chromium >/dev/null || need+=(chromium)
command -v openssl >/dev/null || need+=(openssl)
command -v wrk >/dev/null || need+=(wrk)
command -v objcopy >/dev/null || need+=(binutils)
[ -d /usr/lib/debug/.build-id ] && dpkg -s libc6-dbg >/dev/null 2>&1 || need+=(libc6-dbg)
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections 2>/dev/null || true
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if ! rustup target list --installed 2>/dev/null | grep -q x86_64-unknown-linux-musl; then
  echo "setup: adding the x86_64-unknown-linux-musl target" >&2
  rustup target add x86_64-unknown-linux-musl >/dev/null
fi
