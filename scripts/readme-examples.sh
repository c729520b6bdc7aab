#!/usr/bin/env bash
# Runs the examples of README.md and docs/*.md against a booted nl6 and checks what they print (about 40 s).
#
# The commands are read from the pages themselves: README.md, then docs/*.md in name order, joined into
# one text (target/readme-examples/pages.md) that every lookup below reads, so an example keeps working
# when it moves between pages and the pages cannot drift from what works. The lines read are those in
# ```sh blocks that start with `cargo run`, `curl`, `go tool pprof`, `snmpwalk`, `nl6 -devices` or
# `snmpget`, and the `$ go tool pprof` line of the closed-gate block. Where a lookup takes the first
# match (the boot line, the quickstart's POST), README.md's comes first. They run as written, except for
# the ports: nl6 listens on a free port instead of 8080, its devices on free ports instead of 16100+
# (`-snmp-port 0`), and the Pyroscope address 127.0.0.1:4040 is the repository's /ingest double on a free
# port. Loopback only; kills only what it started. The `nl6 collect`/`report` and static-build examples
# are covered by the collect tests and scripts/test.sh's musl step, not here.
#
# NL6_BIN: the binary to boot (default: target/release/nl6, built here as the README's first command
# does). NL6_PYROSCOPE_INGEST: the /ingest double (default: built by scripts/build-pyroscope-ingest.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=target/readme-examples
mkdir -p "$OUT"
rm -f "$OUT"/*.out "$OUT"/*.err
# The pages, one text: a blank line after each, so no page's last line runs into the next page's first.
README="$OUT/pages.md"
for page in README.md docs/*.md; do cat "$page"; echo; done >"$README"
export PPROF_TMPDIR="$PWD/$OUT/pprof" # where `go tool pprof` saves fetched profiles

NL6=${NL6_BIN:-target/release/nl6}
[ -n "${NL6_BIN:-}" ] || cargo build --quiet --release --bin nl6
INGEST=${NL6_PYROSCOPE_INGEST:-target/pyroscope-ingest}
[ -n "${NL6_PYROSCOPE_INGEST:-}" ] || bash scripts/build-pyroscope-ingest.sh "$INGEST"

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
failures=0
fail() { echo "readme-examples: FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { echo "readme-examples: ok: $*"; }

# The pages' shell lines starting with $1 (a regex), from ```sh blocks (indented ones too), in order.
readme_commands() {
  awk -v re="^$1" '{ line = $0; sub(/^ +/, "", line) }
    line ~ /^```sh/ { on = 1; next } line ~ /^```/ { on = 0 } on && line ~ re { print line }' "$README"
}
# The output block shown after the ```sh block holding the line equal to $1.
readme_block_after() {
  awk -v want="$1" 'found == 3 && /^```/ { exit } found == 3 { print }
    found && found < 3 && /^```/ { found++; next } !found && $0 == want { found = 1 }' "$README"
}
# The lines right after the line equal to $1, up to a blank line or a fence (output shown inline).
readme_lines_after() {
  awk -v want="$1" 'p && (/^$/ || /^```/) { exit } p { print } $0 == want { p = 1 }' "$README"
}
squash() { tr -s ' \n' '  ' | sed 's/^ //; s/ $//'; }
# Lines after go tool pprof's "flat  flat%" header: the table's rows.
table_rows() { awk 'seen { n++ } /flat%/ { seen = 1 } END { print n + 0 }' "$1"; }

# wait_line FILE REGEX: the first line of FILE matching REGEX, waiting up to 20 s.
wait_line() {
  for _ in $(seq 200); do
    if grep -m1 -E "$2" "$1" 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  return 1
}

# --- the /ingest double, standing in for the README's http://127.0.0.1:4040
"$INGEST" -listen 127.0.0.1:0 2>"$OUT/ingest.err" &
PIDS+=("$!")
ingest_url=$(wait_line "$OUT/ingest.err" 'http://127\.0\.0\.1:[0-9]+' | grep -oE 'http://127\.0\.0\.1:[0-9]+') ||
  { echo "readme-examples: the /ingest double did not start: $(cat "$OUT/ingest.err")" >&2; exit 1; }
ingest_hostport=${ingest_url#http://}

# --- boot: the README's first command, on free ports
boot_line=$(readme_commands 'cargo run --release -- ' | head -1)
[ -n "$boot_line" ] || { echo "readme-examples: no 'cargo run --release --' line in README.md" >&2; exit 1; }
read -ra boot_args <<<"${boot_line#cargo run --release -- }"
boot_args=("${boot_args[@]/127.0.0.1:8080/127.0.0.1:0}")
"$NL6" "${boot_args[@]}" -snmp-port 0 2>"$OUT/nl6.err" &
PIDS+=("$!")
hostport=$(wait_line "$OUT/nl6.err" '^nl6 listening on ' | sed -n 's/^nl6 listening on \([^;]*\);.*/\1/p') ||
  { echo "readme-examples: nl6 did not boot: $(cat "$OUT/nl6.err")" >&2; exit 1; }
