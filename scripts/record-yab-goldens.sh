#!/usr/bin/env bash
# Records yab's answers to the calls of tools/cmd/internal/cli/testdata/yab/cases.txt
# (Thrift) and cases-serve.txt (JSON, raw), which TestThriftMatchesYab makes
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
# The servers, all on 127.0.0.1: for cases.txt's Thrift calls,
# tchannel-go's example KeyValue service on plain tchannel-go
# (tools/internal/plainkv) and Sluice's examples/keyvalue, both with the
# IDL tchannel-go ships, committed as examples/keyvalue/keyvalue.thrift;
# for cases-serve.txt's JSON and raw calls, `sluice serve`. Each case's
# stdout is recorded (SERVER-NAME.json: yab's envelope, or nothing) with
# its exit status (SERVER-NAME.exit).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${YAB:?set YAB to a yab v0.22.0 binary (see the comment at the top)}"
"$YAB" --version | grep -q '0.22.0' || { echo "YAB is not yab 0.22.0: $("$YAB" --version)"; exit 1; }

idl=examples/keyvalue/keyvalue.thrift
out=tools/cmd/internal/cli/testdata/yab
. scripts/lib/servers.sh
(cd tools && go build -o "$tmp/kvserver" ./internal/plainkv/kvserver)
go build -o "$tmp/keyvalue" ./examples/keyvalue

mkdir -p "$out"
rm -f "$out"/*.json "$out"/*.exit
(cd tools && go build -o "$tmp/sluice" ./cmd/sluice)
for server in plain sluice serve; do
  cases=$out/cases.txt
  case $server in
    plain) start plain "$tmp/kvserver" -listen 127.0.0.1:0 ;;
    sluice) start sluice "$tmp/keyvalue" serve --listen 127.0.0.1:0 ;;
    serve) start serve "$tmp/sluice" serve --listen 127.0.0.1:0 && cases=$out/cases-serve.txt ;;
  esac
  # yab 0.22 fails a JSON or raw call to a bare HOST:PORT ("first path
  # segment in URL cannot contain colon"); tchannel:// is the same peer.
  [ "$server" = serve ] && peer=tchannel://$peer
  while IFS= read -r line; do
    case "$line" in '' | '#'*) continue ;; esac
    IFS='|' read -ra words <<<"$line"
    name=${words[0]}
    words=("${words[@]:1}")
    words=("${words[@]//\$IDL/$idl}")
    words=("${words[@]//\$TESTDATA/$out}")
    set +e
    "$YAB" -p "$peer" "${words[@]}" >"$out/$server-$name.json" </dev/null
    echo "$?" >"$out/$server-$name.exit"
    set -e
  done <"$cases"
done
ls "$out"
