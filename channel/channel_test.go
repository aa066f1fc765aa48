package channel

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/busy"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/peer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
)

func TestCallRawAndJSON(t *testing.T) {
	s := startServer(t)
	c, _, _ := startClient(t, s)
	ctx := ctxTimeout(t)

	res, err := c.CallRaw(ctx, "kv", "echo", []byte("h"), []byte("body"))
	require.NoError(t, err)
	assert.Equal(t, "h", string(res.Arg2))
	assert.Equal(t, "body", string(res.Arg3))
	assert.False(t, res.AppError)

	res, err = c.CallRaw(ctx, "kv", "echo", nil, []byte("app-error"))
	require.NoError(t, err, "an application error is a successful transport")
	assert.True(t, res.AppError)

	var out echoRes
	var rh map[string]string
	require.NoError(t, c.CallJSON(ctx, "kv", "get", &echoReq{Key: "k"}, &out,
		WithHeaders(map[string]string{"who": "me"}), ResponseHeaders(&rh)))
	assert.Equal(t, echoRes{Key: "k", Server: s.ch.HostPort()}, out)
	assert.Equal(t, "me", rh["seen"], "headers travel both ways")

	err = c.CallJSON(ctx, "kv", "get", &echoReq{}, &out)
	var ae *ApplicationError
	require.True(t, errors.As(err, &ae), "got %v", err)
	assert.Equal(t, "key is empty", ae.Message)
}

func TestBusyIsClassifiedFromTheCallNotItsText(t *testing.T) {
	s := startServer(t)
	s.busy.Store(true)
	c, _, scope := startClient(t, s)
	for _, call := range []func() error{
		func() error { _, err := c.CallRaw(ctxTimeout(t), "kv", "echo", nil, nil); return err },
		func() error { return c.CallJSON(ctxTimeout(t), "kv", "get", &echoReq{Key: "k"}, nil) },
	} {
		err := call()
		var ce *CallError
		require.True(t, errors.As(err, &ce), "got %T %v", err, err)
		assert.Equal(t, codes.Busy, ce.Code)
		assert.Equal(t, busyMessage, ce.Message)
		assert.Equal(t, 1, ce.Attempts)
		assert.Equal(t, s.ch.HostPort(), ce.Peer)
	}
	full := scope.Snapshot()
	snap := full.Counters()
	assert.EqualValues(t, 1, snap["calls+method=echo,service=kv"].Value())
	assert.EqualValues(t, 1, snap["attempts+method=echo,service=kv"].Value())
	assert.EqualValues(t, 2, snap["peer.sent+peer="+s.ch.HostPort()+",service=kv"].Value(), "both calls went to it")
	lat := full.Histograms()["call.latency+method=echo,service=kv"]
	require.NotNil(t, lat)
	var n int64
	for _, c := range lat.Durations() {
		n += c
	}
	assert.EqualValues(t, 1, n, "one call.latency sample")
	assert.EqualValues(t, 1, snap["call.errors+code=BUSY,method=echo,service=kv"].Value())
	assert.EqualValues(t, 1, snap["call.errors+code=BUSY,method=get,service=kv"].Value())
	assert.EqualValues(t, 2, snap["peer.busy+peer="+s.ch.HostPort()+",service=kv"].Value())

	// And an error whose text says busy but whose code does not is not Busy.
	s.busy.Store(false)
	_, err := c.CallRaw(ctxTimeout(t), "kv", "echo", nil, []byte("unexpected"))
	var ce *CallError
	require.True(t, errors.As(err, &ce), "got %T %v", err, err)
	assert.Equal(t, codes.Unexpected, ce.Code, "classified by its text")
}

