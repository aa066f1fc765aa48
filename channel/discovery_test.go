package channel

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
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/discovery"
	"github.com/sluice-rpc/sluice/internal/decline"
	"github.com/sluice-rpc/sluice/internal/testkit/testload"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/peer"
	"github.com/uber-go/tally/v4"
	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/raw"
)

// memRegistry is a registry in memory, both a Registrar and a Resolver:
// what servers register, resolvers report at once, as a watched registry
// (etcd) does. fail makes its resolvers report an error instead.
type memRegistry struct {
	mu       sync.Mutex
	addrs    []string
	changed  chan struct{} // closed and replaced at each change
	failWith error
	asked    atomic.Int64 // ResolveNow requests its resolvers took
}

func newMemRegistry(hostPorts ...string) *memRegistry {
	return &memRegistry{addrs: hostPorts, changed: make(chan struct{})}
}

func (m *memRegistry) String() string { return "mem:test" }

func (m *memRegistry) set(f func([]string) []string, fail error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.addrs = f(m.addrs)
	m.failWith = fail
	close(m.changed)
	m.changed = make(chan struct{})
}

func (m *memRegistry) Resolve(ctx context.Context, u discovery.Updates) {
	for {
		m.mu.Lock()
		changed, fail := m.changed, m.failWith
		addrs := make([]discovery.Address, len(m.addrs))
		for i, hp := range m.addrs {
			addrs[i] = discovery.Address{HostPort: hp}
		}
		m.mu.Unlock()
		if fail != nil {
			u.Error(fail)
		} else {
			u.Update(addrs)
		}
		select {
		case <-changed:
		case <-u.ResolveNow():
			m.asked.Add(1)
		case <-ctx.Done():
			return
		}
	}
}

func (m *memRegistry) Register(hostPort string) (discovery.Registration, error) {
	m.set(func(a []string) []string { return append(a, hostPort) }, nil)
	return &memRegistration{m: m, hostPort: hostPort}, nil
}

type memRegistration struct {
	m        *memRegistry
	hostPort string
	done     atomic.Bool
}

func (r *memRegistration) Deregister(context.Context) error {
	if !r.done.Swap(true) {
		r.m.set(func(a []string) []string {
			var out []string
			for _, hp := range a {
				if hp != r.hostPort {
					out = append(out, hp)
				}
			}
			return out
		}, nil)
	}
	return nil
}

func (r *memRegistration) State() discovery.RegistrationState {
	return discovery.RegistrationState{Registry: r.m.String(), HostPort: r.hostPort, Registered: !r.done.Load(),
		Registrations: 1, Deregistered: r.done.Load()}
}

// echoLoop keeps four goroutines calling "kv" "echo" on client, each call
// within 2 s, until the test ends or the Loop's Stop.
func echoLoop(t *testing.T, client *Channel) *testload.Loop {
	l := testload.Start(4, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := to(client, "kv").CallRaw(ctx, "echo", nil, []byte("x"))
		return err
	})
	t.Cleanup(l.Stop)
	return l
}

