package leasing

import (
	"context"
	"errors"
	"math"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uber-go/tally/v4"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-rpc/sluice/backoff"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
	"github.com/sluice-rpc/sluice/leasing/server"
	"github.com/sluice-rpc/sluice/stats"
)

// liveConfig is testConfig for FAIR_SHARE with learning mode as given.
func liveConfig(capacity float64, learning *int64, safe *float64) *server.Repository {
	cfg := testConfig(server.FairShare, capacity)
	cfg.Resources[0].Algorithm.LearningModeDuration = learning
	cfg.Resources[0].SafeCapacity = safe
	return cfg
}

func approx(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestClientThreeClientsConvergeAfterOneDoublesItsWants(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	addr := startServer(t, newTestServer(t, liveConfig(120, int64p(0), nil), clk), "")
	a := newTestClient(t, addr, "a", clk)
	b := newTestClient(t, addr, "b", clk)
	c := newTestClient(t, addr, "c", clk)
	ra := mustResource(t, a, "r", ResourceConfig{Wants: 30})
	rb := mustResource(t, b, "r", ResourceConfig{Wants: 45})
	rc := mustResource(t, c, "r", ResourceConfig{Wants: 45})
	refresh(t, a, b, c)
	for _, x := range []struct {
		r    *Resource
		want float64
	}{{ra, 30}, {rb, 45}, {rc, 45}} {
		if got := x.r.Capacity(); got != x.want {
			t.Fatalf("before: %v, want %v", got, x.want)
		}
	}
	// a doubles its wants; the fair share is now 40 each. Within one
	// refresh interval after a's new wants reach the server every client
	// has refreshed and holds its fair share.
	clk.Add(15 * time.Second)
	if err := ra.SetWants(60); err != nil {
		t.Fatal(err)
	}
	refresh(t, a, b, c)
	clk.Add(15 * time.Second)
	refresh(t, a, b, c)
	for name, r := range map[string]*Resource{"a": ra, "b": rb, "c": rc} {
		if got := r.Capacity(); !approx(got, 40) {
			t.Errorf("client %s has %v one refresh interval later, want the fair share 40", name, got)
		}
	}
}

func TestClientKeepsCapacityAcrossServerRestart(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	cfg := liveConfig(120, nil, nil) // learning mode = lease length (60 s)
	s1 := newTestServer(t, cfg, clk)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	done := make(chan struct{})
	go func() { defer close(done); s1.Serve(lis) }()

	clk.Add(60 * time.Second) // past s1's learning mode
	a := newTestClient(t, addr, "a", clk)
	b := newTestClient(t, addr, "b", clk)
	ra := mustResource(t, a, "r", ResourceConfig{Wants: 100, Mode: Pessimistic})
	rb := mustResource(t, b, "r", ResourceConfig{Wants: 20, Mode: Pessimistic})
	refresh(t, b, a)
	if ra.Capacity() != 100 || rb.Capacity() != 20 {
		t.Fatalf("before restart: a %v b %v, want 100 and 20", ra.Capacity(), rb.Capacity())
	}

	s1.Stop()
	testwait.Recv(t, done, "Serve to return")
	s2 := newTestServer(t, cfg, clk) // a new master: learning mode for 60 s
	startServer(t, s2, addr)

	clk.Add(15 * time.Second)
	refresh(t, a, b)
	if ra.Capacity() != 100 || rb.Capacity() != 20 {
		t.Fatalf("after restart: a %v b %v, want them to keep 100 and 20", ra.Capacity(), rb.Capacity())
	}
	newcomer := newTestClient(t, addr, "n", clk)
	rn := mustResource(t, newcomer, "r", ResourceConfig{Wants: 50, Mode: Optimistic})
	refresh(t, newcomer)
	if got, _, ok := rn.Lease(); !ok || got != 0 {
		t.Fatalf("new client in learning mode got lease %v (ok=%v), want 0", got, ok)
	}
}

func TestClientFallsBackToItsModeAtLeaseExpiry(t *testing.T) {
	safe := 10.0
	for _, tt := range []struct {
		mode Mode
		want float64
	}{{Optimistic, 50}, {Pessimistic, 0}, {Safe, 10}} {
		t.Run(tt.mode.String(), func(t *testing.T) {
			clk := clock.NewFake(testEpoch)
			s := newTestServer(t, liveConfig(40, int64p(0), &safe), clk)
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { defer close(done); s.Serve(lis) }()
			c := newTestClient(t, lis.Addr().String(), "a", clk)
			r := mustResource(t, c, "r", ResourceConfig{Wants: 50, Mode: tt.mode})
			refresh(t, c)
			if got := r.Capacity(); got != 40 {
				t.Fatalf("leased %v, want 40", got)
			}
			s.Stop() // the server vanishes
			testwait.Recv(t, done, "Serve to return")
			clk.Add(30 * time.Second)
			if err := c.Refresh(context.Background()); err == nil {
				t.Fatal("Refresh to a stopped server succeeded")
			}
			if got := r.Capacity(); got != 40 {
				t.Fatalf("before expiry: %v, want the lease's 40", got)
			}
			changed := r.Changed()
			clk.Add(30 * time.Second) // the lease expires; no refresh loop runs
			if got := r.Capacity(); got != tt.want {
				t.Fatalf("after expiry in %v mode: %v, want %v", tt.mode, got, tt.want)
			}
			testwait.Recv(t, changed, "reading the capacity to announce the expiry")
		})
	}
}

func TestClientReleaseMakesCapacityAvailable(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	addr := startServer(t, newTestServer(t, liveConfig(120, int64p(0), nil), clk), "")
	a := newTestClient(t, addr, "a", clk)
	b := newTestClient(t, addr, "b", clk)
	ra := mustResource(t, a, "r", ResourceConfig{Wants: 120})
	rb := mustResource(t, b, "r", ResourceConfig{Wants: 120, Mode: Pessimistic})
	refresh(t, a, b)
	if ra.Capacity() != 120 || rb.Capacity() != 0 {
		t.Fatalf("a %v b %v, want 120 and 0", ra.Capacity(), rb.Capacity())
	}
	if err := ra.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	clk.Add(5 * time.Second) // b's minimum refresh interval, far before a's lease would expire
	refresh(t, b)
	if got := rb.Capacity(); got != 120 {
		t.Fatalf("after a released: b has %v, want 120", got)
	}
}

func TestClientCloseReleases(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	s := newTestServer(t, liveConfig(120, int64p(0), nil), clk)
	addr := startServer(t, s, "")
	a, err := NewClient(ClientConfig{Addr: addr, ID: "a", Clock: clk, ManualRefresh: true})
	if err != nil {
		t.Fatal(err)
	}
	mustResource(t, a, "r", ResourceConfig{Wants: 120})
	refresh(t, a)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if got := ask(t, s, "b", 120); got != 120 {
		t.Fatalf("after a closed, b got %v, want 120", got)
	}
	if _, err := a.Resource("x", ResourceConfig{}); err != ErrClosed {
		t.Fatalf("Resource after Close: %v, want ErrClosed", err)
	}
}

// redirector is a non-master server pointing at the master.
type redirector struct {
	pb.UnimplementedCapacityServer
	master string
}

func (r *redirector) Discovery(context.Context, *pb.DiscoveryRequest) (*pb.DiscoveryResponse, error) {
	return &pb.DiscoveryResponse{Mastership: &pb.Mastership{MasterAddress: proto.String(r.master)}, IsMaster: proto.Bool(false)}, nil
}

func (r *redirector) GetCapacity(context.Context, *pb.GetCapacityRequest) (*pb.GetCapacityResponse, error) {
	return &pb.GetCapacityResponse{Mastership: &pb.Mastership{MasterAddress: proto.String(r.master)}}, nil
}

func TestClientFollowsMastershipRedirects(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	master := startServer(t, newTestServer(t, liveConfig(120, int64p(0), nil), clk), "")
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	pb.RegisterCapacityServer(g, &redirector{master: master})
	done := make(chan struct{})
	go func() { defer close(done); g.Serve(lis) }()
	defer func() { g.Stop(); testwait.Recv(t, done, "Serve to return") }()

	c := newTestClient(t, lis.Addr().String(), "a", clk)
	r := mustResource(t, c, "r", ResourceConfig{Wants: 7, Mode: Pessimistic})
	refresh(t, c)
	if got := r.Capacity(); got != 7 {
		t.Fatalf("capacity via redirect %v, want 7", got)
	}
}

func TestClientBackoffIsCappedExponential(t *testing.T) {
	c, err := NewClient(ClientConfig{Addr: "127.0.0.1:1", ManualRefresh: true, Backoff: backoff.Exponential{Initial: time.Second, Max: 10 * time.Second, Multiplier: 2, Jitter: backoff.EqualJitter}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for i, w := range want {
		if got := c.backoff.Ceiling(i + 1); got != w {
			t.Errorf("longest backoff after %d failures = %v, want %v", i+1, got, w)
		}
	}
}

func TestClientBackoffJitterKeepsTheUpperHalf(t *testing.T) {
	d := 8 * time.Second
	c, err := NewClient(ClientConfig{Addr: "127.0.0.1:1", ManualRefresh: true, Backoff: backoff.Exponential{Initial: d, Max: d, Multiplier: 2, Jitter: backoff.EqualJitter}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tt := range []struct {
		u    float64
		want time.Duration
	}{{0, 4 * time.Second}, {0.5, 6 * time.Second}, {0.999999, d - 4*time.Microsecond}} {
		if got := c.backoff.Delay(1, tt.u); got != tt.want {
			t.Errorf("backoff after one failure, drawn at %v = %v, want %v", tt.u, got, tt.want)
		}
	}
}

// The loop waits a jittered backoff after a failed refresh: with the
// jitter at its lowest, exactly half of Backoff.Initial.
func TestClientLoopBacksOffWithJitter(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close() // nothing listens: every refresh fails at once
	scope := tally.NewTestScope("", nil)
	c, err := NewClient(ClientConfig{Addr: addr, ID: "j", Clock: clk, Scope: scope,
		Backoff: backoff.Exponential{Initial: 2 * time.Second, Max: time.Minute, Multiplier: 2, Jitter: backoff.EqualJitter}, RPCTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The loop reads rand only after a refresh fails, and none is sent
	// before the resource below is added: setting it here does not race.
	c.rand = func() float64 { return 0 }
	errorsSoFar := func() int64 {
		if e := scope.Snapshot().Counters()[stats.LeaseRefreshErrors+"+"]; e != nil {
			return e.Value()
		}
		return 0
	}
	mustResource(t, c, "r", ResourceConfig{Wants: 1})
	waitFor(t, "the first refresh to fail", func() bool { return errorsSoFar() == 1 })
	waitFor(t, "the loop to back off", func() bool { return clk.Timers() == 1 })
	clk.Add(time.Second - time.Nanosecond)
	if n := clk.Timers(); n != 1 { // Add fires due timers before it returns
		t.Fatalf("the backoff timer fired %v early", time.Nanosecond)
	}
	clk.Add(time.Nanosecond) // 1 s: half the initial backoff
	waitFor(t, "the retry after 1s", func() bool { return errorsSoFar() == 2 })
}

func TestClientRefreshLoop(t *testing.T) {
	// The background loop on the wall clock: the first request goes out as
	// soon as the resource is added, and Close releases the lease.
	s, err := server.New(server.Config{Repository: liveConfig(10, int64p(0), nil)})
	if err != nil {
		t.Fatal(err)
	}
	addr := startServer(t, s, "")
	c, err := NewClient(ClientConfig{Addr: addr, ID: "loop"})
	if err != nil {
		t.Fatal(err)
	}
	r := mustResource(t, c, "r", ResourceConfig{Wants: 4, Mode: Pessimistic})
	// The loop may refresh before a Changed channel could be taken, so wait
	// for the lease itself.
	waitFor(t, "a lease within 5s of adding the resource", func() bool { return r.Capacity() == 4 })
	if got := r.Capacity(); got != 4 {
		t.Fatalf("capacity %v, want 4", got)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := ask(t, s, "other", 10); got != 10 {
		t.Fatalf("after Close another client got %v, want 10", got)
	}
}

func TestConfigValidation(t *testing.T) {
	if _, err := NewClient(ClientConfig{}); err == nil {
		t.Error("NewClient with no Addr succeeded")
	}
	c := newTestClient(t, "127.0.0.1:1", "a", clock.NewFake(testEpoch))
	if _, err := c.Resource("r", ResourceConfig{Wants: math.NaN()}); err == nil {
		t.Error("resource with NaN wants accepted")
	}
	mustResource(t, c, "r", ResourceConfig{Wants: 1})
	if _, err := c.Resource("r", ResourceConfig{Wants: 1}); err == nil {
		t.Error("resource added twice")
	}
}

func TestClientEstimatesWantsFromDemand(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	addr := startServer(t, newTestServer(t, liveConfig(100, int64p(0), nil), clk), "")
	scope := tally.NewTestScope("", nil)
	c, err := NewClient(ClientConfig{Addr: addr, ID: "est", Clock: clk, Scope: scope, ManualRefresh: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := mustResource(t, c, "r", ResourceConfig{Wants: 10, Mode: Pessimistic, EstimateWants: true})
	refresh(t, c)
	l := NewRateLimiter(r)
	// 5 calls per second for 10 s: below the leased 10/s.
	for i := 0; i < 50; i++ {
		clk.Add(200 * time.Millisecond)
		if err := l.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	refresh(t, c)
	if got := r.Wants(); !approx(got, 5.5) {
		t.Fatalf("wants after 5 calls/s: %v, want 5*1.1 = 5.5", got)
	}
	if got := r.Capacity(); got != 5.5 {
		t.Fatalf("capacity %v, want the new wants 5.5", got)
	}
	// Demand (5/s) at 90% of the leased rate or more: ask for 1.5 times the
	// capacity.
	for i := 0; i < 50; i++ {
		clk.Add(200 * time.Millisecond)
		if err := l.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	refresh(t, c)
	if got := r.Wants(); got < 5.5*1.5 {
		t.Fatalf("wants after demand at capacity: %v, want >= %v", got, 5.5*1.5)
	}
	gauges := scope.Snapshot().Gauges()
	if g, ok := gauges[stats.LeaseWants+"+"+stats.LeaseTagResource+"=r"]; !ok || g.Value() != r.Wants() {
		t.Fatalf("%s gauge = %v (present %v), want %v", stats.LeaseWants, g, ok, r.Wants())
	}
	if g := gauges[stats.LeaseCapacity+"+"+stats.LeaseTagResource+"=r"]; g == nil || g.Value() != r.Capacity() {
		t.Fatalf("%s gauge = %v, want %v", stats.LeaseCapacity, g, r.Capacity())
	}
}

func TestClientLoopFallsBackAtLeaseExpiry(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	safe := 3.0
	s := newTestServer(t, liveConfig(40, int64p(0), &safe), clk)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); s.Serve(lis) }()
	c, err := NewClient(ClientConfig{Addr: lis.Addr().String(), ID: "loop", Clock: clk, RPCTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := mustResource(t, c, "r", ResourceConfig{Wants: 30, Mode: Safe})
	waitFor(t, "the loop's first refresh", func() bool { return r.Capacity() == 30 })
	if got := r.Capacity(); got != 30 {
		t.Fatalf("leased %v, want 30", got)
	}
	s.Stop()
	testwait.Recv(t, done, "Serve to return")
	waitFor(t, "the loop to wait for its next refresh", func() bool { return clk.Timers() == 1 })
	changed := r.Changed()
	clk.Add(60 * time.Second) // the lease expires with the server gone
	testwait.Recv(t, changed, "the capacity to change")
	if got := r.Capacity(); got != 3 {
		t.Fatalf("after expiry in safe mode: %v, want the safe capacity 3", got)
	}
}

func TestClientLoopSendsWantsChangesEarlyButNotWithin5s(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	scope := tally.NewTestScope("", nil)
	s, err := server.New(server.Config{Repository: liveConfig(100, int64p(0), nil), Clock: clk, Scope: scope})
	if err != nil {
		t.Fatal(err)
	}
	addr := startServer(t, s, "")
	requests := func() int64 {
		if c := scope.Snapshot().Counters()[stats.LeaseRequests+"+"]; c != nil {
			return c.Value()
		}
		return 0
	}
	c, err := NewClient(ClientConfig{Addr: addr, ID: "eager", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := mustResource(t, c, "r", ResourceConfig{Wants: 10, Mode: Pessimistic})
	waitFor(t, "the loop's first refresh", func() bool { return r.Capacity() == 10 })
	changed := r.Changed()
	if err := r.SetWants(20); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the loop to wait", func() bool { return clk.Timers() == 1 })
	clk.Add(4 * time.Second)
	waitFor(t, "the loop to wait", func() bool { return clk.Timers() == 1 })
	if n := requests(); n != 1 {
		t.Fatalf("%d requests within 5 s, want 1", n)
	}
	clk.Add(time.Second) // 5 s after the first request: well before the 15 s refresh
	testwait.Recv(t, changed, "the capacity to change")
	if got := r.Capacity(); got != 20 {
		t.Fatalf("capacity %v, want the new wants 20", got)
	}
	if n := requests(); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
}

// gatedServer holds the first GetCapacity (or the hold-th, if set) until
// the test releases it.
type gatedServer struct {
	pb.CapacityServer // the server's RPCs (rpcs)
	hold              int64
	calls             atomic.Int64
	arrived           chan struct{}
	release           chan struct{}
}

func (g *gatedServer) GetCapacity(ctx context.Context, req *pb.GetCapacityRequest) (*pb.GetCapacityResponse, error) {
	if g.calls.Add(1) == max(g.hold, 1) {
		close(g.arrived)
		select {
		case <-g.release:
		case <-ctx.Done(): // the test failed before releasing it
			return nil, ctx.Err()
		}
	}
	return g.CapacityServer.GetCapacity(ctx, req)
}

// serve serves g on 127.0.0.1 until t ends, and returns its address.
func (g *gatedServer) serve(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	pb.RegisterCapacityServer(s, g)
	done := make(chan struct{})
	go func() { defer close(done); s.Serve(lis) }()
	t.Cleanup(func() { s.Stop(); testwait.Recv(t, done, "Serve to return") })
	return lis.Addr().String()
}

// A wants change made while a request is in flight is not lost when the
// answer (to the older wants) arrives: it still goes out early, at the
// minimum refresh interval rather than at the 15 s refresh.
func TestClientKeepsAWantsChangeMadeDuringARefresh(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	gate := &gatedServer{CapacityServer: rpcs(t, newTestServer(t, liveConfig(100, int64p(0), nil), clk)),
		arrived: make(chan struct{}), release: make(chan struct{})}
	c, err := NewClient(ClientConfig{Addr: gate.serve(t), ID: "racer", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := mustResource(t, c, "r", ResourceConfig{Wants: 10, Mode: Pessimistic})
	testwait.Recv(t, gate.arrived, "the first GetCapacity")
	if err := r.SetWants(20); err != nil {
		t.Fatal(err)
	}
	close(gate.release)
	waitFor(t, "the answer to the first request", func() bool { return r.Capacity() == 10 })
	changed := r.Changed()
	clk.Add(DefaultClientMinRefreshInterval)
	testwait.Recv(t, changed, "the early request with the new wants")
	if got := r.Capacity(); got != 20 {
		t.Fatalf("capacity %v, want the new wants 20", got)
	}
}

// Wants lowered below the lease cap the capacity at once, before the
// server has answered them: the server may hand the difference to other
// clients as soon as the request reaches it, and their answers can arrive
// first. Raised wants wait for the server.
func TestClientLoweredWantsHoldBeforeTheAnswer(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	addr := startServer(t, newTestServer(t, liveConfig(100, int64p(0), nil), clk), "")
	c, err := NewClient(ClientConfig{Addr: addr, ID: "lowering", Clock: clk, ManualRefresh: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := mustResource(t, c, "r", ResourceConfig{Wants: 40, Mode: Pessimistic})
	refresh(t, c)
	if got := r.Capacity(); got != 40 {
		t.Fatalf("capacity %v, want the 40 it asked for", got)
	}
	changed := r.Changed()
	if err := r.SetWants(10); err != nil {
		t.Fatal(err)
	}
	if got := r.Capacity(); got != 10 {
		t.Fatalf("capacity %v after wants fell to 10, before any answer; want 10", got)
	}
	select {
	case <-changed:
	default:
		t.Fatal("SetWants(10) returned without announcing the capacity's fall to Changed waiters")
	}
	if got, _, _ := r.Lease(); got != 40 {
		t.Fatalf("lease %v, want the server's 40 until it answers", got)
	}
	clk.Add(DefaultClientMinRefreshInterval)
	refresh(t, c)
	if got, _, _ := r.Lease(); got != 10 {
		t.Fatalf("lease %v after the answer, want 10", got)
	}
	if err := r.SetWants(60); err != nil {
		t.Fatal(err)
	}
	if got := r.Capacity(); got != 10 {
		t.Fatalf("capacity %v after wants rose to 60, before any answer; want the lease's 10", got)
	}
	clk.Add(DefaultClientMinRefreshInterval)
	refresh(t, c)
	if got := r.Capacity(); got != 60 {
		t.Fatalf("capacity %v after the answer, want 60", got)
	}
}

// Wants lowered, sent, and raised again before the answer still hold the
// capacity down: the server acts on the lower wants it has heard, not on
// the resource's latest, until it answers those.
func TestClientLoweredWantsHoldUntilTheCurrentWantsAreAnswered(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	gate := &gatedServer{CapacityServer: rpcs(t, newTestServer(t, liveConfig(100, int64p(0), nil), clk)), hold: 2,
		arrived: make(chan struct{}), release: make(chan struct{})}
	c, err := NewClient(ClientConfig{Addr: gate.serve(t), ID: "wavering", Clock: clk, ManualRefresh: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := mustResource(t, c, "r", ResourceConfig{Wants: 40, Mode: Pessimistic})
	refresh(t, c)
	if err := r.SetWants(10); err != nil {
		t.Fatal(err)
	}
	clk.Add(DefaultClientMinRefreshInterval)
	answered := make(chan error, 1)
	go func() { answered <- c.Refresh(context.Background()) }()
	testwait.Recv(t, gate.arrived, "the request carrying wants 10")
	if err := r.SetWants(40); err != nil {
		t.Fatal(err)
	}
	if got := r.Capacity(); got != 10 {
		t.Fatalf("capacity %v with wants 10 in flight and wants back at 40; want 10", got)
	}
	close(gate.release)
	if err := testwait.Recv(t, answered, "the answer to wants 10"); err != nil {
		t.Fatal(err)
	}
	if got := r.Capacity(); got != 10 {
		t.Fatalf("capacity %v after the answer to wants 10, want 10", got)
	}
	changed := r.Changed()
	clk.Add(DefaultClientMinRefreshInterval)
	refresh(t, c)
	select {
	case <-changed:
	default:
		t.Fatal("the answer to wants 40 did not announce the capacity's rise to Changed waiters")
	}
	if got := r.Capacity(); got != 40 {
		t.Fatalf("capacity %v after the answer to wants 40, want 40", got)
	}
}

// An estimate that lowers the wants holds the capacity down from the
// request that carries it, as SetWants does.
func TestEstimatedWantsHoldBeforeTheAnswer(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	gate := &gatedServer{CapacityServer: rpcs(t, newTestServer(t, liveConfig(100, int64p(0), nil), clk)), hold: 2,
		arrived: make(chan struct{}), release: make(chan struct{})}
	c, err := NewClient(ClientConfig{Addr: gate.serve(t), ID: "estimator", Clock: clk, ManualRefresh: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := mustResource(t, c, "r", ResourceConfig{Wants: 10, Mode: Pessimistic, EstimateWants: true})
	refresh(t, c)
	if got := r.Capacity(); got != 10 {
		t.Fatalf("capacity %v, want the 10 it asked for", got)
	}
	changed := r.Changed()
	clk.Add(DefaultClientMinRefreshInterval) // no calls: the estimate falls to 0
	answered := make(chan error, 1)
	go func() { answered <- c.Refresh(context.Background()) }()
	testwait.Recv(t, gate.arrived, "the request carrying the estimate")
	if got := r.Capacity(); got != 0 {
		t.Fatalf("capacity %v with an estimate of 0 in flight, want 0", got)
	}
	select {
	case <-changed:
	default:
		t.Fatal("the estimate did not announce the capacity's fall to Changed waiters")
	}
	close(gate.release)
	if err := testwait.Recv(t, answered, "the answer to the estimate"); err != nil {
		t.Fatal(err)
	}
}

// With wants estimated from demand, an idle resource wants nothing.
func TestEstimatedWantsFallToZeroWhenIdle(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	addr := startServer(t, newTestServer(t, liveConfig(100, int64p(0), nil), clk), "")
	c, err := NewClient(ClientConfig{Addr: addr, ID: "idle", Clock: clk, ManualRefresh: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := mustResource(t, c, "r", ResourceConfig{Wants: 10, Mode: Pessimistic, EstimateWants: true})
	refresh(t, c)
	clk.Add(time.Minute) // no calls at all
	refresh(t, c)
	if got := r.Wants(); got != 0 {
		t.Fatalf("wants after an idle minute: %v, want 0", got)
	}
}

// After Close, Refresh and Release say so instead of dialling again.
func TestClientAfterClose(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	addr := startServer(t, newTestServer(t, liveConfig(100, int64p(0), nil), clk), "")
	c, err := NewClient(ClientConfig{Addr: addr, ID: "closing", Clock: clk, ManualRefresh: true})
	if err != nil {
		t.Fatal(err)
	}
	r := mustResource(t, c, "r", ResourceConfig{Wants: 10, Mode: Pessimistic})
	refresh(t, c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Refresh(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Refresh after Close: %v, want ErrClosed", err)
	}
	if err := r.Release(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Release after Close: %v, want ErrClosed", err)
	}
}
