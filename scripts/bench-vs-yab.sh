#!/usr/bin/env bash
# Measures `sluice bench` against yab on one plain tchannel-go Thrift server
# (tchannel-go's example KeyValue, tools/internal/plainkv), side by side in
# one run: ROUNDS rounds (default 3), each running, one after the other,
#
#   yab     -t keyvalue.thrift keyvalue KeyValue::Get -n N --concurrency 4
#           (yab's default connections: 2 x GOMAXPROCS)
#   sluice  the same words with yab's connections and --concurrency 4
#   yab     the same words at yab's defaults (concurrency 1)
#   sluice  the same words at Sluice's defaults (the same as yab's)
#
# and prints each run's calls per second and Sluice's ratio to the yab run
# beside it. N is $CALLS (default 100000). It needs yab v0.22.0 as $YAB
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

yab_rps() { "$YAB" "${target[@]}" -n "$calls" "$@" | awk '/^RPS:/{print $2}'; }
sluice_rps() {
  "$tmp/sluice" bench "${target[@]}" -n "$calls" -o json "$@" 2>/dev/null |
    python3 -c 'import json,sys; r=json.load(sys.stdin); assert r["failed"]==0, r; print("%.0f" % r["throughput_rps"])'
}

printf '%-6s %18s %18s %7s %14s %16s %7s\n' round "yab ${conns}x4 c/s" "sluice ${conns}x4" ratio "yab defaults" "sluice defaults" ratio
for r in $(seq "$rounds"); do
  y4=$(yab_rps --concurrency 4)
  s4=$(sluice_rps --connections "$conns" --concurrency 4)
  y1=$(yab_rps)
  s1=$(sluice_rps)
  awk -v r="$r" -v y4="$y4" -v s4="$s4" -v y1="$y1" -v s1="$s1" \
    'BEGIN { printf "%-6s %18.0f %18.0f %7.3f %14.0f %16.0f %7.3f\n", r, y4, s4, s4 / y4, y1, s1, s1 / y1 }'
done
