package channel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/backoff"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/peerlist"
	"github.com/sluice-rpc/sluice/internal/pool"
	"github.com/sluice-rpc/sluice/internal/testkit/testnet"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/peer"
	"github.com/uber-go/tally/v4"
	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/raw"
)

// waitPeerState waits, bounded, until service's peer at hostPort is in
// state want.
func waitPeerState(t *testing.T, c *Channel, hostPort string, want peer.State) {
	t.Helper()
	testwait.Until(t, fmt.Sprintf("%s to be %v", hostPort, want), func() bool {
		for _, p := range to(c, "kv").Peers() {
			if p.HostPort == hostPort {
				return p.State == want
			}
		}
		return false
	})
}

// A peer whose server goes away is out of choice as soon as its
// connection fails: no later call picks it, not even to try.
func TestDeadPeerIsNotChosen(t *testing.T) {
	servers := []*testServer{startServer(t), startServer(t), startServer(t)}
	c, _, _ := startClient(t, servers...)
	if err := to(c, "kv").Connect(ctxTimeout(t)); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	for i := 0; i < 30; i++ {
		_, err := to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, []byte("x"))
		if err != nil {
			t.Fatalf("CallRaw: %v", err)
		}
	}
	dead := servers[0].ch.HostPort()
	servers[0].ch.Close()
	waitPeerState(t, c, dead, peer.TransientFailure)
	for i := 0; i < 100; i++ {
		res, err := to(c, "kv").Call(ctxTimeout(t), "echo", &Request{Format: tchannel.Raw, Arg3: []byte("x")})
		if err != nil {
			t.Fatalf("Call: %v", err)
		}
		if slices.Contains(res.Peers, dead) {
			t.Errorf("call %d tried the dead peer: got %q, want it not to contain %q", i, res.Peers, dead)
		}
		if res.Attempts != 1 {
			t.Errorf("res.Attempts = %v, want %v", res.Attempts, 1)
		}
	}
}

// With every peer in transient failure a call fails at once with
// UNAVAILABLE and sends nothing; no call dials (one connect per peer, made
// by its connector, whatever the number of calls).
func TestEveryPeerDownFailsAtOnceWithoutDialing(t *testing.T) {
	var dials atomic.Int64
	var d net.Dialer
	scope := tally.NewTestScope("", nil)
	clk := clock.NewFake(time.Unix(1_700_000_000, 0)) // the backoff never passes
	c, err := New("client", WithClock(clk), WithScope(scope), WithTChannelOptions(tchannel.ChannelOptions{
		Dialer: func(ctx context.Context, network, hostPort string) (net.Conn, error) {
			dials.Add(1)
			return d.DialContext(ctx, network, hostPort)
		},
	}))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	for i := 0; i < 3; i++ {
		if err := to(c, "kv").AddPeer(testnet.Refused(t)); err != nil {
			t.Fatalf("AddPeer: %v", err)
		}
	}
	for i := 0; i < 200; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		start := time.Now()
		_, err := to(c, "kv").CallRaw(ctx, "echo", nil, nil)
		cancel()
		var ce *CallError
		if !errors.As(err, &ce) {
			t.Fatalf("CallRaw error = %v, want a %T", err, ce)
		}
		if ce.Code != codes.Unavailable {
			t.Fatalf("call %d: %v: got %v, want %v", i, err, ce.Code, codes.Unavailable)
		}
		if ce.Attempts != 0 {
			t.Fatalf("ce.Attempts = %v, want 0", ce.Attempts)
		}
		if got := time.Since(start); got >= 5*time.Second {
			t.Fatalf("call %d waited for its deadline: got %v, want < %v", i, got, 5*time.Second)
		}
	}
	if got := dials.Load(); got != 3 {
		t.Errorf("dials: one per peer: got %v, want %v", got, 3)
	}
	if got := scope.Snapshot().Counters()["call.errors+code=UNAVAILABLE,method=echo,service=kv"].Value(); got != 200 {
		t.Errorf("got %v, want %v", got, 200)
	}
}

