package peerlist

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/backoff"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/pool"
	"github.com/sluice-rpc/sluice/internal/recorder"
	"github.com/sluice-rpc/sluice/internal/tchconn"
	"github.com/sluice-rpc/sluice/internal/testkit/testnet"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/peer"
	"github.com/uber-go/tally/v4"
	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/raw"
)

// fixture is a client tchannel.Channel whose connections a Pool makes
// (through a tchconn.Guard, as a Channel's),
// with one List of service "kv" on it. Its clock is fake: backoffs pass only
// when the test moves it; connect timeouts and health checks run on the
// wall clock, as tchannel-go's own do.
type fixture struct {
	t     *testing.T
	clk   *clock.Fake
	pool  *pool.Pool
	tch   *tchannel.Channel
	list  *List
	scope tally.TestScope
	dials atomic.Int64 // dials made for connectors
}

func newFixture(t *testing.T, cfg pool.ConnectConfig, opts tchannel.ChannelOptions) *fixture {
	t.Helper()
	return newFixtureConfig(t, pool.Config{Connect: cfg}, opts)
}

// newFixtureConfig is newFixture with the pool's whole Config (its Clock,
// Recorder and Rand are the fixture's).
func newFixtureConfig(t *testing.T, cfg pool.Config, opts tchannel.ChannelOptions) *fixture {
	t.Helper()
	f := &fixture{t: t, clk: clock.NewFake(time.Unix(1_700_000_000, 0)), scope: tally.NewTestScope("", nil)}
	rec := recorder.New(f.scope)
	cfg.Clock, cfg.Recorder = f.clk, rec
	cfg.Rand = func() float64 { return 0.5 } // no jitter: each backoff is its ceiling
	p, err := pool.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	next := opts.Dialer // the test's own, if it gives one
	if next == nil {
		var d net.Dialer
		next = d.DialContext
	}
	// Connections check their frames through a Guard, as a Channel's do.
	g, err := tchconn.New(tchconn.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	opts.Dialer = p.Dialer(func(ctx context.Context, network, hostPort string) (net.Conn, error) {
		f.dials.Add(1)
		nc, err := next(ctx, network, hostPort)
		if err != nil {
			return nil, err
		}
		return g.Client(nc), nil
	})
	tch, err := tchannel.NewChannel("client", &opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(tch); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(); tch.Close() })
	f.pool, f.tch = p, tch
	if f.list, err = New(Config{Service: "kv", Clock: f.clk, Recorder: rec, Pool: p}); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) add(hostPort string) *Peer {
	f.t.Helper()
	p, err := f.list.Add(hostPort)
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

// waitState waits, bounded, until p is in state want.
func (f *fixture) waitState(p *Peer, want peer.State) {
	f.t.Helper()
	timer := time.NewTimer(testwait.Limit)
	defer timer.Stop()
	for {
		changed := f.pool.Changed()
		if p.State() == want {
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			f.t.Fatalf("waited %v for %s to be %v; it is %v", testwait.Limit, p.HostPort(), want, p.State())
		}
	}
}

// call makes one raw call to p over its connection.
func call(t *testing.T, p *Peer) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := p.TChannel().BeginCall(ctx, "kv", "echo", &tchannel.CallOptions{Format: tchannel.Raw})
	if err != nil {
		return err
	}
	_, _, _, err = raw.WriteArgs(c, nil, []byte("hi"))
	return err
}

// startServer starts a plain tchannel-go server of "kv" on 127.0.0.1.
func startServer(t *testing.T, hostPort string) *tchannel.Channel {
	t.Helper()
	ch, err := tchannel.NewChannel("kv", nil)
	if err != nil {
		t.Fatal(err)
	}
	ch.Register(raw.Wrap(echo{}), "echo")
	if err := ch.ListenAndServe(hostPort); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.Close)
	return ch
}

type echo struct{}

func (echo) Handle(_ context.Context, args *raw.Args) (*raw.Res, error) {
	return &raw.Res{Arg3: args.Arg3}, nil
}
func (echo) OnError(context.Context, error) {}

