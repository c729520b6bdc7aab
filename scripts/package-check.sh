#!/usr/bin/env bash
# The engine crate as crates.io would ship it: `cargo package` and `cargo publish --dry-run` must pass,
# and the packaged crate's own tests must pass when unpacked and built outside this workspace (no
# .cargo/config.toml of ours, only the one build setting its README asks of every user).
#   bash scripts/package-check.sh
# Uses $CARGO_TARGET_DIR (default target/) for the package and for the unpacked crate's build: the flags
# below are the workspace's own host flags, so the dependencies the workspace built are reused and only
# the packaged engine and its tests compile.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-$PWD/target}"
# No verify build here: the unpacked crate's `cargo test` below builds the packaged sources anyway.
cargo package -p nl6-profile --quiet --allow-dirty --no-verify
# The dry run checks what crates.io would refuse.
cargo publish --dry-run --no-verify -p nl6-profile --quiet --allow-dirty
version=$(sed -n 's/^version = "\(.*\)"/\1/p' crates/nl6-profile/Cargo.toml | head -1)
# Unpacked at the same place every run, outside the workspace: with the target directory shared, cargo
# keys the packaged crate's build by that path, and a test binary kept from an earlier run must find its
# CARGO_MANIFEST_DIR (a fresh temporary directory each run left it pointing at a deleted one). Every file
# is touched, so the packaged sources always rebuild.
unpacked=/tmp/nl6-profile-package-check
rm -rf "$unpacked"
mkdir -p "$unpacked"
tar xzf "$target/package/nl6-profile-$version.crate" -C "$unpacked"
find "$unpacked" -type f -exec touch {} +
cd "$unpacked/nl6-profile-$version"
# Outside the workspace: cargo finds no .cargo/config.toml of ours above /tmp.
test ! -e .cargo && test ! -e ../.cargo && test ! -e /tmp/.cargo
# The sampler tests want one CPU profile per process at a time; the binaries run one after another.
env -u CARGO_ENCODED_RUSTFLAGS RUSTFLAGS="-C force-frame-pointers=yes -C link-arg=-Wl,--build-id" \
  cargo test --quiet --no-fail-fast --target-dir "$target" -- --test-threads=1
echo "package-check: packaged nl6-profile-$version builds and passes its tests outside the workspace"