// A call that waits for ready (the call option or the service config's
// waitForReady) rides out a peer's transient failure until it comes back.
func TestWaitForReady(t *testing.T) {
	for _, tt := range []struct {
		name   string
		config string
		opts   []CallOption
	}{
		{"call option", "", []CallOption{WaitForReady()}},
		{"service config", `{"methodConfig":[{"name":[{"service":"kv"}],"waitForReady":true}]}`, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(time.Unix(1_700_000_000, 0))
			waiting := make(chan struct{}, 10)
			opts := []Option{WithClock(clk), withOnWait(func() { waiting <- struct{}{} })}
			if tt.config != "" {
				opts = append(opts, WithServiceConfig(mustConfig(t, tt.config)))
			}
			c, err := New("client", opts...)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			t.Cleanup(c.Close)
			addr := testnet.Refused(t)
			if err := to(c, "kv").AddPeer(addr); err != nil {
				t.Fatalf("AddPeer: %v", err)
			}
			if err := to(c, "kv").Connect(ctxTimeout(t)); err == nil {
				t.Fatal("Connect succeeded, want an error")
			}
			done := make(chan error, 1)
			go func() {
				_, err := to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, []byte("x"), tt.opts...)
				done <- err
			}()
			testwait.Recv(t, waiting, "the call to wait for a ready peer")
			// The server comes up where the peer was; once its backoff has
			// passed, the peer connects and the waiting call goes through.
			s, err := New("kv")
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if err := s.RegisterRaw("echo", func(context.Context, *RawRequest) (*RawResponse, error) { return &RawResponse{}, nil }); err != nil {
				t.Fatalf("RegisterRaw: %v", err)
			}
			if err := s.ListenAndServe(addr); err != nil {
				t.Fatalf("ListenAndServe: %v", err)
			}
			t.Cleanup(s.Close)
			testwait.Timers(t, clk, 1)
			clk.Add(2 * time.Second)
			if err := testwait.Recv(t, done, "the waiting call"); err != nil {
				t.Fatalf("testwait.Recv: %v", err)
			}
		})
	}
	// Without it, the same call fails at once.
	c, err := New("client")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	if err := to(c, "kv").AddPeer(testnet.Refused(t)); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}
	_, err = to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil)
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("CallRaw error = %v, want %v", err, ErrUnavailable)
	}
}

// A peer that accepts TCP and never finishes the handshake is never sent a
// call: calls go to the good peer, under retry and hedging policies alike,
// and none waits on the stuck handshake. With only that peer, a call waits
// while it is connecting and returns at its deadline.
func TestBlackHolePeerHoldsNoCall(t *testing.T) {
	hole := testnet.BlackHole(t).Addr()
	for _, cfg := range []string{
		fmt.Sprintf(retryBusy, 3, "0.01s", ""),
		fmt.Sprintf(hedgeCfg, 3, "0.01s", ""),
	} {
		good := startServer(t)
		c, err := New("client", WithServiceConfig(mustConfig(t, cfg)))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		t.Cleanup(c.Close)
		if err := to(c, "kv").AddPeer(hole); err != nil {
			t.Fatalf("AddPeer: %v", err)
		}
		if err := to(c, "kv").AddPeer(good.ch.HostPort()); err != nil {
			t.Fatalf("AddPeer: %v", err)
		}
		for i := 0; i < 50; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			res, err := to(c, "kv").Call(ctx, "echo", &Request{Format: tchannel.Raw, Arg3: []byte("x")})
			cancel()
			if err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
			if slices.Contains(res.Peers, hole) {
				t.Errorf("res.Peers = %q, want it not to contain %q", res.Peers, hole)
			}
		}
		for _, p := range to(c, "kv").Peers() {
			if p.HostPort == hole {
				if p.State == peer.Ready {
					t.Errorf("the black hole is ready: got %v, want a different value", p.State)
				}
			}
		}
	}

	c, err := New("client")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	if err := to(c, "kv").AddPeer(hole); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = to(c, "kv").CallRaw(ctx, "echo", nil, nil)
	var ce *CallError
	if !errors.As(err, &ce) {
		t.Fatalf("CallRaw error = %v, want a %T", err, ce)
	}
	if ce.Code != codes.Timeout {
		t.Errorf("%v: got %v, want %v", err, ce.Code, codes.Timeout)
	}
	if ce.Attempts != 0 {
		t.Errorf("ce.Attempts = %v, want 0", ce.Attempts)
	}
	if !strings.Contains(err.Error(), "no peer became ready") {
		t.Errorf("err.Error() = %q, want it to contain %q", err.Error(), "no peer became ready")
	}
}