func TestPeerConnectsWhenAdded(t *testing.T) {
	f := newFixture(t, pool.ConnectConfig{}, tchannel.ChannelOptions{})
	s := startServer(t, "127.0.0.1:0")
	p := f.add(s.PeerInfo().HostPort)
	f.waitState(p, peer.Ready)
	if got, err := f.list.Choose(nil); got != p || err != nil {
		t.Fatalf("Choose = %v, %v", got, err)
	}
	if err := call(t, p); err != nil {
		t.Fatal(err)
	}
	if n := f.dials.Load(); n != 1 {
		t.Fatalf("%d dials, want 1", n)
	}
	snap := f.scope.Snapshot()
	if v := snap.Counters()["peer.connects+peer="+p.HostPort()].Value(); v != 1 {
		t.Errorf("peer.connects = %d", v)
	}
	if v := snap.Gauges()["peer.state+peer="+p.HostPort()].Value(); v != float64(peer.Ready) {
		t.Errorf("peer.state = %v", v)
	}
}

// A refused peer is retried on gRPC's connection backoff schedule, measured
// from the start of each failed connect, and calls can neither hurry nor
// add connects: with no jitter, 1 s, then 1.6 s, then 2.56 s.
func TestRefusedPeerFollowsTheBackoffSchedule(t *testing.T) {
	f := newFixture(t, pool.ConnectConfig{}, tchannel.ChannelOptions{})
	p := f.add(testnet.Refused(t))
	f.list.Connect()
	f.waitState(p, peer.TransientFailure)
	for i, wait := range []time.Duration{time.Second, 1600 * time.Millisecond, 2560 * time.Millisecond} {
		for j := 0; j < 50; j++ { // calls meanwhile: fail at once, dial nothing
			if _, err := f.list.Choose(nil); err != peer.ErrUnavailable {
				t.Fatalf("Choose in transient failure: %v, want ErrUnavailable", err)
			}
			p.conn.Connect()
			p.Lost()
		}
		testwait.Timers(t, f.clk, 1)
		f.clk.Add(wait - time.Millisecond)
		testwait.Timers(t, f.clk, 1) // still waiting: the timer did not fire
		if f.dials.Load() != int64(i+1) || p.State() != peer.TransientFailure {
			t.Fatalf("before backoff %d (%v) ended: %d dials, state %v", i+1, wait, f.dials.Load(), p.State())
		}
		f.clk.Add(time.Millisecond)
		testwait.Until(t, "the next connect", func() bool { return f.dials.Load() == int64(i+2) })
		f.waitState(p, peer.TransientFailure)
	}
	if v := f.scope.Snapshot().Counters()["peer.connect_failures+peer="+p.HostPort()].Value(); v != 4 {
		t.Errorf("peer.connect_failures = %d, want 4", v)
	}
}

// A peer that accepts TCP and closes at once fails its handshake: it is in
// transient failure and is retried on the schedule, one accept per connect.
func TestAcceptThenCloseIsAFailedConnect(t *testing.T) {
	f := newFixture(t, pool.ConnectConfig{}, tchannel.ChannelOptions{})
	l := testnet.AcceptClose(t)
	p := f.add(l.Addr())
	f.list.Connect()
	f.waitState(p, peer.TransientFailure)
	testwait.Timers(t, f.clk, 1)
	if n := l.Accepts(); n != 1 {
		t.Fatalf("%d accepts, want 1", n)
	}
	f.clk.Add(time.Second)
	testwait.Until(t, "the second accept", func() bool { return l.Accepts() == 2 })
	f.waitState(p, peer.TransientFailure)
	testwait.Timers(t, f.clk, 1)
	if n := l.Accepts(); n != 2 {
		t.Fatalf("%d accepts, want 2", n)
	}
}

