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
	"github.com/uber-go/tally/v4"
)

func TestCallRawAndJSON(t *testing.T) {
	s := startServer(t)
	c, _, _ := startClient(t, s)
	ctx := ctxTimeout(t)

	res, err := to(c, "kv").CallRaw(ctx, "echo", []byte("h"), []byte("body"))
	if err != nil {
		t.Fatalf("CallRaw: %v", err)
	}
	if string(res.Arg2) != "h" {
		t.Errorf("string(res.Arg2) = %q, want %q", string(res.Arg2), "h")
	}
	if string(res.Arg3) != "body" {
		t.Errorf("string(res.Arg3) = %q, want %q", string(res.Arg3), "body")
	}
	if res.AppError {
		t.Error("res.AppError = true, want false")
	}

	res, err = to(c, "kv").CallRaw(ctx, "echo", nil, []byte("app-error"))
	if err != nil {
		t.Fatalf("an application error is a successful transport: %v", err)
	}
	if !res.AppError {
		t.Error("res.AppError = false, want true")
	}

	var out echoRes
	var rh map[string]string
	if err := to(c, "kv").CallJSON(ctx, "get", &echoReq{Key: "k"}, &out,
		WithHeaders(map[string]string{"who": "me"}), ResponseHeaders(&rh)); err != nil {
		t.Fatalf("CallJSON: %v", err)
	}
	if want := (echoRes{Key: "k", Server: s.ch.HostPort()}); out != want {
		t.Errorf("out = %+v, want %+v", out, want)
	}
	if rh["seen"] != "me" {
		t.Errorf("headers travel both ways: got %q, want %q", rh["seen"], "me")
	}

	err = to(c, "kv").CallJSON(ctx, "get", &echoReq{}, &out)
	var ae *ApplicationError
	if !errors.As(err, &ae) {
		t.Fatalf("got %v: errors.As(err, &ae) = false, want true", err)
	}
	if ae.Message != "key is empty" {
		t.Errorf("ae.Message = %q, want %q", ae.Message, "key is empty")
	}
}

