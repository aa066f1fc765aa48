package thrift

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/codes"
	tthrift "github.com/uber/tchannel-go/thrift"
)

// A generated client's call reports its attempts and peer through
// channel.ReportCallInfo in WithCallOptions, when it succeeds after a
// retry and when it fails.
func TestWithCallOptionsReportsCallInfo(t *testing.T) {
	s, _ := startServer(t)
	kv := startRetryClient(t, s)

	s.busyNext.Store(1)
	var info channel.CallInfo
	if _, err := kv.HealthCheck(WithCallOptions(ctxTimeout(t, nil), channel.ReportCallInfo(&info))); err != nil {
		t.Fatalf("HealthCheck: %v", err)
	}
	want := channel.CallInfo{Attempts: 2, Peer: s.hostPort, Peers: []string{s.hostPort}}
	if info.Attempts != want.Attempts || info.Peer != want.Peer || !slices.Equal(info.Peers, want.Peers) {
		t.Errorf("CallInfo after a retried success = %+v, want %+v", info, want)
	}

	s.busy.Store(true)
	info = channel.CallInfo{}
	_, err := kv.HealthCheck(WithCallOptions(ctxTimeout(t, nil), channel.ReportCallInfo(&info)))
	var ce *channel.CallError
	if !errors.As(err, &ce) || ce.Code != codes.Busy {
		t.Fatalf("HealthCheck error = %v, want a BUSY *channel.CallError", err)
	}
	if info.Attempts != 3 || info.Peer != s.hostPort {
		t.Errorf("CallInfo after a failure = %+v, want 3 attempts, the last on %s", info, s.hostPort)
	}
}

// The transport headers of WithCallOptions reach a plain tchannel-go
// Thrift server and a Sluice one, whose inbound middleware sees them in
// channel.Inbound.
func TestWithCallOptionsSendsTransportHeaders(t *testing.T) {
	want := transportSeen{Caller: "proxy-for-web", ShardKey: "user-42", RoutingKey: "canary", RoutingDelegate: "kv-router"}
	opts := []channel.CallOption{channel.WithShardKey(want.ShardKey), channel.WithRoutingKey(want.RoutingKey),
		channel.WithRoutingDelegate(want.RoutingDelegate), channel.WithCallerName(want.Caller)}

	var (
		mu  sync.Mutex
		ins []channel.Inbound
	)
	sluice, _ := startServer(t, channel.WithInboundMiddleware(func(ctx context.Context, in *channel.Inbound, next func(context.Context) error) error {
		mu.Lock()
		ins = append(ins, *in)
		mu.Unlock()
		return next(ctx)
	}))
	plain := startPlainServer(t)
	for _, s := range []*kvServer{plain, sluice} {
		_, _, kv := startClient(t, s)
		if _, err := kv.HealthCheck(WithCallOptions(ctxTimeout(t, nil), opts...)); err != nil {
			t.Fatalf("HealthCheck: %v", err)
		}
		if _, tr := s.seen(); len(tr) != 1 || tr[0] != want {
			t.Errorf("the handler saw %+v, want %+v", tr, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ins) != 1 {
		t.Fatalf("the middleware saw %d calls, want 1", len(ins))
	}
	got := transportSeen{ins[0].Caller, ins[0].ShardKey, ins[0].RoutingKey, ins[0].RoutingDelegate}
	if got != want || ins[0].Method != "KeyValue::HealthCheck" {
		t.Errorf("Inbound = %+v, want %+v for KeyValue::HealthCheck", ins[0], want)
	}
}

// The context of WithCallOptions shares ctx's headers: the request sends
// ctx's, plus channel.WithHeaders' on top (the caller's map untouched),
// and the response headers are set where ctx, the returned context and
// channel.ResponseHeaders all see them.
func TestWithCallOptionsSharesHeaders(t *testing.T) {
	s, _ := startServer(t)
	_, _, kv := startClient(t, s)
	ctx := ctxTimeout(t, map[string]string{"who": "me", "extra": "from ctx"})
	var rh map[string]string
	octx := WithCallOptions(ctx, channel.WithHeaders(map[string]string{"extra": "from option"}), channel.ResponseHeaders(&rh))
	if err := kv.Set(octx, "k", "v"); err != nil {
		t.Fatalf("Set: %v", err)
	}
	hs, _ := s.seen()
	if len(hs) != 1 || hs[0]["who"] != "me" || hs[0]["extra"] != "from option" {
		t.Errorf("the server saw headers %q, want who=me and extra=from option", hs)
	}
	if want := map[string]string{"who": "me", "extra": "from ctx"}; !maps.Equal(ctx.Headers(), want) {
		t.Errorf("the caller's headers became %q, want %q", ctx.Headers(), want)
	}
	want := map[string]string{"seen": "me", "server": s.hostPort}
	for name, got := range map[string]map[string]string{"ctx.ResponseHeaders()": ctx.ResponseHeaders(),
		"WithCallOptions(ctx).ResponseHeaders()": octx.ResponseHeaders(), "channel.ResponseHeaders": rh} {
		if !maps.Equal(got, want) {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
}

// Options add up over nested WithCallOptions (the later wins), and
// survive Child and contexts derived and wrapped again.
func TestWithCallOptionsNestAndDerive(t *testing.T) {
	s, _ := startServer(t)
	_, _, kv := startClient(t, s)
	octx := WithCallOptions(WithCallOptions(ctxTimeout(t, nil), channel.WithShardKey("a"), channel.WithRoutingKey("r")),
		channel.WithShardKey("b"))
	type key struct{}
	for name, ctx := range map[string]tthrift.Context{
		"nested":  octx,
		"Child":   octx.Child(),
		"derived": tthrift.Wrap(context.WithValue(octx, key{}, 1)),
	} {
		if _, err := kv.HealthCheck(ctx); err != nil {
			t.Fatalf("%s: HealthCheck: %v", name, err)
		}
		_, tr := s.seen()
		if got := tr[len(tr)-1]; got.ShardKey != "b" || got.RoutingKey != "r" {
			t.Errorf("%s: the server saw %+v, want shard key b and routing key r", name, got)
		}
	}
	// Without options, nothing of theirs.
	if _, err := kv.HealthCheck(ctxTimeout(t, nil)); err != nil {
		t.Fatalf("HealthCheck: %v", err)
	}
	_, tr := s.seen()
	if got := tr[len(tr)-1]; got != (transportSeen{Caller: "kv-client"}) {
		t.Errorf("a call without options carried %+v", got)
	}
}

// A generated client's call with a shard key reaches the key's home among
// several Sluice servers, every time.
func TestWithCallOptionsShardKeyRoutes(t *testing.T) {
	var servers []*kvServer
	for range 4 {
		s, _ := startServer(t)
		servers = append(servers, s)
	}
	ch, _, kv := startClient(t, servers...)
	for _, key := range []string{"user-1", "user-2", "user-3"} {
		home, err := ch.ShardHome(key)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 10; i++ {
			var info channel.CallInfo
			if _, err := kv.HealthCheck(WithCallOptions(ctxTimeout(t, nil), channel.WithShardKey(key), channel.ReportCallInfo(&info))); err != nil {
				t.Fatalf("HealthCheck: %v", err)
			}
			if info.Peer != home {
				t.Fatalf("a Thrift call with key %s reached %s, want its home %s", key, info.Peer, home)
			}
		}
	}
}
