#!/usr/bin/env bash
# Checks that yab (plaintext TChannel) keeps working against a Sluice server
# serving TLS and plaintext on one port (sluice serve --tls-mode mixed), and
# is refused with a clear message on a TLS-only port; a TLS Sluice client
# and a plaintext one are called on the mixed port too. It uses the example
# certificates of examples/auth/certs.
#
# It needs yab v0.22.0 as $YAB (scripts/record-yab-goldens.sh says how to
# build it). yab 0.22 takes a bare host:port for HTTP here, so its peers are
# named tchannel://HOST:PORT.
#
#   YAB=/tmp/yab/yab scripts/yab-tls-ports.sh
set -euo pipefail
cd "$(dirname "$0")/.."
: "${YAB:?set YAB to a yab v0.22.0 binary}"
. scripts/lib/servers.sh
certs=examples/auth/certs
(cd tools && go build -o "$tmp/sluice" ./cmd/sluice)

start mixed "$tmp/sluice" serve --listen 127.0.0.1:0 \
  --tls-cert $certs/server.pem --tls-key $certs/server-key.pem --tls-ca $certs/ca.pem --tls-mode mixed
mixed=$peer
start only "$tmp/sluice" serve --listen 127.0.0.1:0 --tls-cert $certs/server.pem --tls-key $certs/server-key.pem
only=$peer

status=0
check() { # check WHAT WANT-EXIT COMMAND...
  local what=$1 want=$2
  shift 2
  set +e
  "$@" >"$tmp/out" 2>&1
  local got=$?
  set -e
  if [ "$got" = "$want" ]; then echo "ok    $what (exit $got)"; else
    echo "FAIL  $what: exit $got, want $want"
    cat "$tmp/out"
    status=1
  fi
}
check "yab, JSON, mixed port" 0 "$YAB" --peer "tchannel://$mixed" echo echo -e json -r '{"hello":"yab"}'
check "yab, raw, mixed port" 0 "$YAB" --peer "tchannel://$mixed" echo echo -e raw -r hello
check "sluice call, plaintext, mixed port" 0 "$tmp/sluice" call -p "$mixed" -s echo -m echo -r '{"hello":"plain"}'
check "sluice call, mutual TLS, mixed port" 0 "$tmp/sluice" call -p "$mixed" -s echo -m echo -r '{"hello":"tls"}' \
  --tls-ca $certs/ca.pem --tls-cert $certs/client.pem --tls-key $certs/client-key.pem
check "yab, TLS-only port (refused)" 1 "$YAB" --peer "tchannel://$only" echo echo -e json -r '{"hello":"yab"}'
grep -q "this port accepts TLS connections only" "$tmp/out" || { echo "FAIL  yab's error does not say the port is TLS-only"; status=1; }
await "$tmp/only.err" "refused a plaintext TChannel connection on a TLS-only port" || { echo "FAIL  no log line on the TLS-only server"; status=1; }
exit $status
