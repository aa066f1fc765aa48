package channel

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/backoff"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/testkit/testnet"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/peer"
	"github.com/sluice-rpc/sluice/stats"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/raw"
)

// waitPeerState waits, bounded, until service's peer at hostPort is in
// state want.
func waitPeerState(t *testing.T, c *Channel, hostPort string, want peer.State) {
	t.Helper()
	testwait.Until(t, fmt.Sprintf("%s to be %v", hostPort, want), func() bool {
		for _, p := range c.Peers("kv") {
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
	require.NoError(t, c.Connect(ctxTimeout(t), "kv"))
	for i := 0; i < 30; i++ {
		_, err := c.CallRaw(ctxTimeout(t), "kv", "echo", nil, []byte("x"))
		require.NoError(t, err)
	}
	dead := servers[0].ch.HostPort()
	servers[0].ch.Close()
	waitPeerState(t, c, dead, peer.TransientFailure)
	for i := 0; i < 100; i++ {
		res, err := c.Call(ctxTimeout(t), "kv", "echo", &Request{Format: tchannel.Raw, Arg3: []byte("x")})
		require.NoError(t, err)
		assert.NotContains(t, res.Peers, dead, "call %d tried the dead peer", i)
		assert.Equal(t, 1, res.Attempts)
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
	require.NoError(t, err)
	t.Cleanup(c.Close)
	for i := 0; i < 3; i++ {
		require.NoError(t, c.AddPeer("kv", testnet.Refused(t)))
	}
	for i := 0; i < 200; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		start := time.Now()
		_, err := c.CallRaw(ctx, "kv", "echo", nil, nil)
		cancel()
		var ce *CallError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, codes.Unavailable, ce.Code, "call %d: %v", i, err)
		require.Zero(t, ce.Attempts)
		require.Less(t, time.Since(start), 5*time.Second, "call %d waited for its deadline", i)
	}
	assert.EqualValues(t, 3, dials.Load(), "dials: one per peer")
	assert.EqualValues(t, 200, scope.Snapshot().Counters()["call.errors+code=UNAVAILABLE,method=_other,service=kv"].Value())
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
			require.NoError(t, err)
			t.Cleanup(c.Close)
			addr := testnet.Refused(t)
			require.NoError(t, c.AddPeer("kv", addr))
			require.Error(t, c.Connect(ctxTimeout(t), "kv"))
			done := make(chan error, 1)
			go func() {
				_, err := c.CallRaw(ctxTimeout(t), "kv", "echo", nil, []byte("x"), tt.opts...)
				done <- err
			}()
			testwait.Recv(t, waiting, "the call to wait for a ready peer")
			// The server comes up where the peer was; once its backoff has
			// passed, the peer connects and the waiting call goes through.
			s, err := New("kv")
			require.NoError(t, err)
			require.NoError(t, s.RegisterRaw("echo", func(context.Context, *RawRequest) (*RawResponse, error) { return &RawResponse{}, nil }))
			require.NoError(t, s.ListenAndServe(addr))
			t.Cleanup(s.Close)
			testwait.Timers(t, clk, 1)
			clk.Add(2 * time.Second)
			require.NoError(t, testwait.Recv(t, done, "the waiting call"))
		})
	}
	// Without it, the same call fails at once.
	c, err := New("client")
	require.NoError(t, err)
	t.Cleanup(c.Close)
	require.NoError(t, c.AddPeer("kv", testnet.Refused(t)))
	_, err = c.CallRaw(ctxTimeout(t), "kv", "echo", nil, nil)
	assert.ErrorIs(t, err, ErrUnavailable)
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
		require.NoError(t, err)
		t.Cleanup(c.Close)
		require.NoError(t, c.AddPeer("kv", hole))
		require.NoError(t, c.AddPeer("kv", good.ch.HostPort()))
		for i := 0; i < 50; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			res, err := c.Call(ctx, "kv", "echo", &Request{Format: tchannel.Raw, Arg3: []byte("x")})
			cancel()
			require.NoError(t, err, "call %d", i)
			assert.NotContains(t, res.Peers, hole)
		}
		for _, p := range c.Peers("kv") {
			if p.HostPort == hole {
				assert.NotEqual(t, peer.Ready, p.State, "the black hole is ready")
			}
		}
	}

	c, err := New("client")
	require.NoError(t, err)
	t.Cleanup(c.Close)
	require.NoError(t, c.AddPeer("kv", hole))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = c.CallRaw(ctx, "kv", "echo", nil, nil)
	var ce *CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, codes.Timeout, ce.Code, "%v", err)
	assert.Zero(t, ce.Attempts)
	assert.Contains(t, err.Error(), "no peer became ready")
}