// A peer that accepts TCP and never answers the handshake stays Connecting
// until the connect timeout, then fails; meanwhile a call on it returns at
// once (it does not wait on the connect), and closing the pool ends the
// connect at once.
func TestBlackHolePeerTimesOutAndNeverHoldsACall(t *testing.T) {
	f := newFixture(t, pool.ConnectConfig{Timeout: 300 * time.Millisecond}, tchannel.ChannelOptions{})
	l := testnet.BlackHole(t)
	p := f.add(l.Addr())
	f.list.Connect()
	f.waitState(p, peer.Connecting)
	testwait.Until(t, "the black hole to accept", func() bool { return l.Accepts() == 1 })
	if _, err := f.list.Choose(nil); err != ErrConnecting {
		t.Fatalf("Choose while connecting: %v, want ErrConnecting", err)
	}
	// Calls never dial: one that finds no connection is refused at once.
	start := time.Now()
	if err := call(t, p); !errors.Is(err, pool.ErrNoConnection) {
		t.Fatalf("call while connecting: %v, want ErrNoConnection", err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("the call waited %v for the handshake", d)
	}
	f.waitState(p, peer.TransientFailure)

	g := newFixture(t, pool.ConnectConfig{Timeout: time.Hour}, tchannel.ChannelOptions{})
	q := g.add(l.Addr())
	g.list.Connect()
	g.waitState(q, peer.Connecting)
	testwait.Until(t, "the black hole to accept", func() bool { return l.Accepts() == 2 })
	done := make(chan struct{})
	go func() { g.pool.Close(); close(done) }()
	testwait.Recv(t, done, "Close to end an hour-long connect")
	if q.State() != peer.Shutdown {
		t.Fatalf("state after Close: %v", q.State())
	}
}

// A connection that ends after it served a while is reconnected at once
// (the peer restarted, say); one that ends soon after its handshake counts
// as a failed connect and waits out the backoff.
func TestClosedConnectionReconnectsOrBacksOff(t *testing.T) {
	f := newFixture(t, pool.ConnectConfig{}, tchannel.ChannelOptions{})
	s := startServer(t, "127.0.0.1:0")
	hp := s.PeerInfo().HostPort
	p := f.add(hp)
	f.list.Connect()
	f.waitState(p, peer.Ready)
	f.clk.Add(2 * time.Second) // it has served a while
	s.Close()
	f.waitState(p, peer.TransientFailure) // reconnected at once: refused
	if n := f.dials.Load(); n != 2 {
		t.Fatalf("%d dials, want 2: the first connect and one at once after the close", n)
	}
	if v := f.scope.Snapshot().Counters()["peer.connect_failures+peer="+hp].Value(); v != 1 {
		t.Fatalf("peer.connect_failures = %d, want 1 (the refused reconnect)", v)
	}
	// It comes back: chosen again once its backoff has passed.
	startServer(t, hp)
	testwait.Timers(t, f.clk, 1)
	f.clk.Add(time.Second)
	f.waitState(p, peer.Ready)
	if err := call(t, p); err != nil {
		t.Fatal(err)
	}

	// Dropped again within a second of its handshake: a failure, backoff.
	g := newFixture(t, pool.ConnectConfig{}, tchannel.ChannelOptions{})
	s2 := startServer(t, "127.0.0.1:0")
	q := g.add(s2.PeerInfo().HostPort)
	g.list.Connect()
	g.waitState(q, peer.Ready)
	s2.Close()
	g.waitState(q, peer.TransientFailure)
	testwait.Timers(t, g.clk, 1)
	if n := g.dials.Load(); n != 1 {
		t.Fatalf("%d dials, want 1: no reconnect before the backoff", n)
	}
}

// A health-check ping that reaches a tchannel-go server whose Close has
// begun is answered with a protocol error, on which tchannel-go closes the
// client's connection: the server ended it, so the peer reconnects (and,
// the server gone, goes into TransientFailure), not Idle as after a close
// of this process's own.
func TestPingAnsweredByAClosingServerIsARemoteClose(t *testing.T) {
	f := newFixture(t, pool.ConnectConfig{}, tchannel.ChannelOptions{})
	s, err := tchannel.NewChannel("kv", nil)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	s.Register(tchannel.HandlerFunc(func(ctx context.Context, call *tchannel.InboundCall) {
		<-release
		raw.WriteResponse(call.Response(), &raw.Res{})
	}), "block")
	if err := s.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	defer close(release)
	p := f.add(s.PeerInfo().HostPort)
	f.list.Connect()
	f.waitState(p, peer.Ready)
	// A call in flight holds the server's connection open in its close.
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testwait.Limit)
		defer cancel()
		_, _, _, _ = raw.Call(ctx, f.tch, s.PeerInfo().HostPort, "kv", "block", nil, nil)
	}()
	testwait.Until(t, "the call to reach the server", func() bool { return exchanges(s) == 1 })
	s.Close()
	testwait.Timers(t, f.clk, 1)
	f.clk.Add(pool.DefaultHealthCheck().Interval) // the ping
	f.waitState(p, peer.TransientFailure)
	if lf := p.LastFailure(); lf == nil || !strings.Contains(lf.Err.Error(), "refused") {
		t.Fatalf("the peer's failure: %v, want its reconnect refused", lf)
	}
}

