package thrift

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/uber/tchannel-go/examples/keyvalue/gen-go/keyvalue"
	tthrift "github.com/uber/tchannel-go/thrift"
)

func TestGeneratedClientCallSucceeds(t *testing.T) {
	s, _ := startServer(t)
	_, _, kv := startClient(t, s)

	if err := kv.Set(ctxTimeout(t, nil), "alpha", "one"); err != nil {
		t.Fatalf("Set: %v", err)
	}
	v, err := kv.Get(ctxTimeout(t, nil), "alpha")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if v != "one" {
		t.Errorf("v = %q, want %q", v, "one")
	}
	health, err := kv.HealthCheck(ctxTimeout(t, nil))
	if err != nil {
		t.Fatalf("HealthCheck: %v", err)
	}
	if health != "OK" {
		t.Errorf("health = %q, want %q", health, "OK")
	}
	if got := s.received.Load(); got != 3 {
		t.Errorf("s.received.Load() = %v, want %v", got, 3)
	}
}

// A declared exception is an application error: it reaches the caller as
// the generated typed error, the transport succeeded, and it is sent once.
func TestDeclaredExceptionIsTypedAndSentOnce(t *testing.T) {
	for _, tc := range []struct {
		name, key string
		check     func(t *testing.T, err error)
	}{
		{"KeyNotFound", "missing", func(t *testing.T, err error) {
			var nf *keyvalue.KeyNotFound
			if !errors.As(err, &nf) {
				t.Fatalf("err = %v, want a %T", err, nf)
			}
			if nf.Key != "missing" {
				t.Errorf("nf.Key = %q, want %q", nf.Key, "missing")
			}
		}},
		{"InvalidKey", "1bad", func(t *testing.T, err error) {
			var ik *keyvalue.InvalidKey
			if !errors.As(err, &ik) {
				t.Fatalf("err = %v, want a %T", err, ik)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newKVServerPair(t)
			c, _, kv := startClient(t, a, b)
			_, err := kv.Get(ctxTimeout(t, nil), tc.key)
			tc.check(t, err)
			var ce *channel.CallError
			if errors.As(err, &ce) {
				t.Errorf("an exception is not a call error: %v: errors.As(err, &ce) = true, want false", err)
			}
			if got := a.received.Load() + b.received.Load(); got != 1 {
				t.Errorf("the exception was retried: got %v, want %v", got, 1)
			}
			for _, p := range c.Peers() {
				if p.Busy != 0 {
					t.Errorf("an exception counted as busy on %s: got %v, want 0", p.HostPort, p.Busy)
				}
			}
		})
	}
}

func newKVServerPair(t *testing.T) (*kvServer, *kvServer) {
	a, _ := startServer(t)
	b, _ := startServer(t)
	return a, b
}

func TestHeadersTravelBothWays(t *testing.T) {
	s, _ := startServer(t)
	_, _, kv := startClient(t, s)
	ctx := ctxTimeout(t, map[string]string{"who": "me"})
	if err := kv.Set(ctx, "k", "v"); err != nil {
		t.Fatalf("Set: %v", err)
	}
	if got, want := ctx.ResponseHeaders(), map[string]string{"seen": "me", "server": s.hostPort}; !maps.Equal(got, want) {
		t.Errorf("ctx.ResponseHeaders() = %q, want %q", got, want)
	}

	// On a declared exception too: the response carries its headers.
	ctx = ctxTimeout(t, map[string]string{"who": "you"})
	_, err := kv.Get(ctx, "absent")
	var nf *keyvalue.KeyNotFound
	if !errors.As(err, &nf) {
		t.Fatalf("Get error = %v, want a %T", err, nf)
	}
	if got := ctx.ResponseHeaders()["seen"]; got != "you" {
		t.Errorf(`ctx.ResponseHeaders()["seen"] = %q, want %q`, got, "you")
	}

	// No request headers, no response headers.
	ctx = ctxTimeout(t, nil)
	if err := kv.Set(ctx, "k", "v"); err != nil {
		t.Fatalf("Set: %v", err)
	}
	if got := ctx.ResponseHeaders(); len(got) != 0 {
		t.Errorf("ctx.ResponseHeaders() = %q, want empty", got)
	}
}

// A server answering Busy from its handler is throttled: after a busy
// second its limit collapses, after two it is below one request, and the
// client's calls all go to the other peers.
func TestBusyServerIsThrottledAndTrafficMoves(t *testing.T) {
	a, _ := startServer(t)
	b, _ := startServer(t)
	bad, _ := startServer(t)
	c, clk, kv := startClient(t, a, b, bad)
	limit := func() float64 {
		for _, p := range c.Peers() {
			if p.HostPort == bad.hostPort {
				return p.Limit
			}
		}
		t.Fatal("the busy peer is missing")
		return 0
	}
	send := func(n int) (ok, busy int) {
		for i := 0; i < n; i++ {
			_, err := kv.HealthCheck(ctxTimeout(t, nil))
			var ce *channel.CallError
			switch {
			case err == nil:
				ok++
			case errors.As(err, &ce) && ce.Code == codes.Busy:
				if ce.Peer != bad.hostPort {
					t.Errorf("ce.Peer = %q, want %q", ce.Peer, bad.hostPort)
				}
				if ce.Message != "test server is busy" {
					t.Errorf("ce.Message = %q, want %q", ce.Message, "test server is busy")
				}
				busy++
			default:
				t.Fatalf("call %d: %v", i, err)
			}
		}
		return ok, busy
	}

	bad.busy.Store(true)
	_, busy1 := send(150) // second 1: no limit yet, the busy peer gets its share
	if busy1 <= 10 {
		t.Fatalf("the busy peer took no traffic in second 1: got %v, want > %v", busy1, 10)
	}
	clk.Add(time.Second)
	if got := int(limit()); got != 38 {
		t.Errorf("9999999*4/2^20 after a busy window: got %v, want %v", got, 38)
	}
	_, busy2 := send(150)
	if busy2 > 38 {
		t.Errorf("busy2 = %v, want <= %v", busy2, 38)
	}
	clk.Add(time.Second)
	if got := limit(); !(got < 1.0) {
		t.Fatalf("limit after two busy windows: got %v, want < %v", got, 1.0)
	}

	before := bad.received.Load()
	ok, busy3 := send(200) // second 3: every call goes to a or b
	if ok != 200 {
		t.Errorf("ok = %v, want %v", ok, 200)
	}
	if busy3 != 0 {
		t.Errorf("busy3 = %v, want 0", busy3)
	}
	if got := bad.received.Load(); got != before {
		t.Errorf("a request reached the throttled peer: got %v, want %v", got, before)
	}
	if got := a.received.Load(); got <= int64(100) {
		t.Errorf("a.received.Load() = %v, want > %v", got, int64(100))
	}
	if got := b.received.Load(); got <= int64(100) {
		t.Errorf("b.received.Load() = %v, want > %v", got, int64(100))
	}
}

func TestEveryPeerThrottledFailsLocally(t *testing.T) {
	s, _ := startServer(t)
	s.busy.Store(true)
	_, clk, kv := startClient(t, s)
	for sec := 0; sec < 2; sec++ {
		for i := 0; i < 40; i++ {
			_, err := kv.HealthCheck(ctxTimeout(t, nil))
			if err == nil {
				t.Fatal("HealthCheck succeeded, want an error")
			}
		}
		clk.Add(time.Second)
	}
	before := s.received.Load()
	_, err := kv.HealthCheck(ctxTimeout(t, nil))
	if !errors.Is(err, channel.ErrThrottled) {
		t.Fatalf("HealthCheck error = %v, want %v", err, channel.ErrThrottled)
	}
	if got := s.received.Load(); got != before {
		t.Errorf("s.received.Load() = %v, want %v", got, before)
	}
}

// The client checks what it reads as tchannel-go's does: a response that is
// not the expected struct, or has bytes after it, is an error.
func TestMalformedResponses(t *testing.T) {
	for _, tc := range []struct {
		name string
		arg3 []byte
		want string
	}{
		{"not a struct", []byte{0x0b}, "cannot decode the response"},
		// An empty result struct (field stop) followed by a stray byte.
		{"trailing bytes", []byte{0x00, 0x07}, "1 bytes after its struct"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := channel.New(service)
			if err != nil {
				t.Fatalf("channel.New: %v", err)
			}
			t.Cleanup(ch.Close)
			if err := ch.RegisterRaw("KeyValue::HealthCheck", func(context.Context, *channel.RawRequest) (*channel.RawResponse, error) {
				return &channel.RawResponse{Arg2: []byte{0, 0}, Arg3: tc.arg3}, nil
			}); err != nil {
				t.Fatalf("RegisterRaw: %v", err)
			}
			if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
				t.Fatalf("ListenAndServe: %v", err)
			}
			_, _, kv := startClient(t, &kvServer{hostPort: ch.HostPort()})
			_, err = kv.HealthCheck(ctxTimeout(t, nil))
			if err == nil {
				t.Fatal("HealthCheck succeeded, want an error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err.Error() = %q, want it to contain %q", err.Error(), tc.want)
			}
		})
	}
}

