#!/usr/bin/env bash
# Builds the push tests' Pyroscope /ingest double (tests/pyroscope-ingest) into $1 (default
# target/pyroscope-ingest). Offline: Debian's Go in GOPATH mode, with google/pprof from Debian's
# golang-github-google-pprof-dev as the only import beyond the standard library. Does nothing when the
# binary is newer than every source file. Concurrent runs are safe (build to a temporary name, then rename).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/target/pyroscope-ingest}
# The build runs in the source folder: make a relative output path absolute first.
[[ $out == /* ]] || out=$PWD/$out
src=$root/tests/pyroscope-ingest
pprof_src=/usr/share/gocode/src/github.com/google/pprof/profile

missing=()
command -v go >/dev/null || missing+=(golang-go)
[ -d "$pprof_src" ] || missing+=(golang-github-google-pprof-dev)
if [ ${#missing[@]} -gt 0 ]; then
  echo "build-pyroscope-ingest: missing Debian package(s): ${missing[*]}" >&2
  echo "  install them with: sudo apt-get install ${missing[*]}   (or run scripts/setup.sh as root)" >&2
  exit 1
fi

if [ -x "$out" ] && [ -z "$(find "$src" "$0" -newer "$out" -type f | head -1)" ]; then
  exit 0
fi
mkdir -p "$(dirname "$out")" "$root/target/go-build-cache"
tmp="$out.tmp.$$"
trap 'rm -f "$tmp"' EXIT
(cd "$src" && env -u GOFLAGS GO111MODULE=off GOPATH=/usr/share/gocode GOPROXY=off \
  GOCACHE="$root/target/go-build-cache" go build -o "$tmp" .)
mv -f "$tmp" "$out"
echo "build-pyroscope-ingest: built $out" >&2