// Requests no peer could ever take fail at once with BAD_REQUEST: nothing
// is sent, nothing retried, and a name that is not one makes no metrics.
func TestUnsendableRequestsFailAtOnce(t *testing.T) {
	s := startServer(t)
	scope := tally.NewTestScope("", nil)
	c, err := New("client", WithScope(scope), WithMaxRequestSize(1024),
		WithServiceConfig(mustConfig(t, fmt.Sprintf(retryBusy, 5, "0.01s", ""))))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	require.NoError(t, c.AddPeer("kv", s.ch.HostPort()))
	require.NoError(t, c.AddPeer(strings.Repeat("s", 300), s.ch.HostPort()))
	long := func(n int) string { return strings.Repeat("m", n) }
	for _, tt := range []struct {
		name            string
		service, method string
		req             *Request
		want            string
	}{
		{"nil request", "kv", "echo", nil, "the request is nil"},
		{"unknown format", "kv", "echo", &Request{Format: "yaml"}, `format "yaml" is not supported`},
		{"service name over 255 bytes", strings.Repeat("s", 300), "echo", &Request{Format: tchannel.Raw}, "the service name is 300 bytes; TChannel allows at most 255"},
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
			_, err := c.Call(ctx, tt.service, tt.method, tt.req)
			var ce *CallError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, codes.BadRequest, ce.Code)
			assert.Zero(t, ce.Attempts)
			assert.Contains(t, err.Error(), tt.want)
			assert.Less(t, time.Since(start), 5*time.Second, "retried until the deadline")
		})
	}
	assert.Zero(t, s.received.Load(), "a request reached the server")
	for name := range scope.Snapshot().Counters() {
		assert.NotContains(t, name, "mmmmmmmm", "a method name that is not one made a metric")
	}
	_, err = c.CallRaw(ctxTimeout(t), "kv", "echo", nil, make([]byte, 1024))
	assert.NoError(t, err, "a request at the limit goes")
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
		require.NoError(t, err)
		require.NoError(t, ch.RegisterRaw("echo", func(context.Context, *RawRequest) (*RawResponse, error) {
			ran.Add(1)
			return &RawResponse{}, nil
		}))
		require.NoError(t, ch.ListenAndServe("127.0.0.1:0"))
		t.Cleanup(ch.Close)
		// The state Close enters first: the guard declines, marked. (Reset
		// before the cleanup's Close, which does nothing on a closed
		// Channel.)
		ch.closed.Store(closing)
		t.Cleanup(func() { ch.closed.Store(false) })
		return server{ch, scope}
	}
	declined := func(s server) int64 {
		if c := s.scope.Snapshot().Counters()[stats.ServerRequests+"+"]; c != nil {
			return c.Value()
		}
		return 0
	}
	closing, good := start(true), start(false)
	c, err := New("client")
	require.NoError(t, err)
	t.Cleanup(c.Close)
	require.NoError(t, c.AddPeer("kv", closing.ch.HostPort()))
	require.NoError(t, c.AddPeer("kv", good.ch.HostPort()))
	require.NoError(t, c.Connect(ctxTimeout(t), "kv"))
	for i := 0; i < 20; i++ {
		res, err := c.Call(ctxTimeout(t), "kv", "echo", &Request{Format: tchannel.Raw})
		require.NoError(t, err, "no retry policy: only the early decline is retried")
		assert.Equal(t, good.ch.HostPort(), res.Peer)
	}
	assert.EqualValues(t, 20, ran.Load(), "each call ran its handler once")
	assert.Positive(t, declined(closing), "no call went to the closing peer first")

	// Both peers declining: one transparent retry, then the decline is the
	// call's error.
	other := start(true)
	c2, err := New("client")
	require.NoError(t, err)
	t.Cleanup(c2.Close)
	require.NoError(t, c2.AddPeer("kv", closing.ch.HostPort()))
	require.NoError(t, c2.AddPeer("kv", other.ch.HostPort()))
	before := declined(closing) + declined(other)
	_, err = c2.CallRaw(ctxTimeout(t), "kv", "echo", nil, nil)
	var ce *CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, codes.Declined, ce.Code)
	assert.Equal(t, 2, ce.Attempts)
	assert.EqualValues(t, 2, declined(closing)+declined(other)-before)
	assert.EqualValues(t, 20, ran.Load(), "a closing server ran a handler")
}

