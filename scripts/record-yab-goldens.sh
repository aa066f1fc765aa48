#!/usr/bin/env bash
# Records yab's answers to the Thrift calls of
# tools/cmd/sluice/testdata/yab/cases.txt, which TestThriftMatchesYab makes
# with `sluice call`, so that CI compares Sluice with yab without yab.
# Run it again when the cases change; it rewrites the answers beside them.
#
# It needs yab v0.22.0 as $YAB. yab builds from a scratch module:
#
#   mkdir /tmp/yab && cd /tmp/yab && go mod init yabbuild
#   go get github.com/yarpc/yab@v0.22.0
#   go get golang.org/x/net@v0.25.0 golang.org/x/sys@v0.48.0
#   go build -o /tmp/yab/yab github.com/yarpc/yab
#   YAB=/tmp/yab/yab scripts/record-yab-goldens.sh
#
# The servers: tchannel-go's example KeyValue service on plain tchannel-go
# (tools/internal/plainkv) and Sluice's examples/keyvalue, both on
# 127.0.0.1, both with the IDL tchannel-go ships.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${YAB:?set YAB to a yab v0.22.0 binary (see the comment at the top)}"
"$YAB" --version | grep -q '0.22.0' || { echo "YAB is not yab 0.22.0: $("$YAB" --version)"; exit 1; }

idl="$(cd tools && go list -m -f '{{.Dir}}' github.com/uber/tchannel-go)/examples/keyvalue/keyvalue.thrift"
out=tools/cmd/sluice/testdata/yab
. scripts/lib/servers.sh
(cd tools && go build -o "$tmp/kvserver" ./internal/plainkv/kvserver)
go build -o "$tmp/keyvalue" ./examples/keyvalue

mkdir -p "$out"
rm -f "$out"/*.json "$out"/*.exit
for server in plain sluice; do
  case $server in
    plain) start plain "$tmp/kvserver" -listen 127.0.0.1:0 ;;
    sluice) start sluice "$tmp/keyvalue" serve --listen 127.0.0.1:0 ;;
  esac
  while IFS='|' read -r name args; do
    case "$name" in '' | '#'*) continue ;; esac
    read -ra words <<<"$args"
    for i in "${!words[@]}"; do
      [ "${words[$i]}" = '$IDL' ] && words[$i]=$idl
    done
    set +e
    "$YAB" -p "$peer" "${words[@]}" >"$out/$server-$name.json"
    echo "$?" >"$out/$server-$name.exit"
    set -e
  done <"$out/cases.txt"
done
ls "$out"
