#!/usr/bin/env bash
# A rolling deploy through etcd with real processes, as an operator does it:
# an etcd, three `sluice-lab serve --register etcd://...` servers, and
# `sluice-lab bench -P etcd://...` calling them at a steady rate while each server in
# turn is replaced (a new one started and registered, then the old one sent
# SIGTERM); then etcd is killed, and the bench runs on against the servers
# it knows. It prints the bench's summary and fails unless no call failed.
#
#   scripts/deploy-etcd.sh [RUNS]     # RUNS (default 1) deploys in a row
#
# It needs an etcd binary on PATH (.ci/run installs etcd-server). yab, when
# $YAB names a yab v0.22.0 binary (scripts/record-yab-goldens.sh says how
# to build it), calls the first server through its Shutdown too (raw echo,
# 50 calls a second for 10 s), and must see no error.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-1}
. scripts/lib/servers.sh
(cd tools && go build -o "$tmp/sluice-lab" ./cmd/sluice-lab) # etcd:// targets are sluice-lab's
sluice=$tmp/sluice-lab

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# registered N: waits up to 10 s for N servers under the prefix (asked of
# etcd's JSON gateway: etcd-server has no etcdctl).
registered() {
  local n=""
  for _ in $(seq 100); do
    n=$(python3 - "$etcd_addr" "$prefix/" <<'PY' 2>/dev/null || true
import base64, json, sys, urllib.request
addr, prefix = sys.argv[1], sys.argv[2].encode()
end = prefix[:-1] + bytes([prefix[-1] + 1])
body = json.dumps({"key": base64.b64encode(prefix).decode(), "range_end": base64.b64encode(end).decode(), "count_only": True}).encode()
r = json.load(urllib.request.urlopen(urllib.request.Request("http://%s/v3/kv/range" % addr, data=body), timeout=2))
print(r.get("count", 0))
PY
)
    [ "$n" = "$1" ] && return 0
    sleep 0.1
  done
  echo "waited 10 s for $1 registered servers, found ${n:-none}" >&2
  return 1
}

status=0
for run in $(seq "$runs"); do
  cport=$(free_port); pport=$(free_port)
  etcd_addr=127.0.0.1:$cport
  prefix=sluice-deploy/run$run
  etcd --data-dir "$tmp/etcd$run" --listen-client-urls "http://$etcd_addr" --advertise-client-urls "http://$etcd_addr" \
    --listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
    --initial-cluster "default=http://127.0.0.1:$pport" >"$tmp/etcd$run.log" 2>&1 &
  etcd_pid=$!
  pids+=($etcd_pid)
  for _ in $(seq 100); do
    python3 -c 'import sys,urllib.request; urllib.request.urlopen("http://%s/health" % sys.argv[1], timeout=1)' "$etcd_addr" 2>/dev/null && break
    sleep 0.1
  done
  target=etcd://$etcd_addr/$prefix
  servers=()
  for i in 0 1 2; do
    start "s$run-$i" "$sluice" serve --listen 127.0.0.1:0 --register "$target"
    servers+=("$(cat "$tmp/s$run-$i.out" | grep -m1 -oE '127\.0\.0\.1:[0-9]+')")
    spids[$i]=${pids[-1]}
  done
  registered 3
  "$sluice" bench -P "$target" -s echo -m echo --rps 300 -d 30s -o json >"$tmp/bench$run.json" 2>"$tmp/bench$run.err" &
  bench_pid=$!
  yab_pid=""
  if [ -n "${YAB:-}" ]; then
    # 10 s: it ends within the first server's grace (10 s from its
    # SIGTERM, 3 to 5 s in), as a plain client that learns from the
    # registry stops calling a server that left it.
    "$YAB" -p "tchannel://${servers[0]}" -e raw echo echo -r x --rps 50 -d 10s >"$tmp/yab$run.out" 2>&1 &
    yab_pid=$!
  fi
  sleep 3
  for i in 0 1 2; do
    start "r$run-$i" "$sluice" serve --listen 127.0.0.1:0 --register "$target"
    registered 4
    kill -TERM "${spids[$i]}"
    wait "${spids[$i]}" || true
    registered 3
    sleep 3
  done
  { kill -KILL "$etcd_pid"; wait "$etcd_pid"; } 2>/dev/null || true
  wait "$bench_pid" || true
  failed=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r.get("failed", r.get("Failed", "?")))' "$tmp/bench$run.json" 2>/dev/null || echo "?")
  calls=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r.get("calls", r.get("Calls", "?")))' "$tmp/bench$run.json" 2>/dev/null || echo "?")
  line="run $run: $calls calls, $failed failed"
  yab_failed=0
  if [ -n "$yab_pid" ]; then
    wait "$yab_pid" || yab_failed=1
    grep -qi 'error' "$tmp/yab$run.out" && yab_failed=1
    line="$line; yab: $(grep -E 'Total requests' "$tmp/yab$run.out" | tr -s ' ' | tr -d '\n'), $(grep -ci 'error' "$tmp/yab$run.out" || true) error lines"
  fi
  echo "$line"
  if [ "$yab_failed" != 0 ]; then
    status=1
    cat "$tmp/yab$run.out" >&2
  fi
  if [ "$failed" != "0" ]; then
    status=1
    cat "$tmp/bench$run.err" >&2
    head -c 3000 "$tmp/bench$run.json" >&2
  fi
done
exit $status