// A handler that passes on the early decline of a call it made downstream
// has run: its caller must not retry it transparently. The middle tier's
// handler runs once per call.
func TestForwardedEarlyDeclineIsNotTransparent(t *testing.T) {
	down, err := New("down")
	require.NoError(t, err)
	require.NoError(t, down.RegisterRaw("echo", func(context.Context, *RawRequest) (*RawResponse, error) { return &RawResponse{}, nil }))
	require.NoError(t, down.ListenAndServe("127.0.0.1:0"))
	t.Cleanup(down.Close)
	down.closed.Store(true)                        // declines every request, marked as before any handler
	t.Cleanup(func() { down.closed.Store(false) }) // before Close, which does nothing on a closed Channel

	var ran atomic.Int64
	var middles []*Channel
	for i := 0; i < 2; i++ {
		mid, err := New("kv")
		require.NoError(t, err)
		t.Cleanup(mid.Close)
		require.NoError(t, mid.AddPeer("down", down.HostPort()))
		require.NoError(t, mid.RegisterRaw("echo", func(ctx context.Context, req *RawRequest) (*RawResponse, error) {
			ran.Add(1)
			_, err := mid.CallRaw(ctx, "down", "echo", nil, nil)
			return nil, err // the downstream's error, as it came
		}))
		require.NoError(t, mid.ListenAndServe("127.0.0.1:0"))
		middles = append(middles, mid)
	}
	c, err := New("client")
	require.NoError(t, err)
	t.Cleanup(c.Close)
	for _, m := range middles {
		require.NoError(t, c.AddPeer("kv", m.HostPort()))
	}
	for i := 0; i < 10; i++ {
		_, err := c.CallRaw(ctxTimeout(t), "kv", "echo", nil, nil)
		var ce *CallError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, codes.Declined, ce.Code)
		assert.Equal(t, 1, ce.Attempts, "the forwarded decline was retried: %v", err)
		assert.Contains(t, ce.Message, "declined downstream, after this server's handler ran")
	}
	assert.EqualValues(t, 10, ran.Load(), "a middle-tier handler ran twice for one call")
}