// exchanges returns the inbound exchanges of s's connections.
func exchanges(s *tchannel.Channel) int {
	n := 0
	for _, p := range s.IntrospectState(&tchannel.IntrospectionOptions{IncludeExchanges: true}).RootPeers {
		for _, c := range p.InboundConnections {
			n += c.InboundExchange.Count
		}
	}
	return n
}

// tchannel-go's idle sweep closing a connection is not a failure: the peer
// goes Idle and reconnects when a call looks at it.
func TestIdleSweepIsNotAFailure(t *testing.T) {
	f := newFixture(t, pool.ConnectConfig{}, tchannel.ChannelOptions{IdleCheckInterval: 10 * time.Millisecond, MaxIdleTime: 50 * time.Millisecond})
	s := startServer(t, "127.0.0.1:0")
	p := f.add(s.PeerInfo().HostPort)
	f.list.Connect()
	f.waitState(p, peer.Ready)
	f.clk.Add(time.Minute) // served a while (on the fake clock) before the sweep
	f.waitState(p, peer.Idle)
	if v := f.scope.Snapshot().Counters()["peer.connect_failures+peer="+p.HostPort()].Value(); v != 0 {
		t.Fatalf("peer.connect_failures = %d after an idle close", v)
	}
	if _, err := f.list.Choose(nil); err != ErrConnecting {
		t.Fatalf("Choose on an idle peer: %v, want ErrConnecting", err)
	}
	f.waitState(p, peer.Ready)
}

// TestHealthChecksFindAFrozenPeer freezes the link to a ready peer: no FIN,
// no reset, nothing. The connector's pings go unanswered; after Failures of
// them it closes the connection and the peer goes into transient failure.
// While the link works, pings change nothing.
func TestHealthChecksFindAFrozenPeer(t *testing.T) {
	s := startServer(t, "127.0.0.1:0")
	link := startLink(t, s.PeerInfo().HostPort)
	hc := pool.HealthCheck{Interval: time.Second, Timeout: 50 * time.Millisecond, Failures: 2}
	f := newFixture(t, pool.ConnectConfig{HealthCheck: hc}, tchannel.ChannelOptions{})
	p := f.add(link.addr)
	f.waitState(p, peer.Ready)
	tick := func() { // one health check: the connector's timer fires
		testwait.Timers(t, f.clk, 1)
		f.clk.Add(hc.Interval)
	}
	for i := 0; i < 5; i++ {
		tick()
	}
	testwait.Timers(t, f.clk, 1) // the fifth ping is answered: waiting again
	if err := call(t, p); err != nil || p.State() != peer.Ready || f.dials.Load() != 1 {
		t.Fatalf("a healthy link: call %v, state %v, %d dials", err, p.State(), f.dials.Load())
	}
	link.freeze()
	tick() // unanswered: one miss
	tick() // two: closed
	f.waitState(p, peer.TransientFailure)
	if v := f.scope.Snapshot().Counters()["peer.connect_failures+peer="+link.addr].Value(); v != 1 {
		t.Fatalf("peer.connect_failures = %d, want 1", v)
	}
}

// link is a TCP relay to a server that can be frozen: it then passes
// nothing on and closes nothing.
type link struct {
	addr   string
	frozen atomic.Bool
	thaw   chan struct{}
}