func TestBusyIsClassifiedFromTheCallNotItsText(t *testing.T) {
	s := startServer(t)
	s.busy.Store(true)
	c, _, scope := startClient(t, s)
	for _, call := range []func() error{
		func() error { _, err := to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil); return err },
		func() error { return to(c, "kv").CallJSON(ctxTimeout(t), "get", &echoReq{Key: "k"}, nil) },
	} {
		err := call()
		var ce *CallError
		if !errors.As(err, &ce) {
			t.Fatalf("got %T %v: errors.As(err, &ce) = false, want true", err, err)
		}
		if ce.Code != codes.Busy {
			t.Errorf("ce.Code = %v, want %v", ce.Code, codes.Busy)
		}
		if ce.Message != busyMessage {
			t.Errorf("ce.Message = %q, want %q", ce.Message, busyMessage)
		}
		if ce.Attempts != 1 {
			t.Errorf("ce.Attempts = %v, want %v", ce.Attempts, 1)
		}
		if want := s.ch.HostPort(); ce.Peer != want {
			t.Errorf("ce.Peer = %q, want %q", ce.Peer, want)
		}
	}
	full := scope.Snapshot()
	snap := full.Counters()
	if got := snap["calls+method=echo,service=kv"].Value(); got != 1 {
		t.Errorf("got %v, want %v", got, 1)
	}
	if got := snap["attempts+method=echo,service=kv"].Value(); got != 1 {
		t.Errorf("got %v, want %v", got, 1)
	}
	if got := snap["peer.sent+peer="+s.ch.HostPort()+",service=kv"].Value(); got != 2 {
		t.Errorf("both calls went to it: got %v, want %v", got, 2)
	}
	lat := full.Histograms()["call.latency+method=echo,service=kv"]
	if lat == nil {
		t.Fatal("no call.latency histogram for kv::echo")
	}
	var n int64
	for _, c := range lat.Durations() {
		n += c
	}
	if n != 1 {
		t.Errorf("one call.latency sample: got %v, want %v", n, 1)
	}
	if got := snap["call.errors+code=BUSY,method=echo,service=kv"].Value(); got != 1 {
		t.Errorf("got %v, want %v", got, 1)
	}
	if got := snap["call.errors+code=BUSY,method=get,service=kv"].Value(); got != 1 {
		t.Errorf("got %v, want %v", got, 1)
	}
	if got := snap["peer.busy+peer="+s.ch.HostPort()+",service=kv"].Value(); got != 2 {
		t.Errorf("got %v, want %v", got, 2)
	}

	// And an error whose text says busy but whose code does not is not Busy.
	s.busy.Store(false)
	_, err := to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, []byte("unexpected"))
	var ce *CallError
	if !errors.As(err, &ce) {
		t.Fatalf("got %T %v: errors.As(err, &ce) = false, want true", err, err)
	}
	if ce.Code != codes.Unexpected {
		t.Errorf("classified by its text: got %v, want %v", ce.Code, codes.Unexpected)
	}
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
			_, err := to(c, "kv").CallRaw(ctx, "echo", nil, []byte("x"))
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
		for _, p := range to(c, "kv").Peers() {
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
			if i >= max {
				t.Fatalf("the bad peer took fewer than %d of %d calls: got %v, want < %v", n, max, i, max)
			}
			send(1)
		}
	}
	halvings := busy.DefaultMaxHalvings

	bad.busy.Store(true)
	sendUntil(halvings, 1000) // second 1: no limit yet, the bad peer gets its share
	clk.Add(time.Second)
	if got := int(limit()); got != 38 {
		t.Errorf("9999999*4/2^20 after a busy window: got %v, want %v", got, 38)
	} // the design's number
	sendUntil(halvings, 1000) // second 2: up to 38 may reach it
	clk.Add(time.Second)
	if got := limit(); !(got < 1.0) {
		t.Fatalf("limit after two busy windows: got %v, want < %v", got, 1.0)
	}

	before := bad.received.Load()
	aBefore, bBefore := a.received.Load(), b.received.Load()
	okCalls, busy3 := send(200) // second 3: all traffic on the two good peers
	if okCalls != 200 {
		t.Errorf("okCalls = %v, want %v", okCalls, 200)
	}
	if busy3 != 0 {
		t.Errorf("busy3 = %v, want 0", busy3)
	}
	if got := bad.received.Load(); got != before {
		t.Errorf("a request reached the throttled peer: got %v, want %v", got, before)
	}
	if got := a.received.Load() - aBefore + b.received.Load() - bBefore; got != int64(200) {
		t.Errorf("got %v, want %v", got, int64(200))
	}

	// It stops answering Busy; the limit grows x4 per second back to the
	// ceiling (about 19 quiet seconds from ~1.5e-4) and it gets traffic again.
	bad.busy.Store(false)
	prev := limit()
	for sec := 0; sec < 20 && limit() < busy.DefaultCeiling; sec++ {
		send(30)
		clk.Add(time.Second)
		if got := limit(); !(got > prev) {
			t.Fatalf("limit did not grow in a quiet second: got %v, want > %v", got, prev)
		}
		prev = limit()
	}
	if got := limit(); got != busy.DefaultCeiling {
		t.Errorf("limit() = %v, want %v", got, busy.DefaultCeiling)
	}
	sendUntil(10, 1000) // the recovered peer gets its share again

	g := scope.Snapshot().Gauges()["peer.limit+peer="+badPeer+",service=kv"]
	if g == nil {
		t.Fatal("no peer.limit gauge for the bad peer")
	}
	if got := g.Value(); got != busy.DefaultCeiling {
		t.Errorf("g.Value() = %v, want %v", got, busy.DefaultCeiling)
	}
}