// Requests no peer could ever take fail at once with BAD_REQUEST: nothing
// is sent, nothing retried, and a name that is not one makes no metrics.
func TestUnsendableRequestsFailAtOnce(t *testing.T) {
	s := startServer(t)
	scope := tally.NewTestScope("", nil)
	c, err := New("client", WithScope(scope), WithMaxRequestSize(1024),
		WithServiceConfig(mustConfig(t, fmt.Sprintf(retryBusy, 5, "0.01s", ""))))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	if err := to(c, "kv").AddPeer(s.ch.HostPort()); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}
	// A service name is checked once, when its Client is made.
	if _, err := c.NewClient(strings.Repeat("s", 300)); err == nil || !strings.Contains(err.Error(), "the service name is 300 bytes; TChannel allows at most 255") {
		t.Errorf("NewClient(300 bytes): %v, want an error naming TChannel's limit", err)
	}
	long := func(n int) string { return strings.Repeat("m", n) }
	for _, tt := range []struct {
		name            string
		service, method string
		req             *Request
		want            string
	}{
		{"nil request", "kv", "echo", nil, "the request is nil"},
		{"unknown format", "kv", "echo", &Request{Format: "yaml"}, `format "yaml" is not supported`},
		{"method name of 64 KiB", "kv", long(64 << 10), &Request{Format: tchannel.Raw}, "the method name is 65536 bytes; TChannel allows at most 16384"},
		{"arguments over the limit", "kv", "echo", &Request{Format: tchannel.Raw, Arg2: make([]byte, 100), Arg3: make([]byte, 1000)},
			"the request's arguments are 1100 bytes, over the limit of 1024"},
		{"headers count toward the limit", "kv", "get", &Request{Format: tchannel.JSON, Headers: map[string]string{"k": long(1100)}, Arg3: []byte("{}")},
			"over the limit of 1024"},
		{"a Thrift header over 64 KiB", "kv", "get", &Request{Format: tchannel.Thrift, Headers: map[string]string{"k": long(70000)}},
			"Thrift allows at most 65535"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			_, err := to(c, tt.service).Call(ctx, tt.method, tt.req)
			var ce *CallError
			if !errors.As(err, &ce) {
				t.Fatalf("Call error = %v, want a %T", err, ce)
			}
			if ce.Code != codes.BadRequest {
				t.Errorf("ce.Code = %v, want %v", ce.Code, codes.BadRequest)
			}
			if ce.Attempts != 0 {
				t.Errorf("ce.Attempts = %v, want 0", ce.Attempts)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err.Error() = %q, want it to contain %q", err.Error(), tt.want)
			}
			if got := time.Since(start); got >= 5*time.Second {
				t.Errorf("retried until the deadline: got %v, want < %v", got, 5*time.Second)
			}
		})
	}
	if got := s.received.Load(); got != 0 {
		t.Errorf("a request reached the server: got %v, want 0", got)
	}
	for name := range scope.Snapshot().Counters() {
		if strings.Contains(name, "mmmmmmmm") {
			t.Errorf("a method name that is not one made a metric: got %q, want it not to contain %q", name, "mmmmmmmm")
		}
	}
	_, err = to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, make([]byte, 1024))
	if err != nil {
		t.Errorf("a request at the limit goes: %v", err)
	}
}

