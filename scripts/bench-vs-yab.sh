#!/usr/bin/env bash
# Measures `sluice bench` against yab on one plain tchannel-go Thrift server
# (tchannel-go's example KeyValue, tools/internal/plainkv), side by side in
# one run: ROUNDS rounds (default 3), each running, one after the other,
#
#   yab     -t keyvalue.thrift keyvalue KeyValue::Get -n N --concurrency 4
#           (yab's default connections: 2 x GOMAXPROCS)
#   sluice  the same words, at Sluice's defaults
#   sluice  the same words with yab's connections and --concurrency 4
#
# and prints each run's calls per second and Sluice's ratio to yab's in the
# same round. N is $CALLS (default 100000). It needs yab v0.22.0 as $YAB
# (scripts/record-yab-goldens.sh says how to build it). The server runs in
# its own process; the clients take turns, so each has the client half of
# the machine to itself.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${YAB:?set YAB to a yab v0.22.0 binary (scripts/record-yab-goldens.sh says how)}"
rounds=${ROUNDS:-3}
calls=${CALLS:-100000}
conns=$(( 2 * $(nproc) ))

idl="$(cd tools && go list -m -f '{{.Dir}}' github.com/uber/tchannel-go)/examples/keyvalue/keyvalue.thrift"
tmp=$(mktemp -d)
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
(cd tools && go build -o "$tmp/kvserver" ./internal/plainkv/kvserver && go build -o "$tmp/sluice" ./cmd/sluice)
"$tmp/kvserver" -listen 127.0.0.1:0 >"$tmp/server.out" 2>&1 &
server=$!
peer=""
for _ in $(seq 100); do
  peer=$(grep -oE '127\.0\.0\.1:[0-9]+' "$tmp/server.out" || true)
  [ -n "$peer" ] && break
  sleep 0.1
done
[ -n "$peer" ] || { echo "kvserver did not start"; cat "$tmp/server.out"; exit 1; }

target=(-t "$idl" -p "$peer" keyvalue KeyValue::Get -r '{"key":"a"}')
"$tmp/sluice" call -t "$idl" -p "$peer" keyvalue KeyValue::Set -r '{"key":"a","value":"1"}' >/dev/null

yab_rps() { "$YAB" "${target[@]}" -n "$calls" --concurrency 4 | awk '/^RPS:/{print $2}'; }
sluice_rps() {
  "$tmp/sluice" bench "${target[@]}" -n "$calls" -o json "$@" 2>/dev/null |
    python3 -c 'import json,sys; r=json.load(sys.stdin); assert r["failed"]==0, r; print("%.0f" % r["throughput_rps"])'
}

printf '%-6s %10s %16s %7s %24s %7s\n' round "yab c/s" "sluice defaults" ratio "sluice ${conns}x4 (yab's)" ratio
for r in $(seq "$rounds"); do
  y=$(yab_rps)
  d=$(sluice_rps)
  s=$(sluice_rps --connections "$conns" --concurrency 4)
  awk -v r="$r" -v y="$y" -v d="$d" -v s="$s" 'BEGIN { printf "%-6s %10.0f %16.0f %7.3f %24.0f %7.3f\n", r, y, d, d / y, s, s / y }'
done