func startLink(t *testing.T, upstream string) *link {
	t.Helper()
	nl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	k := &link{addr: nl.Addr().String(), thaw: make(chan struct{})}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		buf := make([]byte, 4096)
		for {
			n, err := src.Read(buf)
			if err != nil {
				return
			}
			if k.frozen.Load() {
				<-k.thaw // held until the test ends
				return
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := nl.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", upstream)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, u)
			mu.Unlock()
			wg.Add(2)
			go pipe(u, c)
			go pipe(c, u)
		}
	}()
	t.Cleanup(func() {
		nl.Close()
		close(k.thaw)
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return k
}

func (k *link) freeze() { k.frozen.Store(true) }

// Lost takes a Ready peer out of choice at once; the connector looks, finds
// the connection healthy, and makes it Ready again.
func TestLostIsCheckedByTheConnector(t *testing.T) {
	f := newFixture(t, pool.ConnectConfig{}, tchannel.ChannelOptions{})
	s := startServer(t, "127.0.0.1:0")
	p := f.add(s.PeerInfo().HostPort)
	f.list.Connect()
	f.waitState(p, peer.Ready)
	changed := f.pool.Changed()
	p.Lost()
	testwait.Recv(t, changed, "Lost to announce a change") // it left Ready
	f.waitState(p, peer.Ready)
	if n := f.dials.Load(); n != 1 {
		t.Fatalf("%d dials after a false alarm, want 1", n)
	}
}

// Removing a peer stops its connector and closes its connection (the
// server sees it go), and calls that chose the peer before cannot dial it:
// they find no connection.
func TestRemoveStopsTheConnectorAndClosesTheConnection(t *testing.T) {
	f := newFixture(t, pool.ConnectConfig{}, tchannel.ChannelOptions{})
	s := startServer(t, "127.0.0.1:0")
	hp := s.PeerInfo().HostPort
	p := f.add(hp)
	f.waitState(p, peer.Ready)
	if err := f.list.Remove(hp); err != nil {
		t.Fatal(err)
	}
	f.waitState(p, peer.Shutdown)
	testwait.Until(t, "the server to see the connection closed", func() bool {
		for _, peer := range s.IntrospectState(nil).RootPeers {
			if len(peer.InboundConnections) > 0 {
				return false
			}
		}
		return true
	})
	if err := call(t, p); !errors.Is(err, pool.ErrNoConnection) {
		t.Fatalf("a call on the removed peer: %v, want ErrNoConnection (no dial)", err)
	}
	if n := f.dials.Load(); n != 1 {
		t.Fatalf("%d dials, want 1", n)
	}
	n, _ := f.pool.Held()
	if n != 0 {
		t.Fatalf("%d connectors left in the pool", n)
	}
}

// Two lists holding one host:port share its connector; removing the peer
// from one leaves it running for the other, and removing it from the
// second stops it.
func TestListsShareAConnector(t *testing.T) {
	f := newFixture(t, pool.ConnectConfig{}, tchannel.ChannelOptions{})
	s := startServer(t, "127.0.0.1:0")
	hp := s.PeerInfo().HostPort
	p := f.add(hp)
	other, err := New(Config{Service: "other", Clock: f.clk, Pool: f.pool})
	if err != nil {
		t.Fatal(err)
	}
	q, err := other.Add(hp)
	if err != nil {
		t.Fatal(err)
	}
	if p.conn != q.conn {
		t.Fatal("two lists got two connectors for one host:port")
	}
	f.waitState(p, peer.Ready)
	if err := f.list.Remove(hp); err != nil {
		t.Fatal(err)
	}
	refs, held := f.pool.Refs(q.conn)
	if refs != 1 || !held || q.conn.Stopped() {
		t.Fatalf("after removing one of two: refs %d, held %v, stopped %v", refs, held, q.conn.Stopped())
	}
	if err := call(t, q); err != nil {
		t.Fatalf("the other list's peer: %v", err)
	}
	if err := other.Remove(hp); err != nil {
		t.Fatal(err)
	}
	f.waitState(q, peer.Shutdown)
}

// A connection that served, then failed, waits out the backoff's first
// step, not the step the failures before it had reached: the backoff
// starts afresh once a connection is ready, as gRPC's.
func TestBackoffStartsAfreshAfterAConnectionServed(t *testing.T) {
	f := newFixture(t, pool.ConnectConfig{}, tchannel.ChannelOptions{})
	addr := testnet.Refused(t)
	p := f.add(addr)
	f.waitState(p, peer.TransientFailure)
	testwait.Timers(t, f.clk, 1)
	f.clk.Add(time.Second) // second connect: refused too
	testwait.Until(t, "the second connect", func() bool { return f.dials.Load() == 2 })
	f.waitState(p, peer.TransientFailure)
	testwait.Timers(t, f.clk, 1)
	s := startServer(t, addr)
	f.clk.Add(1600 * time.Millisecond)
	f.waitState(p, peer.Ready)
	f.clk.Add(time.Hour) // it serves an hour
	s.Close()
	f.waitState(p, peer.TransientFailure) // EOF, then the reconnect is refused
	testwait.Timers(t, f.clk, 1)
	dials := f.dials.Load()
	f.clk.Add(time.Second - time.Millisecond)
	if f.dials.Load() != dials {
		t.Fatal("reconnected before the backoff's first step")
	}
	f.clk.Add(time.Millisecond)
	testwait.Until(t, "a reconnect one second on", func() bool { return f.dials.Load() == dials+1 })
}

// False alarms (Lost on a healthy connection, from many calls at once)
// never make the connector dial again.
func TestFalseAlarmsNeverRedial(t *testing.T) {
	f := newFixture(t, pool.ConnectConfig{}, tchannel.ChannelOptions{})
	s := startServer(t, "127.0.0.1:0")
	p := f.add(s.PeerInfo().HostPort)
	f.waitState(p, peer.Ready)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				p.Lost()
			}
		}()
	}
	wg.Wait()
	f.waitState(p, peer.Ready)
	if err := call(t, p); err != nil {
		t.Fatal(err)
	}
	if n := f.dials.Load(); n != 1 {
		t.Fatalf("%d dials after false alarms, want 1", n)
	}
}