snmp0=$(curl -s "http://$hostport/api/v1/devices" | grep -oE '"snmp":\{[^}]*"port":[0-9]+' | head -1 | grep -oE '[0-9]+$')
echo "readme-examples: nl6 on $hostport (${boot_args[*]} -snmp-port 0), device 0 on UDP $snmp0, double on $ingest_hostport"

# rewrite: the README's addresses to this run's.
rewrite() {
  sed -e "s/127\.0\.0\.1:8080/$hostport/g; s/localhost:8080/$hostport/g" \
    -e "s/127\.0\.0\.1:4040/$ingest_hostport/g; s/127\.0\.0\.1:16100/127.0.0.1:$snmp0/g"
}
# run NAME LINE: runs one README line (rewritten) with bash; output (both streams) in $OUT/NAME.out.
run() {
  local cmd
  cmd=$(rewrite <<<"$2")
  bash -c "$cmd" >"$OUT/$1.out" 2>&1 || true
}

# The boot lines the README shows.
expected=$(readme_block_after "$boot_line" | rewrite)
actual=$(head -2 "$OUT/nl6.err")
if [ "$(squash <<<"$expected")" = "$(squash <<<"$actual")" ]; then pass "boot lines as shown"; else
  fail "boot lines: README shows [$expected], nl6 printed [$actual]"; fi

# --- closed gate: the `$ go tool pprof …` line (docs/pull.md) prints the 503 message shown under it.
closed_line=$(awk '/^\$ go tool pprof/ { sub(/^\$ /, ""); print; exit }' "$README")
run closed "$closed_line"
expected=$(readme_lines_after "\$ $closed_line" | rewrite)
if [ "$(squash <"$OUT/closed.out")" = "$(squash <<<"$expected")" ]; then
  pass "closed gate: go tool pprof prints the 503 message docs/pull.md shows"
else fail "closed gate: docs/pull.md shows [$expected], got [$(cat "$OUT/closed.out")]"; fi

# --- the REST API block (docs/rest-api.md), in order; the GET's answer is the one shown under it.
i=0
while IFS= read -r line; do
  i=$((i + 1))
  run "rest-$i" "$line"
  body=$(cat "$OUT/rest-$i.out")
  case "$line" in
    *"-X POST"*'"enabled":false'*) want='"enabled":false' ;;
    *"-X POST"*) want='"enabled":true' ;;
    *)
      want=$(readme_lines_after "$line" | tr -d ' \n')
      [ "$(tr -d ' \n' <<<"$body")" = "$want" ] && pass "REST: $line" || fail "REST: $line: docs/rest-api.md shows $want, got $body"
      continue
      ;;
  esac
  if grep -q '"data"' <<<"$body" && grep -qF "$want" <<<"$body"; then pass "REST: $line"; else fail "REST: $line: $body"; fi
done < <(readme_commands "curl -s (-X POST )?localhost:8080/api/v1/profiling")
# The REST API block's push example pushed to the double until the next POST flushed it.
uploads=$(curl -s "$ingest_url/api/requests" | grep -o '"status":200' | wc -l)
[ "$uploads" -gt 0 ] && pass "REST: the push example uploaded $uploads profiles to the double" ||
  fail "REST: the push example uploaded nothing: $(curl -s "$ingest_url/api/requests")"

# --- the pull surface (gate open pull-only, as the quickstart opens it)
run open "$(readme_commands "curl -s -X POST 127.0.0.1:8080/api/v1/profiling" | head -1)"
grep -q '"pushing":false' "$OUT/open.out" || fail "quickstart POST did not open pull-only: $(cat "$OUT/open.out")"
# The same command twice (the quickstart's -tags line is also in this block) runs once.
# (The engine crate's embed example, on 127.0.0.1:6060, is checked on its own below.)
mapfile -t pull < <(readme_commands "(go tool pprof|curl -s 'http://127.0.0.1:8080/debug)" |
  grep -v '127\.0\.0\.1:6060' | awk '{ key = $0; sub(/ *#.*/, "", key) } !seen[key]++')