// With every peer answering Busy the limits collapse and calls fail locally
// with ErrThrottled: the servers see nothing while throttled.
func TestEveryPeerBusyFailsThrottledAndSendsNothing(t *testing.T) {
	servers := []*testServer{startServer(t), startServer(t), startServer(t)}
	c, clk, scope := startClient(t, servers...)
	for _, s := range servers {
		s.busy.Store(true)
	}
	waitAllReady(t, c, servers) // a peer still connecting would miss its busy answers
	// Calls spread at random over the three peers. Second 1: 150 calls give
	// every peer the 20 busy answers that take its limit from the ceiling
	// to 38 (50 expected each; fewer than 20 has odds below 1e-6). Second
	// 2: 100 calls fit in the 3 x 38 the peers allow, and give each the 8
	// busy answers that take 38 below 1. (With 60 calls a second, as this
	// test once made, a peer now and then got too few to fall below 1.)
	for sec, calls := range []int{150, 100} {
		for i := 0; i < calls; i++ {
			_, err := to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil)
			if err == nil {
				t.Fatal("CallRaw succeeded, want an error")
			}
			if errors.Is(err, ErrThrottled) {
				t.Errorf("throttled too early in second %d: errors.Is(err, ErrThrottled) = true, want false", sec+1)
			}
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
		_, err := to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil)
		if !errors.Is(err, ErrThrottled) {
			t.Fatalf("CallRaw error = %v, want %v", err, ErrThrottled)
		}
		var ce *CallError
		if !errors.As(err, &ce) {
			t.Fatalf("CallRaw error = %v, want a %T", err, ce)
		}
		if ce.Attempts != 0 {
			t.Errorf("ce.Attempts = %v, want 0", ce.Attempts)
		}
	}
	if got := received(); got != before {
		t.Errorf("requests reached the servers while throttled: got %v, want %v", got, before)
	}
	snap := scope.Snapshot().Counters()
	if got := snap["call.errors+code=THROTTLED,method=echo,service=kv"].Value(); got != 100 {
		t.Errorf("got %v, want %v", got, 100)
	}
	for _, s := range servers {
		if got := snap["peer.throttled+peer="+s.ch.HostPort()+",service=kv"].Value(); got < int64(100) {
			t.Errorf("got %v, want >= %v", got, int64(100))
		}
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
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	if err := to(c, "kv").AddPeer(s.ch.HostPort()); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}
	s.busy.Store(true)
	const windows, perWindow = 3, 50
	for w := 0; w < windows; w++ {
		for i := 0; i < perWindow; i++ {
			_, err := to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil)
			var ce *CallError
			if !errors.As(err, &ce) {
				t.Fatalf("window %d, call %d: got %v, want a %T", w, i, err, ce)
			}
			if ce.Code != codes.Busy {
				t.Fatalf("window %d, call %d: %v: got %v, want %v", w, i, err, ce.Code, codes.Busy)
			}
		}
		clk.Add(time.Second)
	}
	if got := s.received.Load(); got != windows*perWindow {
		t.Errorf("calls that reached the server: got %v, want %v", got, windows*perWindow)
	}
	peers := to(c, "kv").Peers()
	if len(peers) != 1 {
		t.Fatalf("len(peers) = %d, want %d", len(peers), 1)
	}
	if peers[0].Limit != busy.DefaultCeiling {
		t.Errorf("the disabled limiter's limit: got %v, want %v", peers[0].Limit, busy.DefaultCeiling)
	}
	s.busy.Store(false)
	_, err = to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil)
	if err != nil {
		t.Fatalf("CallRaw: %v", err)
	}
}

func TestTimeoutAndUnreachablePeer(t *testing.T) {
	s := startServer(t)
	c, _, _ := startClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := to(c, "kv").CallRaw(ctx, "echo", nil, []byte("block"))
	var ce *CallError
	if !errors.As(err, &ce) {
		t.Fatalf("CallRaw error = %v, want a %T", err, ce)
	}
	if ce.Code != codes.Timeout {
		t.Errorf("ce.Code = %v, want %v", ce.Code, codes.Timeout)
	}

	// A peer nobody listens on: its connect is refused, so it is in
	// transient failure and the call fails at once with UNAVAILABLE,
	// long before its deadline, having sent nothing.
	dead := startServer(t)
	deadAddr := dead.ch.HostPort()
	dead.ch.Close()
	scope := tally.NewTestScope("", nil)
	c2, err := New("client", WithScope(scope))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer c2.Close()
	if err := to(c2, "kv").AddPeer(deadAddr); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	start := time.Now()
	_, err = to(c2, "kv").CallRaw(ctx2, "echo", nil, nil)
	if !errors.As(err, &ce) {
		t.Fatalf("CallRaw error = %v, want a %T", err, ce)
	}
	if ce.Code != codes.Unavailable {
		t.Errorf("got %v: got %v, want %v", err, ce.Code, codes.Unavailable)
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("CallRaw error = %v, want %v", err, ErrUnavailable)
	}
	if ce.Attempts != 0 {
		t.Errorf("nothing was sent: got %v, want 0", ce.Attempts)
	}
	if got := time.Since(start); got >= 2*time.Second {
		t.Errorf("the call waited for its deadline: got %v, want < %v", got, 2*time.Second)
	}
	if got := ce.CodeName(); got != "UNAVAILABLE" {
		t.Errorf("ce.CodeName() = %q, want %q", got, "UNAVAILABLE")
	}
	snap := scope.Snapshot()
	if got := snap.Counters()["call.errors+code=UNAVAILABLE,method=echo,service=kv"].Value(); got != 1 {
		t.Errorf("got %v, want %v", got, 1)
	}
	if got := snap.Counters()["peer.connect_failures+peer="+deadAddr].Value(); got != 1 {
		t.Errorf("got %v, want %v", got, 1)
	}
	if got := snap.Gauges()["peer.state+peer="+deadAddr].Value(); got != float64(peer.TransientFailure) {
		t.Errorf("got %v, want %v", got, float64(peer.TransientFailure))
	}
	if got := to(c2, "kv").Peers()[0].State; got != peer.TransientFailure {
		t.Errorf(`c2.Peers("kv")[0].State = %v, want %v`, got, peer.TransientFailure)
	}
}

