# Sourced by the scripts that run servers in the background (bash, set -e):
# a temporary directory $tmp, and start, whose servers are stopped, and
# $tmp removed, when the script exits.
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait "${pids[@]}" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# start NAME COMMAND...: runs COMMAND in the background (in this shell, not
# a subshell, so that cleanup knows it), its stdout in $tmp/NAME.out and
# its stderr in $tmp/NAME.err, and sets $peer to the first 127.0.0.1:PORT
# it prints on stdout, waiting up to 10 s for it.
start() {
  local name=$1
  shift
  : >"$tmp/$name.out" # before the background job opens it: the loop below reads it at once
  "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  pids+=($!)
  peer=""
  for _ in $(seq 100); do
    peer=$(grep -m1 -oE '127\.0\.0\.1:[0-9]+' "$tmp/$name.out" || true)
    [ -n "$peer" ] && return
    sleep 0.1
  done
  echo "$name did not start:" >&2
  cat "$tmp/$name.out" "$tmp/$name.err" >&2
  exit 1
}

# await FILE TEXT: waits up to 10 s for FILE to contain TEXT (a server's
# log line written after the client has seen its answer); false if not.
await() {
  for _ in $(seq 100); do
    grep -q "$2" "$1" && return 0
    sleep 0.1
  done
  return 1
}