// A decline a closing Sluice server sends before any handler runs is
// retried once, transparently, on another peer: the handler runs once. A
// second one is an ordinary DECLINED.
func TestMarkedDeclineIsRetriedOnceElsewhere(t *testing.T) {
	var ran atomic.Int64
	type server struct {
		ch    *Channel
		scope tally.TestScope
	}
	start := func(closing bool) server {
		scope := tally.NewTestScope("", nil)
		ch, err := New("kv", WithScope(scope))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if err := ch.RegisterRaw("echo", func(context.Context, *RawRequest) (*RawResponse, error) {
			ran.Add(1)
			return &RawResponse{}, nil
		}); err != nil {
			t.Fatalf("RegisterRaw: %v", err)
		}
		if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
			t.Fatalf("ListenAndServe: %v", err)
		}
		t.Cleanup(ch.Close)
		// The state Close enters first: the guard declines, marked. (Reset
		// before the cleanup's Close, which does nothing on a closed
		// Channel.)
		ch.declining.Store(closing)
		t.Cleanup(func() { ch.declining.Store(false) })
		return server{ch, scope}
	}
	declined := func(s server) int64 {
		return serverCalls(s.scope)
	}
	closing, good := start(true), start(false)
	c, err := New("client")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	if err := to(c, "kv").AddPeer(closing.ch.HostPort()); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}
	if err := to(c, "kv").AddPeer(good.ch.HostPort()); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}
	if err := to(c, "kv").Connect(ctxTimeout(t)); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	for i := 0; i < 20; i++ {
		res, err := to(c, "kv").Call(ctxTimeout(t), "echo", &Request{Format: tchannel.Raw})
		if err != nil {
			t.Fatalf("no retry policy: only the early decline is retried: %v", err)
		}
		if want := good.ch.HostPort(); res.Peer != want {
			t.Errorf("res.Peer = %q, want %q", res.Peer, want)
		}
	}
	if got := ran.Load(); got != 20 {
		t.Errorf("each call ran its handler once: got %v, want %v", got, 20)
	}
	if got := declined(closing); got <= 0 {
		t.Errorf("no call went to the closing peer first: got %v, want > 0", got)
	}

	// Both peers declining: one transparent retry, then the decline is the
	// call's error.
	other := start(true)
	c2, err := New("client")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c2.Close)
	if err := to(c2, "kv").AddPeer(closing.ch.HostPort()); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}
	if err := to(c2, "kv").AddPeer(other.ch.HostPort()); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}
	before := declined(closing) + declined(other)
	_, err = to(c2, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil)
	var ce *CallError
	if !errors.As(err, &ce) {
		t.Fatalf("CallRaw error = %v, want a %T", err, ce)
	}
	if ce.Code != codes.Declined {
		t.Errorf("ce.Code = %v, want %v", ce.Code, codes.Declined)
	}
	if ce.Attempts != 2 {
		t.Errorf("ce.Attempts = %v, want %v", ce.Attempts, 2)
	}
	if got := declined(closing) + declined(other) - before; got != 2 {
		t.Errorf("declined(closing)+declined(other)-before = %v, want %v", got, 2)
	}
	if got := ran.Load(); got != 20 {
		t.Errorf("a closing server ran a handler: got %v, want %v", got, 20)
	}
}