# The delta heap takes 30 s and holds no CPU profiler: it runs beside the CPU profiles.
delta_pids=()
for j in "${!pull[@]}"; do
  if [[ ${pull[$j]} == *"-seconds "* ]]; then run "pull-$j" "${pull[$j]}" & delta_pids+=("$!"); fi
done
for j in "${!pull[@]}"; do
  [[ ${pull[$j]} == *"-seconds "* ]] || run "pull-$j" "${pull[$j]}"
done
for p in "${delta_pids[@]}"; do wait "$p"; done
for j in "${!pull[@]}"; do
  line=${pull[$j]} out="$OUT/pull-$j.out"
  case "$line" in
    *"-tags"*)
      missing=""
      subsystems="snmp trap syslog flow scenario gnmi"
      # flow, trap and syslog take a few tens of ms of CPU in 5 s: on a loaded machine one profile can
      # draw none of their samples, so up to three profiles are taken and one must show them all.
      for attempt in 1 2 3; do
        missing=""
        for s in $subsystems; do grep -qE ": $s\$" "$out" || missing+=" $s"; done
        [ -z "$missing" ] || [ "$attempt" = 3 ] && break
        run "pull-$j" "$line"
      done
      [ -z "$missing" ] && pass "$line: every subsystem (profile $attempt)" || fail "$line: no$missing in $(cat "$out")"
      # The quickstart's line is followed by the output the README shows: it names them all too.
      shown=$(readme_block_after "$line") shown_missing=""
      for s in $subsystems; do [ -z "$shown" ] || grep -qE ": $s\$" <<<"$shown" || shown_missing+=" $s"; done
      [ -z "$shown_missing" ] || fail "$line: the README's output shows no$shown_missing" ;;
    *"go tool pprof"*)
      # Rows, and nl6's own functions named in them (the release build keeps its symbol table).
      rows=$(table_rows "$out")
      if [ "$rows" -gt 0 ] && ! grep -q "Total samples = 0" "$out" && grep -q " nl6::" "$out"; then
        pass "$line: $rows rows naming nl6's functions"
      else fail "$line: an empty or unnamed table: $(cat "$out")"; fi ;;
    *goroutine*)
      n=$(grep -c '^goroutine ' "$out" || true)
      [ "$n" -ge 5 ] && pass "$line: $n threads" || fail "$line: $(head -c 400 "$out")" ;;
  esac
done

# --- the fleet: snmpwalk
while IFS= read -r line; do
  run snmpwalk "$line"
  grep -q "nl6 simulated router" "$OUT/snmpwalk.out" && pass "$line" || fail "$line: $(cat "$OUT/snmpwalk.out")"
done < <(readme_commands "snmpwalk ")

# --- the fleet: snmpget of a 32-bit counter and its 64-bit ifXTable counter, read in one request: the
# Counter64 is past 2^32 (eth3 carried 5 GiB before boot) and the Counter32 is it modulo 2^32.
while IFS= read -r line; do
  run snmpget "$line"
  c32=$(grep -oE 'Counter32: [0-9]+' "$OUT/snmpget.out" | head -1 | cut -d' ' -f2)
  c64=$(grep -oE 'Counter64: [0-9]+' "$OUT/snmpget.out" | head -1 | cut -d' ' -f2)
  if [ -n "$c32" ] && [ -n "$c64" ] && [ "$c64" -gt 4294967296 ] && [ $((c64 % 4294967296)) = "$c32" ]; then
    pass "$line"
  else fail "$line: want a Counter32 equal to a Counter64 > 2^32 modulo 2^32, got $(cat "$OUT/snmpget.out")"; fi
done < <(readme_commands 'snmpget ' | grep -F ' 127.0.0.1:16100 ')

# --- fleets at scale (docs/scale.md: "A fleet at scale", "Ten million devices"): each `nl6 -devices N -device-net`
# line as written (its -port default, its range and -snmp-port), then each snmpget line of the same block
# must print the sysName its comment quotes.
scale_lines=$(readme_commands 'nl6 -devices [0-9]* -device-net ')
grep -q '^nl6 -devices 30000 -device-net ' <<<"$scale_lines" ||
  fail "no 'nl6 -devices 30000 -device-net' line in README.md or docs/*.md"
