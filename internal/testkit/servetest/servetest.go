// Package servetest serves Doorman servers in tests: on a free port of
// 127.0.0.1, stopped when the test ends, with Serve's return awaited so
// that no goroutine outlives the test. It names no server type, so the
// server's own tests can use it too.
package servetest

import (
	"net"
	"testing"

	"google.golang.org/grpc"

	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
)

// Server is what Start serves: a leasing/server.Server.
type Server interface {
	Serve(lis net.Listener, opts ...grpc.ServerOption) error
	Stop()
}

// Start serves s on addr ("" means 127.0.0.1:0) and returns the address
// it listens on; s stops when t ends.
func Start(t testing.TB, s Server, addr string) string {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Serve(lis)
	}()
	t.Cleanup(func() {
		s.Stop()
		lis.Close()
		testwait.Recv(t, done, "Serve to return")
	})
	return lis.Addr().String()
}