func TestNoPeersAndClosed(t *testing.T) {
	c, _, _ := startClient(t)
	_, err := to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil)
	if !errors.Is(err, ErrNoPeers) {
		t.Errorf("CallRaw error = %v, want %v", err, ErrNoPeers)
	}
	c.Close()
	_, err = to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil)
	if !errors.Is(err, ErrClosed) {
		t.Errorf("CallRaw error = %v, want %v", err, ErrClosed)
	}
	if err := to(c, "kv").AddPeer("127.0.0.1:4000"); !errors.Is(err, ErrClosed) {
		t.Errorf("AddPeer error = %v, want %v", err, ErrClosed)
	}
}

func TestSheddingAnswersBusyBeforeTheHandler(t *testing.T) {
	s := startServer(t, WithShedding(ShedConfig{MaxRPS: 0.001, Burst: 1}))
	c, _, _ := startClient(t, s)
	_, err := to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil)
	if err != nil {
		t.Fatalf("CallRaw: %v", err)
	}
	_, err = to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil)
	var ce *CallError
	if !errors.As(err, &ce) {
		t.Fatalf("CallRaw error = %v, want a %T", err, ce)
	}
	if ce.Code != codes.Busy {
		t.Errorf("ce.Code = %v, want %v", ce.Code, codes.Busy)
	}
	if !strings.Contains(ce.Message, "server overloaded") {
		t.Errorf("ce.Message = %q, want it to contain %q", ce.Message, "server overloaded")
	}
	if got := s.received.Load(); got != 1 {
		t.Errorf("the shed request reached the handler: got %v, want %v", got, 1)
	}
}

func TestInvalidOptionsNameTheOption(t *testing.T) {
	tests := []struct {
		name string
		svc  string
		opts []Option
		want string
	}{
		{"empty service", "", nil, "service name is empty"},
		{"max halvings", "c", []Option{WithBusyConfig(busy.Config{MaxHalvings: 256})}, "channel: WithBusyConfig: busy: Config.MaxHalvings is 256"},
		{"negative rate", "c", []Option{WithBusyConfig(busy.Config{RecoverRate: -3})}, "channel: WithBusyConfig: busy: Config.RecoverRate is -3"},
		{"busy clock", "c", []Option{WithBusyConfig(busy.Config{Clock: clock.NewFake(time.Unix(0, 0))})}, "channel: WithBusyConfig: Clock must be nil or the Channel's clock"},
		{"timeout", "c", []Option{WithDefaultTimeout(-time.Second)}, "WithDefaultTimeout is -1s"},
		{"nil clock", "c", []Option{WithClock(nil)}, "WithClock is nil"},
		{"shed negative", "c", []Option{WithShedding(ShedConfig{MaxRPS: -1})}, "MaxRPS is -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.svc, tt.opts...)
			if err == nil {
				t.Fatal("New succeeded, want an error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err.Error() = %q, want it to contain %q", err.Error(), tt.want)
			}
		})
	}
	c, err := New("c")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer c.Close()
	for _, hp := range []string{"nohost", "127.0.0.1:0", "127.0.0.1:70000", ":80"} {
		err := to(c, "kv").AddPeer(hp)
		if err == nil {
			t.Fatalf("%s: AddPeer succeeded, want an error", hp)
		}
		if !strings.Contains(err.Error(), hp) {
			t.Errorf("error %q does not name %q: strings.Contains(err.Error(), hp) = false, want true", err, hp)
		}
	}
	if _, err := c.NewClient(""); err == nil || !strings.Contains(err.Error(), "service name is empty") {
		t.Errorf("NewClient error = %v, want an error containing %q", err, "service name is empty")
	}
	if err := c.ListenAndServe("127.0.0.1"); err == nil || !strings.Contains(err.Error(), "bad listen address") {
		t.Errorf("ListenAndServe error = %v, want an error containing %q", err, "bad listen address")
	}
	if err := to(c, "kv").RemovePeer("127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "127.0.0.1:1 is not a peer") {
		t.Errorf("RemovePeer error = %v, want an error containing %q", err, "127.0.0.1:1 is not a peer")
	}
}
