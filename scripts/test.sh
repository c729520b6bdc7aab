#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what is missing (scripts/setup.sh), then
#   1. cargo fmt --check and clippy (-D warnings);
#   2. every test on the host (glibc) build;
#   3. the engine and pull-surface tests again on the static musl build (profiles from the static binary);
#   4. a 60 s signal-safety soak of the CPU + heap samplers on the static build.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export NL6_PYROSCOPE_INGEST="$PWD/target/pyroscope-ingest"
# The stand-in for Pyroscope's /ingest lives in the shared folder beside the checkout (NL6_SHARED overrides).
[ -x "$NL6_PYROSCOPE_INGEST" ] || bash "${NL6_SHARED:-../shared}/pyroscope-ingest/build.sh" "$NL6_PYROSCOPE_INGEST"

echo "== fmt + clippy"
cargo fmt --check
cargo clippy --all-targets -- -D warnings

echo "== tests (host build)"
# Benches are measurements, not tests (run them with `cargo bench`); here they are only compiled.
cargo build --benches --quiet
cargo test --lib --bins --tests --examples --no-fail-fast -- --test-threads=2
# A label scope's stores are deleted only by the optimiser: this test can fail only in a release build.
cargo test --release --test engine_label_scope

echo "== tests (static musl build)"
# The engine, the pull surface and the push again, now from the static binary and static test programs.
MUSL_TESTS=$(ls tests/*.rs | xargs -n1 basename | sed 's/\.rs$//' \
  | grep -E '^(engine_|serve_pull|push_engine|push_process|push_binary|fleet_labels)' | sed 's/^/--test /' | tr '\n' ' ')
# shellcheck disable=SC2086
cargo test --target x86_64-unknown-linux-musl --no-fail-fast $MUSL_TESTS -- --test-threads=1

echo "== soak (static musl build, 60 s; scripts/soak.sh 600 is the 10-minute version)"
bash scripts/soak.sh 60