func TestNilClientIsAnErrorNotAPanic(t *testing.T) {
	ok, err := NewClient(nil).Call(ctxTimeout(t, nil), "KeyValue", "Get", &keyvalue.KeyValueGetArgs{}, &keyvalue.KeyValueGetResult{})
	if ok {
		t.Error("ok = true, want false")
	}
	if err == nil {
		t.Fatal("Call succeeded, want an error")
	}
	if !strings.Contains(err.Error(), "no channel.Client") {
		t.Errorf("Call error = %q, want it to contain %q", err, "no channel.Client")
	}
}

func TestNoPeers(t *testing.T) {
	_, _, kv := startClient(t)
	_, err := kv.Get(ctxTimeout(t, nil), "k")
	if !errors.Is(err, channel.ErrNoPeers) {
		t.Errorf("Get error = %v, want %v", err, channel.ErrNoPeers)
	}
}

// The cache of method names returns the same names as concatenation, and
// stops growing at its bound.
func TestMethodNameCache(t *testing.T) {
	c := NewClient(nil).(*client)
	if got := c.methodName("KeyValue", "Get"); got != "KeyValue::Get" {
		t.Errorf(`c.methodName("KeyValue", "Get") = %q, want %q`, got, "KeyValue::Get")
	}
	if got := c.methodName("KeyValue", "Get"); got != "KeyValue::Get" {
		t.Errorf(`c.methodName("KeyValue", "Get") = %q, want %q`, got, "KeyValue::Get")
	}
	if got := c.methodName("Admin", "clearAll"); got != "Admin::clearAll" {
		t.Errorf(`c.methodName("Admin", "clearAll") = %q, want %q`, got, "Admin::clearAll")
	}
	for i := 0; i < 2*maxMethodNames; i++ {
		name := strings.Repeat("m", i+1)
		if got := c.methodName("S", name); got != "S::"+name {
			t.Errorf(`c.methodName("S", name) = %q, want %q`, got, "S::"+name)
		}
	}
	if got := len(*c.names.Load()); got != maxMethodNames {
		t.Errorf("len(*c.names.Load()) = %d, want %d", got, maxMethodNames)
	}
}

func TestPreviousAttempts(t *testing.T) {
	for _, tc := range []struct {
		headers map[string]string
		want    int
	}{
		{nil, 0},
		{map[string]string{"previous-rpc-attempts": "1"}, 1},
		{map[string]string{"previous-rpc-attempts": "4"}, 4},
		{map[string]string{"previous-rpc-attempts": "-1"}, 0},
		{map[string]string{"previous-rpc-attempts": "x"}, 0},
	} {
		if got := PreviousAttempts(tthrift.WithHeaders(context.Background(), tc.headers)); got != tc.want {
			t.Errorf("%v: got %v, want %v", tc.headers, got, tc.want)
		}
	}
}
