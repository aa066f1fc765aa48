#!/bin/sh
# Regenerates the Doorman wire code. Needs protoc 3.21 (Debian
# protobuf-compiler), protoc-gen-go v1.36.12 and protoc-gen-go-grpc v1.5.1:
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
#   go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1
set -eu
cd "$(dirname "$0")"
PATH="$(go env GOPATH)/bin:$PATH"
protoc --proto_path=. \
  --go_out=. --go_opt=paths=source_relative \
  --go-grpc_out=. --go-grpc_opt=paths=source_relative \
  doorman.proto
