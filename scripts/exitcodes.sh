#!/usr/bin/env bash
# Checks sluice's exit codes (0 success, 1 failure, 2 usage error) with a
# built binary: builds tools/cmd/sluice and tools/cmd/sluice-lab into a
# temporary directory, starts `sluice serve` on 127.0.0.1 as the server to
# call, runs every case of tools/cmd/internal/cli/testdata/exitcodes.txt
# (the cases TestExitCodes runs in process; a "lab" line with sluice-lab,
# and with sluice, which must refuse it naming sluice-lab), checks that `sluice call` prints only the response body on
# stdout (yab's envelope with -o yab), that a Thrift method without -t is a
# usage error within a second, and stops the server, which must exit 0 on
# SIGTERM.
set -euo pipefail
cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
server=""
cleanup() {
  if [ -n "$server" ]; then
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

go build -o "$tmp/sluice" ./tools/cmd/sluice
go build -o "$tmp/sluice-lab" ./tools/cmd/sluice-lab
bin="$tmp/sluice"
lab="$tmp/sluice-lab"

"$bin" serve --listen 127.0.0.1:0 >"$tmp/serve.out" 2>"$tmp/serve.err" &
server=$!
peer=""
for _ in $(seq 300); do # at most 30 s
  peer=$(awk '/^serving /{print $4}' "$tmp/serve.out")
  [ -n "$peer" ] && break
  kill -0 "$server" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$peer" ]; then
  echo "sluice serve did not start:"; cat "$tmp/serve.err"; exit 1
fi
dead=127.0.0.1:1
idl=$PWD/tools/cmd/internal/cli/testdata/exitcodes.thrift

cases=0
failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
while IFS= read -r line; do
  case "$line" in '' | '#'*) continue ;; esac
  read -ra words <<<"$line"
  run=$bin
  if [ "${words[0]}" = lab ]; then # sluice-lab's line: sluice refuses it
    run=$lab
    words=("${words[@]:1}")
  fi
  want=${words[0]}
  args=("${words[@]:1}")
  args=("${args[@]//\$PEER/$peer}")
  args=("${args[@]//\$DEAD/$dead}")
  args=("${args[@]//\$IDL/$idl}")
  cases=$((cases + 1))
  set +e
  "$run" "${args[@]}" >"$tmp/out" 2>"$tmp/err"
  got=$?
  set -e
  if [ "$got" != "$want" ]; then
    fail "$(basename "$run") ${args[*]}: exit $got, want $want"
    sed 's/^/    /' "$tmp/err" | head -5
  fi
  if [ "$run" = "$lab" ]; then
    set +e
    "$bin" "${args[@]}" >"$tmp/out" 2>"$tmp/err"
    got=$?
    set -e
    if [ "$got" != 2 ] || ! grep -q 'is in sluice-lab' "$tmp/err"; then
      fail "sluice ${args[*]}: exit $got, want 2 naming sluice-lab"
    fi
  fi
done <tools/cmd/internal/cli/testdata/exitcodes.txt

out=$("$bin" call -p "$peer" -s echo -m echo -r '{"key": "a"}' 2>"$tmp/err")
[ "$out" = '{"key": "a"}' ] || fail "sluice call printed $out, want only the body"
[ ! -s "$tmp/err" ] || fail "sluice call without -v wrote to stderr: $(cat "$tmp/err")"

# -o yab prints yab's envelope, then a blank line, and nothing on stderr.
out=$("$bin" call -p "$peer" echo echo '{"key": "a"}' -o yab 2>"$tmp/err"; echo .)
want=$(printf '{\n  "body": {\n    "key": "a"\n  },\n  "ok": true,\n  "trace": "0"\n}\n\n.')
[ "$out" = "$want" ] || fail "sluice call -o yab printed $out, want $want"
[ ! -s "$tmp/err" ] || fail "sluice call -o yab wrote to stderr: $(cat "$tmp/err")"

# A Thrift method without -t is a usage error at once, naming -t.
start=$(date +%s%N)
set +e
"$bin" call -p "$peer" echo Echo::echo --timeout 10s >"$tmp/out" 2>"$tmp/err"
got=$?
set -e
ms=$((($(date +%s%N) - start) / 1000000))
[ "$got" = 2 ] || fail "sluice call Echo::echo without -t: exit $got, want 2"
grep -q -- '-t/--thrift' "$tmp/err" || fail "sluice call Echo::echo without -t does not name -t: $(cat "$tmp/err")"
[ "$ms" -lt 1000 ] || fail "sluice call Echo::echo without -t took ${ms}ms, want under a second"

kill -TERM "$server"
set +e
wait "$server"
got=$?
set -e
server=""
[ "$got" = 0 ] || fail "sluice serve: exit $got on SIGTERM, want 0"

echo "exit codes: $cases cases, $failed failed"
[ "$failed" = 0 ]