// A handler that passes on the early decline of a call it made downstream
// has run: its caller must not retry it transparently. The middle tier's
// handler runs once per call.
func TestForwardedEarlyDeclineIsNotTransparent(t *testing.T) {
	down, err := New("down")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := down.RegisterRaw("echo", func(context.Context, *RawRequest) (*RawResponse, error) { return &RawResponse{}, nil }); err != nil {
		t.Fatalf("RegisterRaw: %v", err)
	}
	if err := down.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatalf("ListenAndServe: %v", err)
	}
	t.Cleanup(down.Close)
	down.declining.Store(true)                        // declines every request, marked as before any handler
	t.Cleanup(func() { down.declining.Store(false) }) // as Close and Shutdown do; Close then closes

	var ran atomic.Int64
	var middles []*Channel
	for i := 0; i < 2; i++ {
		mid, err := New("kv")
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		t.Cleanup(mid.Close)
		err = mid.RegisterRaw("echo", func(ctx context.Context, req *RawRequest) (*RawResponse, error) {
			ran.Add(1)
			_, err := to(mid, "down").CallRaw(ctx, "echo", nil, nil)
			return nil, err // the downstream's error, as it came
		})
		if err != nil {
			t.Fatalf("RegisterRaw: %v", err)
		}
		if err := mid.ListenAndServe("127.0.0.1:0"); err != nil {
			t.Fatalf("ListenAndServe: %v", err)
		}
		// After ListenAndServe: tchannel-go's Serve sets the channel's
		// address unguarded, which a connect in flight reads.
		if err := to(mid, "down").AddPeer(down.HostPort()); err != nil {
			t.Fatalf("AddPeer: %v", err)
		}
		middles = append(middles, mid)
	}
	c, err := New("client")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	for _, m := range middles {
		if err := to(c, "kv").AddPeer(m.HostPort()); err != nil {
			t.Fatalf("AddPeer: %v", err)
		}
	}
	for i := 0; i < 10; i++ {
		_, err := to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil)
		var ce *CallError
		if !errors.As(err, &ce) {
			t.Fatalf("CallRaw error = %v, want a %T", err, ce)
		}
		if ce.Code != codes.Declined {
			t.Errorf("ce.Code = %v, want %v", ce.Code, codes.Declined)
		}
		if ce.Attempts != 1 {
			t.Errorf("the forwarded decline was retried: %v: got %v, want %v", err, ce.Attempts, 1)
		}
		if want := "declined downstream, after this server's handler ran"; !strings.Contains(ce.Message, want) {
			t.Errorf("ce.Message = %q, want it to contain %q", ce.Message, want)
		}
	}
	if got := ran.Load(); got != 10 {
		t.Errorf("a middle-tier handler ran twice for one call: got %v, want %v", got, 10)
	}
}

// Close ends the calls waiting for a ready peer at once, with ErrClosed,
// instead of leaving them to their deadlines.
func TestCloseEndsCallsWaitingForReady(t *testing.T) {
	waiting := make(chan struct{}, 10)
	c, err := New("client", withOnWait(func() { waiting <- struct{}{} }))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := to(c, "kv").AddPeer(testnet.Refused(t)); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}
	if err := to(c, "kv").Connect(ctxTimeout(t)); err == nil {
		t.Fatal("Connect succeeded, want an error")
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := to(c, "kv").CallRaw(ctx, "echo", nil, nil, WaitForReady())
		done <- err
	}()
	testwait.Recv(t, waiting, "the call to wait for a ready peer")
	none := to(c, "none")
	start := time.Now()
	c.Close()
	err = testwait.Recv(t, done, "the waiting call to end")
	if !errors.Is(err, ErrClosed) {
		t.Errorf("testwait.Recv error = %v, want %v", err, ErrClosed)
	}
	if got := time.Since(start); got >= 30*time.Second {
		t.Errorf("the call waited for its deadline: got %v, want < %v", got, 30*time.Second)
	}
	if err := none.Connect(ctxTimeout(t)); !errors.Is(err, ErrNoPeers) {
		t.Errorf("Connect error = %v, want %v", err, ErrNoPeers)
	}
}

