package channel

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/raw"
)

// transportSeen is what a server saw of one request's TChannel transport
// headers.
type transportSeen struct {
	Format                                        tchannel.Format
	Caller, ShardKey, RoutingKey, RoutingDelegate string
}

// transportOpts set every transport header; wantTransport is what a server
// sees of them.
func transportOpts() []CallOption {
	return []CallOption{WithShardKey("user-42"), WithRoutingKey("canary"),
		WithRoutingDelegate("kv-router"), WithCallerName("proxy-for-web")}
}

var wantTransport = transportSeen{Caller: "proxy-for-web", ShardKey: "user-42", RoutingKey: "canary", RoutingDelegate: "kv-router"}

// plainFleet is a set of plain tchannel-go servers of "kv" (no Sluice on
// their side) whose handler "echo", for any arg scheme, logs the transport
// headers of every request and answers with answer(n) for the nth request
// (0-based) the fleet receives: nil echoes arg3 back.
type plainFleet struct {
	hostPorts []string
	answer    func(ctx context.Context, n int) error
	mu        sync.Mutex
	log       []transportSeen
}

func startPlainFleet(t *testing.T, n int, answer func(ctx context.Context, n int) error) *plainFleet {
	t.Helper()
	f := &plainFleet{answer: answer}
	for i := 0; i < n; i++ {
		ch, err := tchannel.NewChannel("kv", nil)
		if err != nil {
			t.Fatalf("tchannel.NewChannel: %v", err)
		}
		ch.Register(tchannel.HandlerFunc(func(ctx context.Context, call *tchannel.InboundCall) {
			f.mu.Lock()
			k := len(f.log)
			f.log = append(f.log, transportSeen{Format: call.Format(), Caller: call.CallerName(), ShardKey: call.ShardKey(),
				RoutingKey: call.RoutingKey(), RoutingDelegate: call.RoutingDelegate()})
			f.mu.Unlock()
			args, err := raw.ReadArgs(call)
			if err != nil {
				return
			}
			if f.answer != nil {
				if err := f.answer(ctx, k); err != nil {
					_ = call.Response().SendSystemError(err)
					return
				}
			}
			_ = raw.WriteResponse(call.Response(), &raw.Res{Arg2: args.Arg2, Arg3: args.Arg3})
		}), "echo")
		if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
			t.Fatalf("ListenAndServe: %v", err)
		}
		t.Cleanup(ch.Close)
		f.hostPorts = append(f.hostPorts, ch.PeerInfo().HostPort)
	}
	return f
}

func (f *plainFleet) seen() []transportSeen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]transportSeen(nil), f.log...)
}

// A plain tchannel-go server reads the transport headers a Sluice client's
// options set, in every arg scheme, through tchannel.InboundCall; a call
// without them is sent as before, with the Channel's name as its caller.
func TestTransportHeadersReachAPlainTChannelServer(t *testing.T) {
	f := startPlainFleet(t, 1, nil)
	c, err := New("client")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	if err := to(c, "kv").AddPeer(f.hostPorts[0]); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}

	if _, err := to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, []byte("x"), transportOpts()...); err != nil {
		t.Fatalf("CallRaw: %v", err)
	}
	if err := to(c, "kv").CallJSON(ctxTimeout(t), "echo", map[string]string{}, nil, transportOpts()...); err != nil {
		t.Fatalf("CallJSON: %v", err)
	}
	if _, err := to(c, "kv").Call(ctxTimeout(t), "echo", &Request{Format: tchannel.Thrift}, transportOpts()...); err != nil {
		t.Fatalf("Call: %v", err)
	}
	if _, err := to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, []byte("x")); err != nil {
		t.Fatalf("CallRaw without options: %v", err)
	}
	// One option alone: the others stay absent.
	if _, err := to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, []byte("x"), WithShardKey("k")); err != nil {
		t.Fatalf("CallRaw WithShardKey: %v", err)
	}

	withFormat := func(s transportSeen, f tchannel.Format) transportSeen { s.Format = f; return s }
	want := []transportSeen{
		withFormat(wantTransport, tchannel.Raw),
		withFormat(wantTransport, tchannel.JSON),
		withFormat(wantTransport, tchannel.Thrift),
		{Format: tchannel.Raw, Caller: "client"},
		{Format: tchannel.Raw, Caller: "client", ShardKey: "k"},
	}
	got := f.seen()
	if len(got) != len(want) {
		t.Fatalf("the server saw %d requests, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d: the server saw %+v, want %+v", i, got[i], want[i])
		}
	}
}

