package thrift

import (
	"errors"
	"maps"
	"testing"

	"github.com/uber/tchannel-go/examples/keyvalue/gen-go/keyvalue"
)

// exercise runs the same conversation with any generated client: a call
// that succeeds, headers both ways, and a declared exception.
func exercise(t *testing.T, kv keyvalue.TChanKeyValue, s *kvServer) {
	t.Helper()
	ctx := ctxTimeout(t, map[string]string{"who": "compat"})
	if err := kv.Set(ctx, "key", "value"); err != nil {
		t.Fatalf("Set: %v", err)
	}
	if got, want := ctx.ResponseHeaders(), map[string]string{"seen": "compat", "server": s.hostPort}; !maps.Equal(got, want) {
		t.Errorf("ctx.ResponseHeaders() = %q, want %q", got, want)
	}

	v, err := kv.Get(ctxTimeout(t, nil), "key")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if v != "value" {
		t.Errorf("v = %q, want %q", v, "value")
	}

	_, err = kv.Get(ctxTimeout(t, nil), "nokey")
	var nf *keyvalue.KeyNotFound
	if !errors.As(err, &nf) {
		t.Fatalf("Get error = %v, want a %T", err, nf)
	}
	if nf.Key != "nokey" {
		t.Errorf("nf.Key = %q, want %q", nf.Key, "nokey")
	}

	err = kv.Set(ctxTimeout(t, nil), "9", "v")
	var ik *keyvalue.InvalidKey
	if !errors.As(err, &ik) {
		t.Fatalf("Set error = %v, want a %T", err, ik)
	}

	if got := s.received.Load(); got != 4 {
		t.Errorf("s.received.Load() = %v, want %v", got, 4)
	}
}

// A Sluice Thrift client talks to tchannel-go's own Thrift server.
func TestSluiceClientPlainServer(t *testing.T) {
	s := startPlainServer(t)
	_, _, kv := startClient(t, s)
	exercise(t, kv, s)
}

// tchannel-go's own Thrift client talks to a Sluice Thrift server.
func TestPlainClientSluiceServer(t *testing.T) {
	s, _ := startServer(t)
	exercise(t, startPlainClient(t, s.hostPort), s)
}

// The reference: tchannel-go on both sides has the same conversation.
func TestPlainClientPlainServer(t *testing.T) {
	s := startPlainServer(t)
	exercise(t, startPlainClient(t, s.hostPort), s)
}