// tchannel-go declines a call that arrives on a connection of a closing
// channel before dispatching it ("closed channel"): no handler ran, so it
// is retried once, transparently, on another peer.
func TestClosingChannelDeclineIsRetriedOnceElsewhere(t *testing.T) {
	// A plain tchannel-go server whose first request blocks until the end,
	// holding its connection open while the channel closes.
	var received atomic.Int64
	release := make(chan struct{})
	closing, err := tchannel.NewChannel("kv", nil)
	if err != nil {
		t.Fatalf("tchannel.NewChannel: %v", err)
	}
	closing.Register(raw.Wrap(blockHandler{&received, release}), "echo")
	if err := closing.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatalf("ListenAndServe: %v", err)
	}
	t.Cleanup(closing.Close)
	t.Cleanup(func() { close(release) })

	// The other peer answers BUSY once, so that the retry avoids it and
	// goes to the closing one.
	var busyOnce atomic.Bool
	good := startServer(t)
	good.busyEvery = func() bool { return !busyOnce.Swap(true) }

	c, err := New("client", WithServiceConfig(mustConfig(t, fmt.Sprintf(retryBusy, 3, "0.001s", ""))))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	if err := to(c, "kv").AddPeer(closing.PeerInfo().HostPort); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}
	if err := to(c, "kv").Connect(ctxTimeout(t)); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	blocked := make(chan error, 1)
	go func() { _, err := to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil); blocked <- err }()
	testwait.Until(t, "the first request to block", func() bool { return received.Load() == 1 })
	closing.Close() // its connection stays open for the blocked request
	if err := to(c, "kv").AddPeer(good.ch.HostPort()); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}
	if err := to(c, "kv").Connect(ctxTimeout(t)); err != nil {
		t.Fatalf("Connect: %v", err)
	}

	// BUSY from good; the retry goes to the closing peer, which declines
	// before dispatch; the transparent retry goes back to good.
	res, err := to(c, "kv").Call(ctxTimeout(t), "echo", &Request{Format: tchannel.Raw, Arg3: []byte("x")})
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	if want := []string{good.ch.HostPort(), closing.PeerInfo().HostPort}; !slices.Equal(res.Peers, want) {
		t.Errorf("peers in the order first chosen: got %q, want %q", res.Peers, want)
	}
	if want := good.ch.HostPort(); res.Peer != want {
		t.Errorf("res.Peer = %q, want %q", res.Peer, want)
	}
	if res.Attempts != 3 {
		t.Errorf("res.Attempts = %v, want %v", res.Attempts, 3)
	}
	if got := received.Load(); got != 1 {
		t.Errorf("the closing server dispatched the declined request: got %v, want %v", got, 1)
	}
	if got := good.received.Load(); got != 2 {
		t.Errorf("good.received.Load() = %v, want %v", got, 2)
	}
}

type blockHandler struct {
	received *atomic.Int64
	release  chan struct{}
}

func (h blockHandler) Handle(ctx context.Context, _ *raw.Args) (*raw.Res, error) {
	h.received.Add(1)
	select {
	case <-h.release:
	case <-ctx.Done():
	}
	return &raw.Res{}, nil
}
func (blockHandler) OnError(context.Context, error) {}

// The rare path of an attempt: BeginCall on the chosen peer found its
// connection gone (here, the error tchannel-go passes on from Sluice's
// Dialer). The attempt reports the peer lost, counts the try as unsent,
// gives back its claim on the peer and begins on another peer at once;
// with no other peer it ends UNAVAILABLE after one try; an error of
// tchannel-go's own ends it with its code. No peer is left counting a
// call that was not sent.
func TestAttemptMovesOnWhenTheConnectionIsGone(t *testing.T) {
	a, b := startServer(t), startServer(t)
	c, _, scope := startClient(t, a, b)
	if err := to(c, "kv").Connect(ctxTimeout(t)); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	pol, err := policyOf(c, "kv", "echo")
	if err != nil {
		t.Fatalf("policyFor: %v", err)
	}
	l := pol.list
	gone := l.Get(a.ch.HostPort())
	req := &Request{Format: tchannel.Raw, Arg3: []byte("x")}
	spec := &attemptSpec{service: "kv", method: "echo", req: req}
	newState := func() *callState {
		st := &callState{c: c, l: l, pol: pol, spec: *spec}
		st.used, st.wins = append(st.usedBuf[:0], gone), st.winsBuf[:0] // the attempt chose gone
		gone.Claim()
		return st
	}
	ctx := ctxTimeout(t)

	st := newState()
	p, call, _, err := c.beginElsewhere(ctx, ctx, st, spec, nil, gone, time.Now(), pool.ErrNoConnection)
	if err != nil {
		t.Fatalf("beginElsewhere: %v", err)
	}
	if want, got := b.ch.HostPort(), p.HostPort(); got != want {
		t.Errorf("it began on the other peer: got %q, want %q", got, want)
	}
	if gone.Pending() != 0 || p.Pending() != 1 {
		t.Errorf("pending: %d on the peer whose connection was gone, %d on the one the attempt began on; want 0 and 1", gone.Pending(), p.Pending())
	}
	var res Response
	_, _, err = exchange(call, req, &res, defaultMaxResponseSize, nil, nil)
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	if string(res.Arg3) != "x" {
		t.Errorf("string(res.Arg3) = %q, want %q", string(res.Arg3), "x")
	}
	if got := scope.Snapshot().Counters()["attempt.unsent+method=echo,service=kv"].Value(); got != 1 {
		t.Errorf("got %v, want %v", got, 1)
	}
	waitPeerState(t, c, a.ch.HostPort(), peer.Ready) // a false alarm: the connector made it Ready again

	// A list of one: nowhere else to go.
	solo, err := peerlist.New(peerlist.Config{Service: "solo"})
	if err != nil {
		t.Fatalf("peer.NewList: %v", err)
	}
	only, err := solo.Add(a.ch.HostPort())
	if err != nil {
		t.Fatalf("Add: %v", err)
	}
	st = newState()
	gone.Unclaim() // newState's: this attempt chose only
	st.l = solo
	only.Claim()
	_, _, _, err = c.beginElsewhere(ctx, ctx, st, spec, nil, only, time.Now(), pool.ErrNoConnection)
	if only.Pending() != 0 {
		t.Errorf("%d pending on the only peer after the attempt failed unsent; want 0", only.Pending())
	}
	var ce *CallError
	if !errors.As(err, &ce) {
		t.Fatalf("beginElsewhere error = %v, want a %T", err, ce)
	}
	if ce.Code != codes.Unavailable {
		t.Errorf("ce.Code = %v, want %v", ce.Code, codes.Unavailable)
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("beginElsewhere error = %v, want %v", err, ErrUnavailable)
	}

	// tchannel-go refusing the call itself is not a connection problem.
	_, _, _, err = c.beginElsewhere(ctx, ctx, newState(), spec, nil, gone, time.Now(), tchannel.ErrTimeout)
	if !errors.As(err, &ce) {
		t.Fatalf("beginElsewhere error = %v, want a %T", err, ce)
	}
	if ce.Code != codes.Timeout {
		t.Errorf("ce.Code = %v, want %v", ce.Code, codes.Timeout)
	}
	if gone.Pending() != 0 {
		t.Errorf("%d pending on the peer after tchannel-go refused the call; want 0", gone.Pending())
	}
}

