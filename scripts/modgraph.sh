#!/usr/bin/env bash
# Checks what the library module costs its importers: a scratch module that
# imports only github.com/sluice-rpc/sluice/channel (this checkout, through a
# replace) must have no etcd server, toxiproxy, gonum or zerolog in its
# go mod graph, and the library's go.mod must require no Prometheus client
# (tally's own module still brings one into the graph) and no OpenTelemetry
# (the otel module's), nor may the scratch module build any OpenTelemetry
# package (grpc's module brings OpenTelemetry into the graph, not into the
# build). Modules come from the module proxy.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

status=0
if grep -n 'prometheus/client_golang' "$root/go.mod"; then
  echo "modgraph: the library's go.mod requires the Prometheus client (above)" >&2
  status=1
fi
if grep -n 'go.opentelemetry.io' "$root/go.mod"; then
  echo "modgraph: the library's go.mod requires OpenTelemetry (above): it belongs in otel/go.mod" >&2
  status=1
fi

cd "$tmp"
cat >go.mod <<MOD
module example.com/scratch

go 1.26.0

require github.com/sluice-rpc/sluice v0.0.0

replace github.com/sluice-rpc/sluice => $root
MOD
cat >main.go <<'GO'
package main

import "github.com/sluice-rpc/sluice/channel"

func main() { _, _ = channel.New("scratch") }
GO
GOWORK=off GOFLAGS=-mod=mod go mod tidy
heavy='go.etcd.io/etcd/server|Shopify/toxiproxy|gonum.org|rs/zerolog'
if GOWORK=off go mod graph | grep -E "$heavy"; then
  echo "modgraph: a module importing only channel has the modules above in its graph" >&2
  status=1
fi
if GOWORK=off go list -deps . | grep '^go.opentelemetry.io/'; then
  echo "modgraph: a module importing only channel builds the OpenTelemetry packages above" >&2
  status=1
fi
GOWORK=off go build ./...
echo "modgraph: $(GOWORK=off go mod graph | wc -l) edges for a module importing channel; none of $heavy"
exit $status
