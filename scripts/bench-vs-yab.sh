#!/usr/bin/env bash
# Measures `sluice bench` against yab on one plain tchannel-go Thrift server
# (tchannel-go's example KeyValue, tools/internal/plainkv), side by side in
# one run: ROUNDS rounds (default 4), each measuring two settings,
#
#   yab     -t keyvalue.thrift keyvalue KeyValue::Get -n N --concurrency 4
#           (yab's default connections: 2 x GOMAXPROCS)
#   sluice  the same words with yab's connections and --concurrency 4
#   yab     the same words at yab's defaults (concurrency 1)
#   sluice  the same words at Sluice's defaults (the same as yab's)
#
# and prints calls per second, Sluice's ratio to yab's and an A/A ratio per
# setting and round (see measure below). N is $CALLS (default 100000). It
# needs yab v0.22.0 as $YAB (scripts/record-yab-goldens.sh says how to
# build it). The server runs in
# its own process; the clients take turns, so each has the client half of
# the machine to itself.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${YAB:?set YAB to a yab v0.22.0 binary (scripts/record-yab-goldens.sh says how)}"
rounds=${ROUNDS:-4}
calls=${CALLS:-100000}
conns=$(( 2 * $(nproc) ))

idl=$PWD/examples/keyvalue/keyvalue.thrift
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

# Each round runs three runs a setting, alternating which client runs twice:
# odd rounds yab, sluice, yab; even rounds sluice, yab, sluice. The ratio is
# sluice's mean over yab's mean; "A/A" is the doubled client's second run
# over its first, the noise the ratio must be read against.
measure() { # measure ROUND ARGS...: prints the ratio and the A/A ratio
  local r=$1; shift
  local a b c
  if (( r % 2 )); then
    a=$(yab_rps "${yab_args[@]}"); b=$(sluice_rps "${sluice_args[@]}"); c=$(yab_rps "${yab_args[@]}")
    awk -v y1="$a" -v s="$b" -v y2="$c" 'BEGIN { printf "%8.0f %8.0f %7.3f %6.3f", (y1 + y2) / 2, s, s / ((y1 + y2) / 2), y2 / y1 }'
  else
    a=$(sluice_rps "${sluice_args[@]}"); b=$(yab_rps "${yab_args[@]}"); c=$(sluice_rps "${sluice_args[@]}")
    awk -v s1="$a" -v y="$b" -v s2="$c" 'BEGIN { printf "%8.0f %8.0f %7.3f %6.3f", y, (s1 + s2) / 2, (s1 + s2) / 2 / y, s2 / s1 }'
  fi
}

printf '%-6s | %-40s | %-40s\n' round "${conns}x4: yab, sluice c/s, ratio, A/A" "defaults (${conns}x1): yab, sluice, ratio, A/A"
for r in $(seq "$rounds"); do
  yab_args=(--concurrency 4); sluice_args=(--connections "$conns" --concurrency 4)
  m4=$(measure "$r")
  yab_args=(); sluice_args=()
  m1=$(measure "$r")
  printf '%-6s | %s | %s\n' "$r" "$m4" "$m1"
done