// WithConnectConfig's settings reach the connectors: a connect to a peer
// that never answers the handshake ends at the configured Timeout, not the
// default 5 s, and the peer waits out the configured backoff. A config the
// pool refuses fails New with the option's name.
func TestWithConnectConfig(t *testing.T) {
	_, err := New("client", WithConnectConfig(ConnectConfig{Timeout: -time.Second}))
	if err == nil {
		t.Fatal("New succeeded, want an error")
	}
	if !strings.Contains(err.Error(), "WithConnectConfig") {
		t.Errorf("err.Error() = %q, want it to contain %q", err.Error(), "WithConnectConfig")
	}
	if !strings.Contains(err.Error(), "Timeout is -1s") {
		t.Errorf("err.Error() = %q, want it to contain %q", err.Error(), "Timeout is -1s")
	}

	hole := testnet.BlackHole(t)
	c, err := New("client", WithConnectConfig(ConnectConfig{
		Timeout: 100 * time.Millisecond,
		Backoff: backoff.Exponential{Initial: time.Hour, Max: time.Hour, Multiplier: 1, Jitter: backoff.ProportionalJitter},
	}))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	start := time.Now()
	if err := to(c, "kv").AddPeer(hole.Addr()); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}
	waitPeerState(t, c, hole.Addr(), peer.TransientFailure)
	// Generous against the 100 ms asked for: the default would take 5 s.
	if got := time.Since(start); got >= pool.DefaultConnectTimeout/2 {
		t.Errorf("the connect did not end at the configured Timeout: got %v, want < %v", got, pool.DefaultConnectTimeout/2)
	}
	if got := hole.Accepts(); got != 1 {
		t.Errorf("hole.Accepts() = %v, want %v", got, 1)
	}
	_, err = to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil)
	var ce *CallError
	if !errors.As(err, &ce) {
		t.Fatalf("CallRaw error = %v, want a %T", err, ce)
	}
	if ce.Code != codes.Unavailable {
		t.Errorf("the peer is backing off for an hour: %v: got %v, want %v", err, ce.Code, codes.Unavailable)
	}
	if got := hole.Accepts(); got != 1 {
		t.Errorf("a second connect within the hour's backoff: got %v, want %v", got, 1)
	}
}