// Get finds each peer of a long list (indexed by host:port) and none that
// left, through Set, Add and Remove.
func TestGetLongList(t *testing.T) {
	l, _ := newList(t, 100)
	var ms []peer.Member
	for i := range 100 {
		ms = append(ms, peer.Member{HostPort: hp(i)})
	}
	if err := l.Set(ms); err != nil {
		t.Fatal(err)
	}
	for i, p := range l.Peers() {
		if l.Get(hp(i)) != p {
			t.Fatalf("Get(%s) = %v, want %v", hp(i), l.Get(hp(i)), p)
		}
	}
	if err := l.Set(ms[50:]); err != nil {
		t.Fatal(err)
	}
	added, err := l.Add(hp(200))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Remove(hp(60)); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if p := l.Get(hp(i)); (p != nil) != (i >= 50 && i != 60) || p != nil && p.HostPort() != hp(i) {
			t.Errorf("Get(%s) = %v after the set changed", hp(i), p)
		}
	}
	if l.Get(hp(200)) != added || l.Get("127.0.0.1:1") != nil {
		t.Error("Get of an added peer, or of one never there, is wrong")
	}
}

// BenchmarkListGet looks up a peer of a list of 10,000: constant time, not
// the list's length (the channel looks up each failed peer after every
// change of a peer's state).
func BenchmarkListGet(b *testing.B) {
	l, _ := newList(b, 100)
	var ms []peer.Member
	for i := range 10000 {
		ms = append(ms, peer.Member{HostPort: fmt.Sprintf("127.0.%d.%d:4000", i/250, i%250+1)})
	}
	if err := l.Set(ms); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if l.Get(ms[i%len(ms)].HostPort) == nil {
			b.Fatal("not found")
		}
	}
}