// One of three servers answers Busy: its limit collapses, the client's
// traffic moves to the other two, and the limit recovers once it stops.
func TestBusyPeerTrafficMovesAwayAndRecovers(t *testing.T) {
	a, b, bad := startServer(t), startServer(t), startServer(t)
	c, clk, scope := startClient(t, a, b, bad)
	badPeer := bad.ch.HostPort()
	send := func(n int) (ok, busyErrs int) {
		for i := 0; i < n; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second) // per call: ~1,200 calls follow
			_, err := c.CallRaw(ctx, "kv", "echo", nil, []byte("x"))
			cancel()
			var ce *CallError
			switch {
			case err == nil:
				ok++
			case errors.As(err, &ce) && ce.Code == codes.Busy:
				busyErrs++
			default:
				t.Fatalf("call %d: %v", i, err)
			}
		}
		return ok, busyErrs
	}
	limit := func() float64 {
		for _, p := range c.Peers("kv") {
			if p.HostPort == badPeer {
				return p.Limit
			}
		}
		t.Fatal("bad peer missing")
		return 0
	}

	// sendUntil calls until the bad peer has had n more requests, and fails
	// after max calls: which peer a call takes depends on latencies measured
	// in real time, so the test counts what reached the bad peer rather than
	// how many calls it took.
	sendUntil := func(n, max int) {
		t.Helper()
		target := bad.received.Load() + int64(n)
		for i := 0; bad.received.Load() < target; i++ {
			require.Less(t, i, max, "the bad peer took fewer than %d of %d calls", n, max)
			send(1)
		}
	}
	halvings := busy.DefaultMaxHalvings

	bad.busy.Store(true)
	sendUntil(halvings, 1000) // second 1: no limit yet, the bad peer gets its share
	clk.Add(time.Second)
	assert.Equal(t, 38, int(limit()), "9999999*4/2^20 after a busy window") // the design's number
	sendUntil(halvings, 1000)                                               // second 2: up to 38 may reach it
	clk.Add(time.Second)
	require.Less(t, limit(), 1.0, "limit after two busy windows")

	before := bad.received.Load()
	aBefore, bBefore := a.received.Load(), b.received.Load()
	okCalls, busy3 := send(200) // second 3: all traffic on the two good peers
	assert.Equal(t, 200, okCalls)
	assert.Zero(t, busy3)
	assert.Equal(t, before, bad.received.Load(), "a request reached the throttled peer")
	assert.Equal(t, int64(200), a.received.Load()-aBefore+b.received.Load()-bBefore)

	// It stops answering Busy; the limit grows x4 per second back to the
	// ceiling (about 19 quiet seconds from ~1.5e-4) and it gets traffic again.
	bad.busy.Store(false)
	prev := limit()
	for sec := 0; sec < 20 && limit() < busy.DefaultCeiling; sec++ {
		send(30)
		clk.Add(time.Second)
		require.Greater(t, limit(), prev, "limit did not grow in a quiet second")
		prev = limit()
	}
	assert.EqualValues(t, busy.DefaultCeiling, limit())
	sendUntil(10, 1000) // the recovered peer gets its share again

	g := scope.Snapshot().Gauges()["peer.limit+peer="+badPeer+",service=kv"]
	require.NotNil(t, g)
	assert.EqualValues(t, busy.DefaultCeiling, g.Value())
}