// resolvedClient returns a client whose "kv" peers come from reg.
func resolvedClient(t *testing.T, reg discovery.Resolver, opts ...Option) (*Channel, tally.TestScope) {
	t.Helper()
	scope := tally.NewTestScope("", nil)
	ch, err := New("client", append([]Option{WithScope(scope)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.Close)
	if _, err := ch.NewClient("kv", WithResolver(reg)); err != nil {
		t.Fatal(err)
	}
	return ch, scope
}

func peerSet(ch *Channel) string {
	var hps []string
	for _, p := range to(ch, "kv").Peers() {
		hps = append(hps, p.HostPort)
	}
	return strings.Join(hps, ",")
}

// A resolver's sets become the service's peers: a call made before the
// first answer waits for it; peers that stay keep their state; AddPeer and
// RemovePeer refuse to change a resolved service.
func TestResolverFollowsPeers(t *testing.T) {
	a, b := startServer(t), startServer(t)
	reg := newMemRegistry()
	reg.failWith = errors.New("not yet")
	client, _ := resolvedClient(t, reg)
	result := make(chan error, 1)
	go func() {
		_, err := to(client, "kv").CallRaw(ctxTimeout(t), "echo", nil, []byte("x"))
		result <- err
	}()
	testwait.Until(t, "the resolver's failure to show", func() bool { return client.Debug().Services[0].Resolver.Status == "FAILING" })
	select {
	case err := <-result:
		t.Fatalf("a call ended before the resolver's first set: %v", err)
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := to(client, "kv").CallRaw(ctx, "echo", nil, nil); err == nil || !strings.Contains(err.Error(), "the service's resolver has not answered; mem:test: not yet") {
		t.Fatalf("a call whose deadline passed before the first set: %v, want the resolver's error", err)
	}
	reg.set(func([]string) []string { return []string{a.ch.HostPort()} }, nil)
	if err := testwait.Recv(t, result, "the waiting call"); err != nil {
		t.Fatalf("the call that waited for the first set: %v", err)
	}
	before := to(client, "kv").Peers()[0]
	reg.set(func(s []string) []string { return append(s, b.ch.HostPort()) }, nil)
	testwait.Until(t, "b to join", func() bool { return len(to(client, "kv").Peers()) == 2 })
	for _, p := range to(client, "kv").Peers() {
		if p.HostPort == a.ch.HostPort() && p.Sent != before.Sent {
			t.Fatalf("a's counts changed when b joined: %+v, was %+v", p, before)
		}
	}
	err := to(client, "kv").AddPeer("127.0.0.1:9")
	if err == nil || !strings.Contains(err.Error(), `service "kv"'s peers come from its resolver mem:test`) {
		t.Fatalf("AddPeer on a resolved service: %v", err)
	}
	if err := to(client, "kv").RemovePeer(a.ch.HostPort()); err == nil || !strings.Contains(err.Error(), "WithResolver") {
		t.Fatalf("RemovePeer on a resolved service: %v", err)
	}
	reg.set(func([]string) []string { return []string{b.ch.HostPort()} }, nil)
	testwait.Until(t, "a to leave", func() bool { return peerSet(client) == b.ch.HostPort() })
	for range 20 {
		var info CallInfo
		_, err := to(client, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil, ReportCallInfo(&info))
		if err != nil || info.Peer != b.ch.HostPort() {
			t.Fatalf("a call after a left went to %q: %v", info.Peer, err)
		}
	}
}

// Removing a peer with a call in flight loses nothing: the call finishes
// on its connection, and only then does the connection close.
func TestRemovedPeerFinishesItsCalls(t *testing.T) {
	a, b := startServer(t), startServer(t)
	reg := newMemRegistry(a.ch.HostPort())
	client, _ := resolvedClient(t, reg)
	if err := to(client, "kv").Connect(ctxTimeout(t)); err != nil && !errors.Is(err, ErrNoPeers) {
		t.Fatal(err)
	}
	testwait.Until(t, "a to be ready", func() bool { p := to(client, "kv").Peers(); return len(p) == 1 && p[0].State == peer.Ready })
	result := make(chan error, 1)
	go func() {
		_, err := to(client, "kv").CallRaw(ctxTimeout(t), "echo", nil, []byte("block"))
		result <- err
	}()
	testwait.Until(t, "the call to reach a", func() bool { return a.received.Load() == 1 })
	reg.set(func([]string) []string { return []string{b.ch.HostPort()} }, nil)
	testwait.Until(t, "a to leave the list", func() bool { return peerSet(client) == b.ch.HostPort() })
	a.unblock()
	if err := testwait.Recv(t, result, "the call in flight"); err != nil {
		t.Fatalf("the call in flight to the removed peer: %v", err)
	}
}

// A failing registry keeps the last good set: an error and then an empty
// answer leave the peers in place and calls working, and the failure shows
// in Debug and the metrics.
func TestResolverFailureKeepsPeers(t *testing.T) {
	a := startServer(t)
	reg := newMemRegistry(a.ch.HostPort())
	client, scope := resolvedClient(t, reg)
	testwait.Until(t, "the first set", func() bool { return peerSet(client) == a.ch.HostPort() })
	reg.set(func(s []string) []string { return s }, errors.New("registry unreachable"))
	testwait.Until(t, "the failure", func() bool { return client.Debug().Services[0].Resolver.Status == "FAILING" })
	reg.set(func([]string) []string { return nil }, nil)
	testwait.Until(t, "the empty answer", func() bool {
		r := client.Debug().Services[0].Resolver
		return r.LastError != nil && strings.Contains(*r.LastError, "empty")
	})
	if peerSet(client) != a.ch.HostPort() {
		t.Fatalf("the peers changed on failures: %q", peerSet(client))
	}
	if _, err := to(client, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil); err != nil {
		t.Fatalf("a call while the registry fails: %v", err)
	}
	r := client.Debug().Services[0].Resolver
	if r.Target != "mem:test" || r.Peers != 1 || r.Errors != 2 || r.LastUpdate == nil || r.LastErrorTime == nil {
		t.Fatalf("Debug's resolver: %+v", r)
	}
	snap := scope.Snapshot()
	if g := snap.Gauges()["discovery.failing+service=kv"]; g == nil || g.Value() != 1 {
		t.Fatalf("discovery.failing = %v, want 1", g)
	}
	if c := snap.Counters()["discovery.errors+service=kv"]; c == nil || c.Value() != 2 {
		t.Fatalf("discovery.errors = %v, want 2", c)
	}
}

// A peer whose connection fails makes the Channel ask its resolver for a
// fresh lookup.
func TestFailedPeerAsksForALookup(t *testing.T) {
	a, b := startServer(t), startServer(t)
	reg := newMemRegistry(a.ch.HostPort(), b.ch.HostPort())
	client, _ := resolvedClient(t, reg)
	testwait.Until(t, "both ready", func() bool {
		ps := to(client, "kv").Peers()
		return len(ps) == 2 && ps[0].State == peer.Ready && ps[1].State == peer.Ready
	})
	if n := reg.asked.Load(); n != 0 {
		t.Fatalf("%d lookups asked while every peer was fine", n)
	}
	a.ch.Close()
	testwait.Until(t, "a lookup asked for", func() bool { return reg.asked.Load() >= 1 })
}

func TestWithResolverErrors(t *testing.T) {
	if _, err := New("client", WithShutdown(ShutdownConfig{Quiet: -1})); err == nil || !strings.Contains(err.Error(), "Quiet is -1ns, must be >= 0") {
		t.Errorf("New: %v, want an error naming Quiet", err)
	}
	ch, err := New("client")
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	for _, tt := range []struct {
		service string
		opts    []ClientOption
		want    string
	}{
		{"", []ClientOption{WithResolver(discovery.StaticHostPorts("127.0.0.1:1"))}, "the service name is empty"},
		{"kv", []ClientOption{WithResolver(nil)}, `NewClient("kv"): WithResolver is nil`},
	} {
		if _, err := ch.NewClient(tt.service, tt.opts...); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewClient(%q): %v, want an error with %q", tt.service, err, tt.want)
		}
	}
	if _, err := ch.NewClient("kv", WithResolver(discovery.StaticHostPorts())); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.NewClient("kv", WithResolver(discovery.StaticHostPorts())); !errors.Is(err, ErrClientExists) {
		t.Errorf("a second NewClient(kv): %v, want ErrClientExists", err)
	}
}

// A rolling replacement of every server, each new one registering and each
// old one leaving with Shutdown, fails no call of clients that follow the
// registry and retry nothing. The servers are replaced one at a time, three
// times over.
func TestShutdownRollingReplacementFailsNoCall(t *testing.T) {
	reg := newMemRegistry()
	quick := WithShutdown(ShutdownConfig{Quiet: 50 * time.Millisecond})
	var servers []*testServer
	for range 3 {
		servers = append(servers, startServer(t, WithRegistrar(reg), quick))
	}
	client, _ := resolvedClient(t, reg)
	load := echoLoop(t, client)
	testwait.Until(t, "calls to flow", func() bool { return load.Calls() > 100 })
	for i := range 9 {
		old := servers[i%3]
		servers[i%3] = startServer(t, WithRegistrar(reg), quick)
		before := load.Calls()
		testwait.Until(t, "calls after the replacement", func() bool { return load.Calls() > before+50 })
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := old.ch.Shutdown(sctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		cancel()
		if st := old.ch.Debug(); st.Phase != "CLOSED" || !st.Registrations[0].Deregistered {
			t.Fatalf("after Shutdown: phase %s, registrations %+v", st.Phase, st.Registrations)
		}
	}
	load.Stop()
	t.Logf("%d calls through 9 replacements, %d failed", load.Calls(), load.Failed())
	if n := load.Failed(); n != 0 {
		t.Fatalf("%d of %d calls failed; the first: %v", n, load.Calls(), load.FirstErr())
	}
}

// Shutdown declines new requests once it drains, marked as before any
// handler, and waits for the handlers in flight; a ctx that ends first
// makes it return an error naming them.
func TestShutdownDrainsHandlers(t *testing.T) {
	s := startServer(t, WithShutdown(ShutdownConfig{NoGrace: true}))
	raw1, err := tchannel.NewChannel("raw-client", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer raw1.Close()
	inFlight := make(chan error, 1)
	go func() {
		_, _, _, err := raw.Call(ctxTimeout(t), raw1, s.ch.HostPort(), "kv", "echo", nil, []byte("block"))
		inFlight <- err
	}()
	testwait.Until(t, "the call to reach its handler", func() bool { return s.received.Load() == 1 })
	done := make(chan error, 1)
	go func() { done <- s.ch.Shutdown(context.Background()) }()
	testwait.Until(t, "the drain", func() bool { return s.ch.Debug().Phase == "DRAINING" })
	_, _, _, err = raw.Call(ctxTimeout(t), raw1, s.ch.HostPort(), "kv", "echo", nil, []byte("x"))
	var se tchannel.SystemError
	if !errors.As(err, &se) || se.Code() != tchannel.ErrCodeDeclined || !strings.Contains(se.Message(), decline.EarlyHint) {
		t.Fatalf("a call during the drain: %v, want a marked Declined", err)
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned with a handler in flight: %v", err)
	default:
	}
	s.unblock()
	if err := testwait.Recv(t, inFlight, "the call in flight"); err != nil {
		t.Fatalf("the call in flight during Shutdown: %v", err)
	}
	if err := testwait.Recv(t, done, "Shutdown"); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}

	s2 := startServer(t, WithShutdown(ShutdownConfig{NoGrace: true}))
	go func() {
		_, _, _, err := raw.Call(ctxTimeout(t), raw1, s2.ch.HostPort(), "kv", "echo", nil, []byte("block"))
		inFlight <- err
	}()
	testwait.Until(t, "the call to reach its handler", func() bool { return s2.received.Load() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s2.ch.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "1 requests still in their handlers") {
		t.Fatalf("Shutdown past its ctx: %v", err)
	}
	s2.unblock()
	<-inFlight
}

// The grace lasts while a plain TChannel client's requests keep coming,
// up to Grace, and ends once they stop for Quiet; a Sluice client is told
// and closes its connection, so its calls do not hold the grace, and
// every call it made succeeded or was never sent.
func TestShutdownGrace(t *testing.T) {
	const grace, quiet = 400 * time.Millisecond, 100 * time.Millisecond
	// A run is judged only if the plain client kept calling, its requests
	// reaching the server less than Quiet/2 apart: on a loaded machine its
	// goroutine can stall for Quiet, and the grace then ends as it should.
	// Up to 3 runs, one of which must keep calling.
	for run := 1; ; run++ {
		d, gap := shutdownBesidePlainCalls(t, grace, quiet)
		if gap < quiet/2 {
			if d < grace {
				t.Fatalf("Shutdown left after %v while a plain client's calls kept coming (at most %v apart), want the whole grace (%v)", d, gap, grace)
			}
			break
		}
		t.Logf("run %d: the plain client's requests stopped for %v, Shutdown left after %v: not judged", run, gap, d)
		if run == 3 {
			t.Fatalf("in %d runs the plain client never kept calling (gaps of Quiet/2, %v, or more)", run, quiet/2)
		}
	}

	s2 := startServer(t, WithShutdown(ShutdownConfig{Grace: time.Hour, Quiet: quiet}))
	client, err := New("client")
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	to(client, "kv", WithMethods("echo"))
	if err := to(client, "kv").AddPeer(s2.ch.HostPort()); err != nil {
		t.Fatal(err)
	}
	// Once its one peer has left, the client's calls fail at once,
	// UNAVAILABLE naming the leaving server, unsent; no other failure.
	var left atomic.Int64
	load := testload.Start(4, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := to(client, "kv").CallRaw(ctx, "echo", nil, []byte("x"))
		if errors.Is(err, ErrUnavailable) && errors.Is(err, peer.ErrPeerLeaving) {
			left.Add(1)
			return nil
		}
		return err
	})
	t.Cleanup(load.Stop)
	testwait.Until(t, "calls to flow", func() bool { return load.Calls() > 50 })
	done := make(chan error, 1)
	go func() { done <- s2.ch.Shutdown(context.Background()) }()
	// The Sluice client is told at once: its peer leaves choice, and its
	// connection closes, which ends the grace long before its hour.
	testwait.Until(t, "the client to see the server leaving", func() bool {
		p := to(client, "kv").Peers()
		return len(p) == 1 && p[0].State == peer.TransientFailure
	})
	if err := testwait.Recv(t, done, "Shutdown with only a Sluice client"); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "calls to fail as the peer left", func() bool { return left.Load() > 0 })
	load.Stop()
	if n := load.Failed(); n != 0 {
		t.Fatalf("%d calls through the server's Shutdown failed otherwise; the first: %v", n, load.FirstErr())
	}

	s3 := startServer(t, WithShutdown(ShutdownConfig{Grace: time.Hour, Quiet: quiet}))
	start := time.Now()
	if err := s3.ch.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Minute {
		t.Fatalf("Shutdown with no calls took %v, want about Quiet (%v)", d, quiet)
	}
}

// shutdownBesidePlainCalls shuts a server down while a plain TChannel
// client calls it back to back, and returns how long Shutdown took and the
// longest time without a request reaching the server while it ran.
func shutdownBesidePlainCalls(t *testing.T, grace, quiet time.Duration) (took, gap time.Duration) {
	t.Helper()
	var (
		mu       sync.Mutex
		arrivals []time.Time
	)
	arrived := func(ctx context.Context, _ *Inbound, next func(context.Context) error) error {
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		mu.Unlock()
		return next(ctx)
	}
	s := startServer(t, WithShutdown(ShutdownConfig{Grace: grace, Quiet: quiet}), WithInboundMiddleware(arrived))
	plain, err := tchannel.NewChannel("plain-client", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	calling := make(chan struct{})
	go func() {
		defer close(calling)
		for ctx.Err() == nil {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			_, _, _, _ = raw.Call(cctx, plain, s.ch.HostPort(), "kv", "echo", nil, nil)
			cancel()
		}
	}()
	testwait.Until(t, "calls to flow", func() bool { return s.received.Load() > 10 })
	start := time.Now()
	if err := s.ch.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	end := time.Now()
	stop()
	<-calling
	mu.Lock()
	defer mu.Unlock()
	last := start
	for _, at := range arrivals {
		if at.After(start) && at.Before(end) {
			gap = max(gap, at.Sub(last))
			last = at
		}
	}
	return end.Sub(start), max(gap, end.Sub(last))
}

// stuckRegistrar registers, or fails to, as err says; its Deregister
// blocks until its context ends, as against an etcd that does not answer.
type stuckRegistrar struct{ err error }

func (s stuckRegistrar) String() string { return "stuck:test" }

func (s stuckRegistrar) Register(hostPort string) (discovery.Registration, error) {
	if s.err != nil {
		return nil, s.err
	}
	return stuckRegistration{hostPort}, nil
}

type stuckRegistration struct{ hostPort string }

func (r stuckRegistration) Deregister(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

func (r stuckRegistration) State() discovery.RegistrationState {
	return discovery.RegistrationState{Registry: "stuck:test", HostPort: r.hostPort, Registered: true}
}

// A registration that fails is returned by ListenAndServe, and the Channel
// serves on: its listener stays open (closing it under tchannel-go's
// accept loop ended the process).
func TestRegistrationErrorKeepsServing(t *testing.T) {
	srv, err := New("kv", WithRegistrar(stuckRegistrar{err: errors.New("registry down")}))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.RegisterRaw("echo", func(ctx context.Context, req *RawRequest) (*RawResponse, error) {
		return &RawResponse{Arg3: req.Arg3}, nil
	})
	if err := srv.ListenAndServe("127.0.0.1:0"); err == nil || !strings.Contains(err.Error(), "registry down") {
		t.Fatalf("ListenAndServe: %v, want the registration's error", err)
	}
	c, err := New("client")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := to(c, "kv").AddPeer(srv.HostPort()); err != nil {
		t.Fatal(err)
	}
	res, err := to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, []byte("still here"))
	if err != nil || string(res.Arg3) != "still here" {
		t.Fatalf("a call to the unregistered server: %v, %v", res, err)
	}
}

// A registry that does not answer takes at most deregisterWait of
// Shutdown's time: the handler in flight is still waited for, and finishes;
// the Channel ends CLOSED, not DRAINING.
func TestShutdownPastAStuckRegistry(t *testing.T) {
	t.Parallel() // it waits out deregisterWait
	s := startServer(t, WithShutdown(ShutdownConfig{NoGrace: true}), WithRegistrar(stuckRegistrar{}))
	raw1, err := tchannel.NewChannel("raw-client", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer raw1.Close()
	inFlight := make(chan error, 1)
	go func() {
		_, _, _, err := raw.Call(ctxTimeout(t), raw1, s.ch.HostPort(), "kv", "echo", nil, []byte("block"))
		inFlight <- err
	}()
	testwait.Until(t, "the call to reach its handler", func() bool { return s.received.Load() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 4*deregisterWait)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.ch.Shutdown(ctx) }()
	testwait.Until(t, "the drain", func() bool { return s.ch.Debug().Phase == "DRAINING" })
	s.unblock()
	if err := testwait.Recv(t, inFlight, "the call in flight"); err != nil {
		t.Fatalf("the call in flight during Shutdown: %v", err)
	}
	err = testwait.Recv(t, done, "Shutdown")
	if !strings.Contains(err.Error(), "deregister") || strings.Contains(err.Error(), "still in their handlers") {
		t.Fatalf("Shutdown: %v, want the deregistration's error only", err)
	}
	if p := s.ch.Debug().Phase; p != "CLOSED" {
		t.Errorf("phase after Shutdown: %s, want CLOSED", p)
	}
}

// The watch on failing peers looks at the peers whose state changed, not
// at the whole list after each change: with 1,000 peers in transient
// failure (they stay so: the backoff is an hour), a peer joining, becoming
// Ready and leaving 30 times costs a few looks each (and each failed peer
// once at most, if the watch had not yet taken its last change). Walking the list at
// each wake-up, as it did, cost 1,000 looks per wake-up: 9,990
// unreachable peers kept a core busy.
func TestFailedPeerWatchIsLinearInTheChanges(t *testing.T) {
	const n, rounds = 1000, 30
	reg := newMemRegistry(refusedPorts(t, n)...)
	client, _ := resolvedClient(t, reg, WithConnectConfig(ConnectConfig{Backoff: backoff.Exponential{
		Initial: time.Hour, Max: time.Hour, Multiplier: 1, Jitter: backoff.ProportionalJitter}}))
	testwait.Until(t, "every peer in transient failure", func() bool {
		ps := to(client, "kv").Peers()
		for _, p := range ps {
			if p.State != peer.TransientFailure {
				return false
			}
		}
		return len(ps) == n
	})
	r := to(client, "kv").res
	before := r.looks.Load()
	s := startServer(t)
	for range rounds {
		reg.set(func(a []string) []string { return append(a, s.ch.HostPort()) }, nil)
		testwait.Until(t, "the extra peer Ready", func() bool {
			for _, p := range to(client, "kv").Peers() {
				if p.HostPort == s.ch.HostPort() {
					return p.State == peer.Ready
				}
			}
			return false
		})
		reg.set(func(a []string) []string { return a[:n] }, nil)
		testwait.Until(t, "the extra peer gone", func() bool { return len(to(client, "kv").Peers()) == n })
	}
	// The watch may still have had the failed peers' last changes to
	// take when before was read: each of them once more at most, and a
	// few looks per round.
	if looks, bound := r.looks.Load()-before, n+10*rounds; looks > int64(bound) {
		t.Errorf("%d rounds of one peer joining, becoming Ready and leaving made the watch look at %d peers, want at most %d: it walks the list", rounds, looks, bound)
	}
}

// refusedPorts returns n addresses of 127.0.0.1 where nothing listens,
// from port 10001 up: below the kernel's ephemeral range, so that no
// listener of a test running beside (on port 0) takes one meanwhile. Each
// is listened on and closed again: a connect to it is refused.
func refusedPorts(t testing.TB, n int) []string {
	t.Helper()
	var hps []string
	for port := 10001; len(hps) < n && port < 32768; port++ {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // in use
		}
		hps = append(hps, l.Addr().String())
		l.Close()
	}
	if len(hps) < n {
		t.Fatalf("found %d free ports of 127.0.0.1 from 10001, want %d", len(hps), n)
	}
	return hps
}

// silentResolver never reports a set nor a failure: calls wait for it.
type silentResolver struct{}

func (silentResolver) Resolve(ctx context.Context, _ discovery.Updates) { <-ctx.Done() }
func (silentResolver) String() string                                   { return "silent:test" }

// A call waiting for a resolver's first answer ends when its Client is
// closed, failing CLOSED, not at its deadline; calls made afterwards fail
// at once the same way; and the Channel's other Clients go on.
func TestClientCloseEndsWaitingCalls(t *testing.T) {
	s := startServer(t)
	waiting := make(chan struct{}, 1)
	ch, err := New("client", withOnWait(func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	kv, err := ch.NewClient("other", WithResolver(silentResolver{}))
	if err != nil {
		t.Fatal(err)
	}
	other := to(ch, "kv") // the test server's service
	if err := other.AddPeer(s.ch.HostPort()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := kv.CallRaw(ctx, "echo", nil, nil)
		done <- err
	}()
	testwait.Recv(t, waiting, "the call to wait for the resolver")
	kv.Close()
	err = testwait.Recv(t, done, "the waiting call to end")
	var ce *CallError
	if !errors.As(err, &ce) || ce.Code != codes.Closed || !errors.Is(err, ErrClosed) {
		t.Errorf("the waiting call: %v, want CLOSED (ErrClosed)", err)
	}
	if ctx.Err() != nil {
		t.Errorf("the call ended with its context: %v", ctx.Err())
	}
	if _, err := kv.CallRaw(ctxTimeout(t), "echo", nil, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("a call after Close: %v, want ErrClosed", err)
	}
	if _, err := other.CallRaw(ctxTimeout(t), "echo", nil, []byte("x")); err != nil {
		t.Errorf("another Client's call after the first closed: %v", err)
	}
	if _, err := ch.NewClient("other"); err != nil {
		t.Errorf("NewClient(other) after its Client closed: %v, want the name free", err)
	}
}
