#!/usr/bin/env bash
# The static binary's budget: `cargo build --release --target x86_64-unknown-linux-musl` gives at most
# 8 000 000 bytes, with what the engine needs from it still inside: the symbol table (names in every
# profile), `.eh_frame` (unwinding, catch_unwind), musl's `.debug_frame` (its unwind rules) and the GNU
# build ID (`go tool pprof` matches a profile to its binary). Exits 1 naming what is over or missing.
#
# NL6_STATIC_BIN: check this binary instead of building one.
set -euo pipefail
cd "$(dirname "$0")/.."
LIMIT=8000000
TARGET_DIR=${CARGO_TARGET_DIR:-target}
BIN=${NL6_STATIC_BIN:-$TARGET_DIR/x86_64-unknown-linux-musl/release/nl6}
[ -n "${NL6_STATIC_BIN:-}" ] || cargo build --quiet --release --target x86_64-unknown-linux-musl --bin nl6

failures=0
size=$(stat -c %s "$BIN")
if [ "$size" -le "$LIMIT" ]; then
  echo "static-size: ok: $BIN is $size bytes (budget $LIMIT)"
else
  echo "static-size: FAIL: $BIN is $size bytes, $((size - LIMIT)) over the $LIMIT budget" \
    "(docs/static-build.md says where the bytes go)" >&2
  failures=1
fi
sections=$(readelf -SW "$BIN")
for s in .symtab .strtab .eh_frame .eh_frame_hdr .debug_frame .note.gnu.build-id; do
  if grep -qF " $s " <<<"$sections"; then echo "static-size: ok: $s kept"; else
    echo "static-size: FAIL: $BIN has no $s section: the release profile or build.rs dropped it" >&2
    failures=1
  fi
done
exit "$failures"