// A Sluice server's inbound middleware sees the transport headers in
// Inbound, for raw and JSON handlers.
func TestTransportHeadersReachInbound(t *testing.T) {
	var (
		mu  sync.Mutex
		ins []transportSeen
	)
	s := startServer(t, WithInboundMiddleware(func(ctx context.Context, in *Inbound, next func(context.Context) error) error {
		mu.Lock()
		ins = append(ins, transportSeen{Format: in.Format, Caller: in.Caller, ShardKey: in.ShardKey,
			RoutingKey: in.RoutingKey, RoutingDelegate: in.RoutingDelegate})
		mu.Unlock()
		return next(ctx)
	}))
	c, _, _ := startClient(t, s)
	if _, err := to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, []byte("x"), transportOpts()...); err != nil {
		t.Fatalf("CallRaw: %v", err)
	}
	var out echoRes
	if err := to(c, "kv").CallJSON(ctxTimeout(t), "get", &echoReq{Key: "k"}, &out, transportOpts()...); err != nil {
		t.Fatalf("CallJSON: %v", err)
	}
	if _, err := to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, []byte("x")); err != nil {
		t.Fatalf("CallRaw without options: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	rawWant, jsonWant := wantTransport, wantTransport
	rawWant.Format, jsonWant.Format = tchannel.Raw, tchannel.JSON
	want := []transportSeen{rawWant, jsonWant, {Format: tchannel.Raw, Caller: "client"}}
	if len(ins) != len(want) {
		t.Fatalf("the middleware saw %d requests, want %d: %+v", len(ins), len(want), ins)
	}
	for i := range want {
		if ins[i] != want[i] {
			t.Errorf("request %d: Inbound was %+v, want %+v", i, ins[i], want[i])
		}
	}
}

// Every attempt of a call carries its transport headers: retries after
// BUSY, and hedges sent together.
func TestTransportHeadersOnEveryAttempt(t *testing.T) {
	check := func(t *testing.T, f *plainFleet, n int) {
		t.Helper()
		got := f.seen()
		if len(got) != n {
			t.Fatalf("the fleet saw %d attempts, want %d", len(got), n)
		}
		for i, s := range got {
			s.Format = ""
			if s != wantTransport {
				t.Errorf("attempt %d carried %+v, want %+v", i, s, wantTransport)
			}
		}
	}
	t.Run("retries", func(t *testing.T) {
		f := startPlainFleet(t, 3, func(_ context.Context, n int) error {
			if n < 2 {
				return Busy("not yet")
			}
			return nil
		})
		c, err := New("client", WithServiceConfig(mustConfig(t, fmt.Sprintf(retryBusy, 3, "0.001s", ""))))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		t.Cleanup(c.Close)
		for _, hp := range f.hostPorts {
			if err := to(c, "kv").AddPeer(hp); err != nil {
				t.Fatalf("AddPeer: %v", err)
			}
		}
		var info CallInfo
		opts := append(transportOpts(), ReportCallInfo(&info))
		if _, err := to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, []byte("x"), opts...); err != nil {
			t.Fatalf("CallRaw: %v", err)
		}
		if info.Attempts != 3 {
			t.Errorf("attempts: got %d, want 3", info.Attempts)
		}
		check(t, f, 3)
	})
	t.Run("hedges", func(t *testing.T) {
		// Each server holds its answer until all three hedges have
		// arrived, so none is cancelled before it is sent.
		all := make(chan struct{})
		var once sync.Once
		var f *plainFleet
		f = startPlainFleet(t, 3, func(ctx context.Context, n int) error {
			if len(f.seen()) == 3 {
				once.Do(func() { close(all) })
			}
			select {
			case <-all:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		c, err := New("client", WithServiceConfig(mustConfig(t, fmt.Sprintf(hedgeCfg, 3, "0s", ""))))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		t.Cleanup(c.Close)
		for _, hp := range f.hostPorts {
			if err := to(c, "kv").AddPeer(hp); err != nil {
				t.Fatalf("AddPeer: %v", err)
			}
		}
		if err := to(c, "kv").Connect(ctxTimeout(t)); err != nil {
			t.Fatalf("Connect: %v", err)
		}
		if _, err := to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, []byte("x"), transportOpts()...); err != nil {
			t.Fatalf("CallRaw: %v", err)
		}
		check(t, f, 3)
	})
}

// A transport header value over TChannel's 255 bytes fails the call at
// once with BAD_REQUEST and an error naming the option; nothing is sent. A
// value of 255 bytes goes through whole.
func TestOverlongTransportHeaderFailsBeforeSending(t *testing.T) {
	f := startPlainFleet(t, 1, nil)
	c, err := New("client")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	if err := to(c, "kv").AddPeer(f.hostPorts[0]); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}
	long := strings.Repeat("k", 256)
	for _, tc := range []struct {
		name string
		opt  CallOption
	}{
		{"WithShardKey", WithShardKey(long)},
		{"WithRoutingKey", WithRoutingKey(long)},
		{"WithRoutingDelegate", WithRoutingDelegate(long)},
		{"WithCallerName", WithCallerName(long)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, []byte("x"), tc.opt)
			var ce *CallError
			if !errors.As(err, &ce) {
				t.Fatalf("CallRaw error = %v, want a *CallError", err)
			}
			if ce.Code != codes.BadRequest || ce.Attempts != 0 {
				t.Errorf("code %v after %d attempts, want BAD_REQUEST after 0", ce.Code, ce.Attempts)
			}
			for _, want := range []string{tc.name, "256 bytes", "255"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
	if got := f.seen(); len(got) != 0 {
		t.Fatalf("the server saw %d requests, want none: %+v", len(got), got)
	}

	// A routing delegate keeps 2 bytes for a call's class mark, and
	// holds no NUL.
	for _, rd := range []string{strings.Repeat("d", 254), "a\x00b"} {
		_, err := to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, []byte("x"), WithRoutingDelegate(rd))
		var ce *CallError
		if !errors.As(err, &ce) || ce.Code != codes.BadRequest || !strings.Contains(err.Error(), "at most 253 bytes") {
			t.Errorf("routing delegate %q: error %v, want BAD_REQUEST saying at most 253 bytes", rd, err)
		}
	}

	max, maxRD := strings.Repeat("m", 255), strings.Repeat("d", 253)
	if _, err := to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, []byte("x"),
		WithShardKey(max), WithRoutingKey(max), WithRoutingDelegate(maxRD), WithCallerName(max)); err != nil {
		t.Fatalf("CallRaw with the longest values: %v", err)
	}
	want := transportSeen{Format: tchannel.Raw, Caller: max, ShardKey: max, RoutingKey: max, RoutingDelegate: maxRD}
	if got := f.seen(); len(got) != 1 || got[0] != want {
		t.Errorf("the server saw %+v, want the 255-byte values whole", got)
	}
}