// With every peer answering Busy the limits collapse and calls fail locally
// with ErrThrottled: the servers see nothing while throttled.
func TestEveryPeerBusyFailsThrottledAndSendsNothing(t *testing.T) {
	servers := []*testServer{startServer(t), startServer(t), startServer(t)}
	c, clk, scope := startClient(t, servers...)
	for _, s := range servers {
		s.busy.Store(true)
	}
	// Calls spread at random over the three peers. Second 1: 150 calls give
	// every peer the 20 busy answers that take its limit from the ceiling
	// to 38 (50 expected each; fewer than 20 has odds below 1e-6). Second
	// 2: 100 calls fit in the 3 x 38 the peers allow, and give each the 8
	// busy answers that take 38 below 1. (With 60 calls a second, as this
	// test once made, a peer now and then got too few to fall below 1.)
	for sec, calls := range []int{150, 100} {
		for i := 0; i < calls; i++ {
			_, err := c.CallRaw(ctxTimeout(t), "kv", "echo", nil, nil)
			require.Error(t, err)
			assert.False(t, errors.Is(err, ErrThrottled), "throttled too early in second %d", sec+1)
		}
		clk.Add(time.Second)
	}
	received := func() (n int64) {
		for _, s := range servers {
			n += s.received.Load()
		}
		return n
	}
	before := received()
	for i := 0; i < 100; i++ {
		_, err := c.CallRaw(ctxTimeout(t), "kv", "echo", nil, nil)
		require.ErrorIs(t, err, ErrThrottled)
		var ce *CallError
		require.ErrorAs(t, err, &ce)
		assert.Zero(t, ce.Attempts)
	}
	assert.Equal(t, before, received(), "requests reached the servers while throttled")
	snap := scope.Snapshot().Counters()
	assert.EqualValues(t, 100, snap["call.errors+code=THROTTLED,method=echo,service=kv"].Value())
	for _, s := range servers {
		assert.GreaterOrEqual(t, snap["peer.throttled+peer="+s.ch.HostPort()+",service=kv"].Value(), int64(100))
	}
}

// TestBusyThrottlingDisabled: WithBusyConfig(busy.Config{Disabled: true}),
// every other field left zero (the defaults), makes a Channel whose calls
// all reach a server that answers every one Busy: windows of busy answers
// that would take an enabled limit from the ceiling to 38 and then below 1
// (as in the test above) leave it at the ceiling.
func TestBusyThrottlingDisabled(t *testing.T) {
	s := startServer(t)
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	c, err := New("client", WithClock(clk), WithBusyConfig(busy.Config{Disabled: true}))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	require.NoError(t, c.AddPeer("kv", s.ch.HostPort()))
	s.busy.Store(true)
	const windows, perWindow = 3, 50
	for w := 0; w < windows; w++ {
		for i := 0; i < perWindow; i++ {
			_, err := c.CallRaw(ctxTimeout(t), "kv", "echo", nil, nil)
			var ce *CallError
			require.ErrorAs(t, err, &ce, "window %d, call %d", w, i)
			require.Equal(t, codes.Busy, ce.Code, "window %d, call %d: %v", w, i, err)
		}
		clk.Add(time.Second)
	}
	assert.EqualValues(t, windows*perWindow, s.received.Load(), "calls that reached the server")
	peers := c.Peers("kv")
	require.Len(t, peers, 1)
	assert.EqualValues(t, busy.DefaultCeiling, peers[0].Limit, "the disabled limiter's limit")
	s.busy.Store(false)
	_, err = c.CallRaw(ctxTimeout(t), "kv", "echo", nil, nil)
	require.NoError(t, err)
}

func TestTimeoutAndUnreachablePeer(t *testing.T) {
	s := startServer(t)
	c, _, _ := startClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := c.CallRaw(ctx, "kv", "echo", nil, []byte("block"))
	var ce *CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, codes.Timeout, ce.Code)

	// A peer nobody listens on: its connect is refused, so it is in
	// transient failure and the call fails at once with UNAVAILABLE,
	// long before its deadline, having sent nothing.
	dead := startServer(t)
	deadAddr := dead.ch.HostPort()
	dead.ch.Close()
	scope := tally.NewTestScope("", nil)
	c2, err := New("client", WithScope(scope))
	require.NoError(t, err)
	defer c2.Close()
	require.NoError(t, c2.AddPeer("kv", deadAddr))
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	start := time.Now()
	_, err = c2.CallRaw(ctx2, "kv", "echo", nil, nil)
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, codes.Unavailable, ce.Code, "got %v", err)
	assert.ErrorIs(t, err, ErrUnavailable)
	assert.Zero(t, ce.Attempts, "nothing was sent")
	assert.Less(t, time.Since(start), 2*time.Second, "the call waited for its deadline")
	assert.Equal(t, "UNAVAILABLE", ce.CodeName())
	snap := scope.Snapshot()
	assert.EqualValues(t, 1, snap.Counters()["call.errors+code=UNAVAILABLE,method=_other,service=kv"].Value())
	assert.EqualValues(t, 1, snap.Counters()["peer.connect_failures+peer="+deadAddr].Value())
	assert.EqualValues(t, float64(peer.TransientFailure), snap.Gauges()["peer.state+peer="+deadAddr].Value())
	assert.Equal(t, peer.TransientFailure, c2.Peers("kv")[0].State)
}