// Close ends the calls waiting for a ready peer at once, with ErrClosed,
// instead of leaving them to their deadlines.
func TestCloseEndsCallsWaitingForReady(t *testing.T) {
	waiting := make(chan struct{}, 10)
	c, err := New("client", withOnWait(func() { waiting <- struct{}{} }))
	require.NoError(t, err)
	require.NoError(t, c.AddPeer("kv", testnet.Refused(t)))
	require.Error(t, c.Connect(ctxTimeout(t), "kv"))
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := c.CallRaw(ctx, "kv", "echo", nil, nil, WaitForReady())
		done <- err
	}()
	testwait.Recv(t, waiting, "the call to wait for a ready peer")
	start := time.Now()
	c.Close()
	err = testwait.Recv(t, done, "the waiting call to end")
	assert.ErrorIs(t, err, ErrClosed)
	assert.Less(t, time.Since(start), 30*time.Second, "the call waited for its deadline")
	assert.ErrorIs(t, c.Connect(ctxTimeout(t), "none"), ErrNoPeers)
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
	require.NoError(t, err)
	closing.Register(raw.Wrap(blockHandler{&received, release}), "echo")
	require.NoError(t, closing.ListenAndServe("127.0.0.1:0"))
	t.Cleanup(closing.Close)
	t.Cleanup(func() { close(release) })

	// The other peer answers BUSY once, so that the retry avoids it and
	// goes to the closing one.
	var busyOnce atomic.Bool
	good := startServer(t)
	good.busyEvery = func() bool { return !busyOnce.Swap(true) }

	c, err := New("client", WithServiceConfig(mustConfig(t, fmt.Sprintf(retryBusy, 3, "0.001s", ""))))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	require.NoError(t, c.AddPeer("kv", closing.PeerInfo().HostPort))
	require.NoError(t, c.Connect(ctxTimeout(t), "kv"))
	blocked := make(chan error, 1)
	go func() { _, err := c.CallRaw(ctxTimeout(t), "kv", "echo", nil, nil); blocked <- err }()
	testwait.Until(t, "the first request to block", func() bool { return received.Load() == 1 })
	closing.Close() // its connection stays open for the blocked request
	require.NoError(t, c.AddPeer("kv", good.ch.HostPort()))
	require.NoError(t, c.Connect(ctxTimeout(t), "kv"))

	// BUSY from good; the retry goes to the closing peer, which declines
	// before dispatch; the transparent retry goes back to good.
	res, err := c.Call(ctxTimeout(t), "kv", "echo", &Request{Format: tchannel.Raw, Arg3: []byte("x")})
	require.NoError(t, err)
	assert.Equal(t, []string{good.ch.HostPort(), closing.PeerInfo().HostPort}, res.Peers, "peers in the order first chosen")
	assert.Equal(t, good.ch.HostPort(), res.Peer)
	assert.Equal(t, 3, res.Attempts)
	assert.EqualValues(t, 1, received.Load(), "the closing server dispatched the declined request")
	assert.EqualValues(t, 2, good.received.Load())
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
// Dialer). The attempt reports the peer lost, counts the try as unsent and
// begins on another peer at once; with no other peer it ends UNAVAILABLE
// after one try; an error of tchannel-go's own ends it with its code.
func TestAttemptMovesOnWhenTheConnectionIsGone(t *testing.T) {
	a, b := startServer(t), startServer(t)
	c, _, scope := startClient(t, a, b)
	require.NoError(t, c.Connect(ctxTimeout(t), "kv"))
	pol, err := c.policyFor("kv", "echo")
	require.NoError(t, err)
	l := pol.peers(c, "kv")
	gone := l.Get(a.ch.HostPort())
	req := &Request{Format: tchannel.Raw, Arg3: []byte("x")}
	spec := &attemptSpec{service: "kv", method: "echo", req: req}
	newState := func() *callState {
		st := &callState{c: c, l: l, pol: pol, spec: *spec}
		st.used, st.wins = append(st.usedBuf[:0], gone), st.winsBuf[:0] // the attempt chose gone
		return st
	}
	ctx := ctxTimeout(t)

	st := newState()
	p, call, _, err := c.beginElsewhere(ctx, ctx, st, spec, nil, gone, time.Now(), peer.ErrNoConnection)
	require.NoError(t, err)
	assert.Equal(t, b.ch.HostPort(), p.HostPort(), "it began on the other peer")
	var res Response
	_, _, err = exchange(call, req, &res)
	require.NoError(t, err)
	assert.Equal(t, "x", string(res.Arg3))
	assert.EqualValues(t, 1, scope.Snapshot().Counters()["attempt.unsent+method=echo,service=kv"].Value())
	waitPeerState(t, c, a.ch.HostPort(), peer.Ready) // a false alarm: the connector made it Ready again

	// A list of one: nowhere else to go.
	solo, err := peer.NewList(peer.ListConfig{Service: "solo"})
	require.NoError(t, err)
	only, err := solo.Add(a.ch.HostPort())
	require.NoError(t, err)
	st = newState()
	st.l = solo
	_, _, _, err = c.beginElsewhere(ctx, ctx, st, spec, nil, only, time.Now(), peer.ErrNoConnection)
	var ce *CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, codes.Unavailable, ce.Code)
	assert.ErrorIs(t, err, ErrUnavailable)

	// tchannel-go refusing the call itself is not a connection problem.
	_, _, _, err = c.beginElsewhere(ctx, ctx, newState(), spec, nil, gone, time.Now(), tchannel.ErrTimeout)
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, codes.Timeout, ce.Code)
}

// WithConnectConfig's settings reach the connectors: a connect to a peer
// that never answers the handshake ends at the configured Timeout, not the
// default 5 s, and the peer waits out the configured backoff. A config the
// pool refuses fails New with the option's name.
func TestWithConnectConfig(t *testing.T) {
	_, err := New("client", WithConnectConfig(peer.ConnectConfig{Timeout: -time.Second}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "WithConnectConfig")
	assert.Contains(t, err.Error(), "Timeout is -1s")

	hole := testnet.BlackHole(t)
	c, err := New("client", WithConnectConfig(peer.ConnectConfig{
		Timeout: 100 * time.Millisecond,
		Backoff: backoff.Exponential{Initial: time.Hour, Max: time.Hour, Multiplier: 1, Jitter: backoff.ProportionalJitter},
	}))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	start := time.Now()
	require.NoError(t, c.AddPeer("kv", hole.Addr()))
	waitPeerState(t, c, hole.Addr(), peer.TransientFailure)
	// Generous against the 100 ms asked for: the default would take 5 s.
	assert.Less(t, time.Since(start), peer.DefaultConnectTimeout/2, "the connect did not end at the configured Timeout")
	assert.EqualValues(t, 1, hole.Accepts())
	_, err = c.CallRaw(ctxTimeout(t), "kv", "echo", nil, nil)
	var ce *CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, codes.Unavailable, ce.Code, "the peer is backing off for an hour: %v", err)
	assert.EqualValues(t, 1, hole.Accepts(), "a second connect within the hour's backoff")
}
