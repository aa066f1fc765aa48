// Package doormanpb holds the Doorman wire protocol (protobuf package
// doorman, gRPC service doorman.Capacity) generated from doorman.proto.
//
// The code is generated with protoc 3.21.12, protoc-gen-go v1.36.12 and
// protoc-gen-go-grpc v1.5.1; do not edit the .pb.go files by hand. Run
// `go generate ./leasing/doormanpb` (or generate.sh) after changing the
// .proto file.
package doormanpb

//go:generate ./generate.sh