func TestNoPeersAndClosed(t *testing.T) {
	c, _, _ := startClient(t)
	_, err := c.CallRaw(ctxTimeout(t), "kv", "echo", nil, nil)
	assert.ErrorIs(t, err, ErrNoPeers)
	c.Close()
	_, err = c.CallRaw(ctxTimeout(t), "kv", "echo", nil, nil)
	assert.ErrorIs(t, err, ErrClosed)
	assert.ErrorIs(t, c.AddPeer("kv", "127.0.0.1:4000"), ErrClosed)
}

func TestSheddingAnswersBusyBeforeTheHandler(t *testing.T) {
	s := startServer(t, WithShedding(ShedConfig{MaxRPS: 0.001, Burst: 1}))
	c, _, _ := startClient(t, s)
	_, err := c.CallRaw(ctxTimeout(t), "kv", "echo", nil, nil)
	require.NoError(t, err)
	_, err = c.CallRaw(ctxTimeout(t), "kv", "echo", nil, nil)
	var ce *CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, codes.Busy, ce.Code)
	assert.Contains(t, ce.Message, "server overloaded")
	assert.EqualValues(t, 1, s.received.Load(), "the shed request reached the handler")
}

func TestInvalidOptionsNameTheOption(t *testing.T) {
	tests := []struct {
		name string
		svc  string
		opts []Option
		want string
	}{
		{"empty service", "", nil, "service name is empty"},
		{"max halvings", "c", []Option{WithBusyConfig(busy.Config{MaxHalvings: 256})}, "channel: WithBusyConfig: busy: MaxHalvings is 256"},
		{"negative rate", "c", []Option{WithBusyConfig(busy.Config{RecoverRate: -3})}, "channel: WithBusyConfig: busy: RecoverRate is -3"},
		{"busy clock", "c", []Option{WithBusyConfig(busy.Config{Clock: clock.Real})}, "channel: WithBusyConfig: Clock is set, must be nil"},
		{"timeout", "c", []Option{WithDefaultTimeout(-time.Second)}, "WithDefaultTimeout is -1s"},
		{"nil clock", "c", []Option{WithClock(nil)}, "WithClock is nil"},
		{"shed negative", "c", []Option{WithShedding(ShedConfig{MaxRPS: -1})}, "MaxRPS is -1"},
		{"shed empty", "c", []Option{WithShedding(ShedConfig{})}, "sets no limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.svc, tt.opts...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	c, err := New("c")
	require.NoError(t, err)
	defer c.Close()
	for _, hp := range []string{"nohost", "127.0.0.1:0", "127.0.0.1:70000", ":80"} {
		err := c.AddPeer("kv", hp)
		require.Error(t, err, hp)
		assert.True(t, strings.Contains(err.Error(), hp), "error %q does not name %q", err, hp)
	}
	assert.ErrorContains(t, c.AddPeer("", "127.0.0.1:1"), "service name is empty")
	assert.ErrorContains(t, c.ListenAndServe("127.0.0.1"), "bad listen address")
	assert.ErrorContains(t, c.RemovePeer("kv", "127.0.0.1:1"), "has no peers")
}