// The feed of changes holds the peers whose state changed, or that joined
// or left, each once per take, and none that did nothing: a reader of a
// long list whose one peer flaps looks at that peer, not at the list.
func TestTakeChangedHoldsOnlyChanges(t *testing.T) {
	f := newFixture(t, pool.ConnectConfig{Backoff: backoff.Exponential{Initial: time.Hour, Max: time.Hour, Multiplier: 1,
		Jitter: backoff.ProportionalJitter}}, tchannel.ChannelOptions{})
	// The server that joins later listens first: a refused address is a
	// port just closed, which the system would hand out again.
	s := startServer(t, "127.0.0.1:0")
	extra := peer.Member{HostPort: s.PeerInfo().HostPort}
	var ms []peer.Member
	for range 40 {
		ms = append(ms, peer.Member{HostPort: testnet.Refused(t)})
	}
	ms = dedupe(ms)
	if err := f.list.Set(ms); err != nil {
		t.Fatal(err)
	}
	if got := f.list.TakeChanged(); len(got) != len(ms) {
		t.Fatalf("the first take returned %d peers, want the list's %d", len(got), len(ms))
	}
	for _, p := range f.list.Peers() {
		f.waitState(p, peer.TransientFailure) // then still: the backoff is an hour
	}
	f.list.TakeChanged() // the failures

	// A peer's state is published before it is put in the feed, so a
	// failure seen above may still land in the feed after this take: once
	// for each failed peer at most (its backoff is an hour), and only in
	// TransientFailure. Anything else in the feed is a change that was not.
	late := map[*Peer]bool{}
	only := func(round int, what string, got []*Peer, p *Peer) {
		t.Helper()
		found := false
		for _, q := range got {
			switch {
			case q == p:
				found = true
			case !late[q] && q.State() == peer.TransientFailure:
				late[q] = true // its failure, landing late
			default:
				t.Fatalf("round %d: %s; the feed held %v, want only it", round, what, hostPorts(got))
			}
		}
		if !found {
			t.Fatalf("round %d: %s; the feed held %v, without it", round, what, hostPorts(got))
		}
	}

	for i := range 3 {
		if err := f.list.Set(append(ms[:len(ms):len(ms)], extra)); err != nil {
			t.Fatal(err)
		}
		p := f.list.Get(extra.HostPort)
		f.waitState(p, peer.Ready)
		only(i, "a peer joined and became Ready", f.list.TakeChanged(), p)
		if err := f.list.Set(ms); err != nil {
			t.Fatal(err)
		}
		only(i, "a peer left", f.list.TakeChanged(), p)
		if f.list.Get(p.HostPort()) != nil {
			t.Fatalf("round %d: a peer left, yet Get still finds it", i)
		}
	}
	for _, q := range f.list.TakeChanged() {
		if late[q] || q.State() != peer.TransientFailure {
			t.Errorf("nothing changed, yet the feed held %s (%v)", q.HostPort(), q.State())
		}
	}
}

func dedupe(ms []peer.Member) []peer.Member {
	seen := map[string]bool{}
	out := ms[:0]
	for _, m := range ms {
		if !seen[m.HostPort] {
			seen[m.HostPort] = true
			out = append(out, m)
		}
	}
	return out
}

func hostPorts(ps []*Peer) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.HostPort())
	}
	return out
}

// A peer whose connection changes state is in the next take of the feed:
// its connector tells the peers holding it (pool.Watcher), not only the
// list's own joins and leaves.
func TestTakeChangedHoldsStateChanges(t *testing.T) {
	f := newFixture(t, pool.ConnectConfig{Backoff: backoff.Exponential{Initial: time.Hour, Max: time.Hour, Multiplier: 1,
		Jitter: backoff.ProportionalJitter}}, tchannel.ChannelOptions{})
	s := startServer(t, "127.0.0.1:0")
	p := f.add(s.PeerInfo().HostPort)
	f.waitState(p, peer.Ready)
	if got := f.list.TakeChanged(); len(got) != 1 || got[0] != p { // turns the feed on
		t.Fatalf("the first take returned %v, want the one peer", hostPorts(got))
	}
	s.Close()
	f.waitState(p, peer.TransientFailure) // and there it stays: the backoff is an hour
	if got := f.list.TakeChanged(); len(got) != 1 || got[0] != p {
		t.Fatalf("after its connection failed the feed held %v, want the peer", hostPorts(got))
	}
}