while IFS= read -r scale_line; do
  [ -n "$scale_line" ] || continue
  read -ra scale_args <<<"${scale_line#nl6 }"
  "$NL6" "${scale_args[@]}" 2>"$OUT/scale.err" </dev/null &
  scale_pid=$!
  PIDS+=("$scale_pid")
  if wait_line "$OUT/scale.err" '^nl6 listening on ' >/dev/null; then
    while IFS= read -r line; do
      want=$(sed -n 's/.*# .*"\([^"]*\)".*/\1/p' <<<"$line")
      bash -c "${line%%#*}" >"$OUT/snmpget.out" 2>&1 </dev/null || true
      [ -n "$want" ] && grep -qF "\"$want\"" "$OUT/snmpget.out" && pass "$line" ||
        fail "$line: want \"$want\", got $(cat "$OUT/snmpget.out")"
    done < <(readme_lines_after "$scale_line" | grep '^snmpget ')
  else fail "$scale_line did not start: $(cat "$OUT/scale.err")"; fi
  kill "$scale_pid" 2>/dev/null || true
  wait "$scale_pid" 2>/dev/null || true
done <<<"$scale_lines"

# --- the engine crate's embed example (docs/layout.md): as written, on 127.0.0.1:6060
embed_line=$(readme_commands 'cargo run -p nl6-profile --example embed -- ' | head -1)
if [ -z "$embed_line" ]; then
  fail "no 'cargo run -p nl6-profile --example embed' line in README.md or docs/*.md"
else
  cargo build --quiet -p nl6-profile --example embed
  bash -c "exec $embed_line" 2>"$OUT/embed.err" >/dev/null &
  PIDS+=("$!")
  if wait_line "$OUT/embed.err" '^embed: serving ' >/dev/null; then
    while IFS= read -r line; do
      bash -c "$line" >"$OUT/embed-tags.out" 2>&1 || true
      grep -qE ': example$' "$OUT/embed-tags.out" && pass "$line: subsystem example" ||
        fail "$line: no example subsystem in $(cat "$OUT/embed-tags.out")"
    done < <(readme_commands 'go tool pprof -tags http://127\.0\.0\.1:6060')
  else fail "$embed_line did not start: $(cat "$OUT/embed.err")"; fi
fi

# --- the push crate's example (docs/layout.md): pushes to the double (for 127.0.0.1:4040) and says so
push_embed_line=$(readme_commands 'cargo run -p nl6-push --example push_embed -- ' | head -1)
if [ -z "$push_embed_line" ]; then
  fail "no 'cargo run -p nl6-push --example push_embed' line in README.md or docs/*.md"
else
  cargo build --quiet -p nl6-push --example push_embed
  run push-embed "$push_embed_line"
  grep -qE '^push: flushed=true uploads=[1-9][0-9]* sdk_errors=0 last_error=None$' "$OUT/push-embed.out" &&
    pass "$push_embed_line: every upload accepted" ||
    fail "$push_embed_line: $(cat "$OUT/push-embed.out")"
fi

# --- booting with -profiling-pyroscope prints the line the README quotes
prose=$(tr '\n' ' ' <"$README")
push_flag=$(grep -oE 'Add `-profiling-pyroscope [^`]*`' <<<"$prose" | head -1 | sed 's/^Add `//; s/`$//' || true)
said=$(grep -oE 'the line then says *`[^`]*`' <<<"$prose" | head -1 | sed 's/.*`\([^`]*\)`/\1/' || true)
[ -n "$push_flag" ] && [ -n "$said" ] || fail "the README no longer says what -profiling-pyroscope prints at boot"
read -ra push_args <<<"$(rewrite <<<"$push_flag")"
"$NL6" -listen 127.0.0.1:0 -snmp-port 0 "${push_args[@]}" 2>"$OUT/push.err" &
PIDS+=("$!")
if wait_line "$OUT/push.err" '^nl6 listening on ' | grep -qF "$(rewrite <<<"$said")"; then
  pass "boot with $push_flag says \"$said\""
else fail "boot with $push_flag: $(cat "$OUT/push.err")"; fi

if [ "$failures" -gt 0 ]; then
  echo "readme-examples: $failures failure(s); outputs in $OUT" >&2
  exit 1
fi
echo "readme-examples: every example checked"
