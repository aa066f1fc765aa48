package etcdelection_test

import (
	"context"
	"math"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-rpc/sluice/internal/testkit/etcdtest"
	"github.com/sluice-rpc/sluice/internal/testkit/leasetest"
	"github.com/sluice-rpc/sluice/internal/testkit/servetest"
	"github.com/sluice-rpc/sluice/internal/testkit/testnet"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
	"github.com/sluice-rpc/sluice/leasing/server"
	"github.com/sluice-rpc/sluice/leasing/server/etcdelection"
)

// The tests shorten the session TTL to 2 s and the lease to 3 s, renewed
// every second, so that a failover and a learning period take seconds.
// etcdtest's etcd grants a TTL of 1 s, but etcd's client renews a
// session's lease every 500 ms at most often and ends the session when a
// TTL passes without an answer: with 1 s, half a second's stall on a
// loaded machine would move the mastership in the middle of a test.
// TestPartitionedMasterStopsServing, whose wait is the TTL itself and
// which has a master for a moment only before it cuts it off, takes 1 s.
const (
	testTTL   = 2 * time.Second
	cutTTL    = time.Second
	lease     = 3
	capacity  = 100
	electKey  = "/doorman/test"
	pollEvery = 10 * time.Millisecond
)

func repo() *server.Repository {
	return &server.Repository{Resources: []server.Template{{
		IdentifierGlob: "r",
		Capacity:       capacity,
		// Learning mode lasts the lease length (3 s): the default.
		Algorithm: server.Algorithm{Kind: server.FairShare, LeaseLength: lease, RefreshInterval: 1},
	}}}
}

// startRepo is repo without learning mode, the servers' configuration when
// they start. A node started afresh has no leases out to learn: its first
// master's learning mode would only hold back the first grants for the
// lease length. Before a failover a test gives the servers repo()
// (learnOnWin), so that the new master learns the leases its predecessor
// granted, as by default.
func startRepo() *server.Repository {
	r := repo()
	none := int64(0)
	r.Resources[0].Algorithm.LearningModeDuration = &none
	return r
}

// learnOnWin gives ns repo(): a server that wins from now on is in
// learning mode for the lease length. It shortens no learning mode
// already running (see Server.SetRepository).
func learnOnWin(t *testing.T, ns []*node) {
	t.Helper()
	for _, n := range ns {
		if err := n.s.SetRepository(repo()); err != nil {
			t.Fatal(err)
		}
	}
}

// node is one server of the node under test, with its election.
type node struct {
	s    *server.Server
	el   *etcdelection.Election
	addr string
	done chan struct{}
	once sync.Once

	mu      sync.Mutex
	changes []change // every change of mastership, from OnMastership
}

// change is a change of mastership and when the server reported it.
type change struct {
	at time.Time
	m  server.Mastership
}

// changed returns when the server first reported, after since, a
// mastership for which want holds (the zero time if it has not).
func (n *node) changed(since time.Time, want func(server.Mastership) bool) time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range n.changes {
		if !c.at.Before(since) && want(c.m) {
			return c.at
		}
	}
	return time.Time{}
}

func isMaster(m server.Mastership) bool  { return m.IsMaster }
func notMaster(m server.Mastership) bool { return !m.IsMaster }

// startNode starts a server campaigning through etcd at endpoint; it stops
// at the end of the test (or earlier with stop).
func startNode(t *testing.T, endpoint string) *node {
	t.Helper()
	return startNodeTTL(t, endpoint, testTTL)
}

// startNodeTTL is startNode with a session TTL of ttl.
func startNodeTTL(t *testing.T, endpoint string, ttl time.Duration) *node {
	t.Helper()
	return startElected(t, endpoint, electKey, ttl, server.Config{Repository: startRepo()})
}

// startElected starts a server of cfg campaigning on key through etcd at
// endpoint with a session TTL of ttl, recording its mastership changes; it
// stops at the end of the test (or earlier with stop).
func startElected(t *testing.T, endpoint, key string, ttl time.Duration, cfg server.Config) *node {
	t.Helper()
	el, err := etcdelection.New(etcdelection.Config{Endpoints: []string{endpoint}, Key: key, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &node{el: el, addr: lis.Addr().String(), done: make(chan struct{})}
	cfg.Election, cfg.Address = el, n.addr
	// Called after the server has applied the change: a loss is recorded
	// after the server stopped serving, a win after it began.
	cfg.OnMastership = func(m server.Mastership) {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.changes = append(n.changes, change{time.Now(), m})
	}
	if n.s, err = server.New(cfg); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(n.done)
		n.s.Serve(lis)
	}()
	t.Cleanup(func() { n.stop(t) })
	return n
}

func (n *node) stop(t *testing.T) {
	n.once.Do(func() {
		n.s.Stop()
		testwait.Recv(t, n.done, "Serve to return")
		if err := n.el.Close(); err != nil {
			t.Errorf("closing the election: %v", err)
		}
	})
}

// master waits for exactly one of ns to be master and every other to know
// its address, and returns it.
func master(t *testing.T, ns []*node) *node {
	t.Helper()
	var m *node
	testwait.Until(t, "one master, known to all", func() bool {
		m = nil
		for _, n := range ns {
			if n.s.Mastership().IsMaster {
				if m != nil {
					return false
				}
				m = n
			}
		}
		if m == nil {
			return false
		}
		for _, n := range ns {
			if n.s.Mastership().Master != m.addr {
				return false
			}
		}
		return true
	})
	return m
}

type client = leasetest.Client

func newClient(t *testing.T, addr, id string, wants float64) *client {
	return leasetest.NewClient(t, addr, id, "r", wants, 500*time.Millisecond)
}

func total(cs []*client) float64 { return leasetest.Total(cs) }

func fair(cs []*client, share float64) bool {
	for _, c := range cs {
		if math.Abs(c.Has()-share) > 0.01 {
			return false
		}
	}
	return true
}

func others(ns []*node, not *node) []*node {
	var out []*node
	for _, n := range ns {
		if n != not {
			out = append(out, n)
		}
	}
	return out
}

// Three servers on embedded etcd: one master, clients sent to the others
// are redirected to it; when the master stops, mastership moves within a
// few seconds, the new master relearns the leases in learning mode
// (clients keep what they had) and after learning the clients' total
// never exceeds the capacity.
func TestThreeServersFailover(t *testing.T) {
	t.Parallel() // each has its own etcd process and servers; most of its time is waiting on TTLs
	et := etcdtest.Start(t)
	ns := []*node{startNode(t, et.Endpoint), startNode(t, et.Endpoint), startNode(t, et.Endpoint)}
	m := master(t, ns)
	rest := others(ns, m)
	// Each client is given a server that is not the master: Discovery
	// redirects it.
	cs := []*client{newClient(t, rest[0].addr, "c0", 50), newClient(t, rest[1].addr, "c1", 50), newClient(t, rest[0].addr, "c2", 50)}
	share := float64(capacity) / 3
	testwait.Until(t, "the clients to get a fair share from the master", func() bool { return fair(cs, share) })
	if _, clients, _ := m.s.Counts(); clients != 3 {
		t.Fatalf("the master has %d clients, want all 3", clients)
	}
	for _, n := range rest {
		if r, cl, l := n.s.Counts(); r+cl+l != 0 {
			t.Fatalf("non-master %s holds state: %d resources, %d clients, %d leases", n.addr, r, cl, l)
		}
	}

	learnOnWin(t, ns)
	// Kill the master (it resigns as it stops).
	killed := time.Now()
	m.stop(t)
	m2 := master(t, rest)
	failover := time.Since(killed)
	// Mastership() says a win as soon as the server applied it; the
	// recorder hears of it just after.
	testwait.Until(t, "the new master to report its win", func() bool { return !m2.changed(killed, isMaster).IsZero() })
	// It stepped down before it resigned, so before the new master won.
	if lost, won := m.changed(killed, notMaster), m2.changed(killed, isMaster); lost.IsZero() || !lost.Before(won) {
		t.Fatalf("the stopping master reported its loss %v after it stopped, the new master its win %v after: two masters at once",
			lost.Sub(killed), won.Sub(killed))
	}
	t.Logf("mastership moved from %s to %s in %v", m.addr, m2.addr, failover.Round(time.Millisecond))
	if failover > 2*testTTL {
		t.Fatalf("mastership took %v to move, more than two session TTLs", failover)
	}
	learnEnd := time.Now().Add(lease * time.Second)

	// In learning mode the new master hands back what clients have: no
	// client drops to 0, and nothing exceeds the capacity.
	var maxLearning, maxAfter float64
	minLearning := math.Inf(1)
	for time.Now().Before(learnEnd) {
		maxLearning = math.Max(maxLearning, total(cs))
		for _, c := range cs {
			minLearning = math.Min(minLearning, c.Has())
		}
		time.Sleep(pollEvery)
	}
	if math.Abs(minLearning-share) > 0.01 {
		t.Fatalf("in learning mode a client's lease fell to %v, want every client to keep its %v", minLearning, share)
	}
	if _, clients, _ := m2.s.Counts(); clients != 3 {
		t.Fatalf("after learning the new master knows %d clients, want the 3 it relearned", clients)
	}
	// After learning: the algorithm again; the clients' total stays within
	// the capacity. Change the wants so that the algorithm must act.
	if err := cs[0].R.SetWants(10); err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(3 * time.Second)
	for time.Now().Before(end) {
		maxAfter = math.Max(maxAfter, total(cs))
		time.Sleep(pollEvery)
	}
	t.Logf("clients' total: at most %.2f in learning mode, %.2f after, of %d", maxLearning, maxAfter, capacity)
	if maxLearning > capacity+1e-9 || maxAfter > capacity+1e-9 {
		t.Fatalf("the clients' total reached %.2f in learning mode and %.2f after, more than the capacity %d", maxLearning, maxAfter, capacity)
	}
	if got := []float64{cs[0].Has(), cs[1].Has(), cs[2].Has()}; math.Abs(got[0]-10) > 0.01 || math.Abs(got[1]-45) > 0.01 || math.Abs(got[2]-45) > 0.01 {
		t.Fatalf("after learning the split is %v, want [10 45 45]", got)
	}
}

// A master cut off from etcd (its connection goes through a proxy that
// stops) stops serving within the session TTL, and another server takes
// over; the former master then redirects.
func TestPartitionedMasterStopsServing(t *testing.T) {
	et := etcdtest.Start(t)
	px := testnet.StartProxy(t, strings.TrimPrefix(et.Endpoint, "http://"))

	// The first server, behind the proxy, becomes master; then two more.
	a := startNodeTTL(t, "http://"+px.Addr(), cutTTL)
	testwait.Until(t, "the first server to become master", func() bool { return a.s.Mastership().IsMaster })
	ns := []*node{a, startNodeTTL(t, et.Endpoint, cutTTL), startNodeTTL(t, et.Endpoint, cutTTL)}
	if m := master(t, ns); m != a {
		t.Fatalf("master is %s, want the first server %s", m.addr, a.addr)
	}
	c := newClient(t, ns[1].addr, "c", 30)
	testwait.Until(t, "the client to get its lease", func() bool { return c.Has() == 30 })

	learnOnWin(t, ns)
	cut := time.Now()
	px.Stop()
	// The times the servers reported the changes in OnMastership: the
	// former master's loss after it stopped serving, the new master's win
	// after it began, so that the two never overlap if the loss comes
	// first.
	var lost, won time.Time
	testwait.Until(t, "the former master to stop and another to take over", func() bool {
		lost = a.changed(cut, notMaster)
		won = time.Time{}
		for _, n := range ns[1:] {
			if w := n.changed(cut, isMaster); !w.IsZero() && (won.IsZero() || w.Before(won)) {
				won = w
			}
		}
		return !lost.IsZero() && !won.IsZero()
	})
	stopped, taken := lost.Sub(cut), won.Sub(cut)
	t.Logf("partitioned master stopped serving after %v; a new master took over after %v (TTL %v)",
		stopped.Round(time.Millisecond), taken.Round(time.Millisecond), cutTTL)
	// The bound is the TTL from the last renewal etcd acknowledged, sent
	// before the cut; 250 ms allow for scheduling.
	if stopped > cutTTL+250*time.Millisecond {
		t.Errorf("the partitioned master served for %v after the cut, more than the session TTL %v", stopped, cutTTL)
	}
	if !lost.Before(won) {
		t.Errorf("a new master took over after %v, before the former stopped (%v): two masters at once", taken, stopped)
	}
	// The former master no longer serves: it answers with the mastership
	// field alone, and Discovery says it is not the master.
	cc, err := grpc.NewClient(a.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	resp, err := pb.NewCapacityClient(cc).GetCapacity(t.Context(), &pb.GetCapacityRequest{ClientId: proto.String("probe"),
		Resource: []*pb.ResourceRequest{{ResourceId: proto.String("r"), Priority: proto.Int64(0), Wants: proto.Float64(1)}}})
	if err != nil || len(resp.Response) != 0 || resp.Mastership == nil {
		t.Fatalf("the former master answered GetCapacity with %v, %v; want only the mastership field", resp, err)
	}
	d, err := pb.NewCapacityClient(cc).Discovery(t.Context(), &pb.DiscoveryRequest{})
	if err != nil || d.GetIsMaster() {
		t.Fatalf("the former master answered Discovery with %v, %v; want is_master false", d, err)
	}
	if r, cl, l := a.s.Counts(); r+cl+l != 0 {
		t.Fatalf("the former master still holds %d resources, %d clients, %d leases", r, cl, l)
	}
	// The client redirected through a surviving server reaches the new
	// master.
	testwait.Until(t, "the client to hold a lease from the new master", func() bool { return c.Has() == 30 })
}

// An intermediate whose parent is an elected node finds the master
// through any of its servers and, when mastership moves, follows it: the
// new master relearns the intermediate's lease from its has, so the
// intermediate's client keeps its capacity throughout.
func TestIntermediateFollowsElectedParent(t *testing.T) {
	t.Parallel() // each has its own etcd process and servers; most of its time is waiting on TTLs
	et := etcdtest.Start(t)
	ns := []*node{startNode(t, et.Endpoint), startNode(t, et.Endpoint)}
	m := master(t, ns)
	follower := others(ns, m)[0]
	mid, err := server.New(server.Config{Parent: follower.addr, ID: "mid", ParentRPCTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, servetest.Start(t, mid, ""), "leaf", 30)
	testwait.Until(t, "the intermediate's client to get 30", func() bool { return c.Has() == 30 })
	if _, clients, _ := m.s.Counts(); clients != 1 {
		t.Fatalf("the master has %d clients, want the intermediate", clients)
	}

	learnOnWin(t, ns)
	m.stop(t)
	testwait.Until(t, "the follower to become master", func() bool { return follower.s.Mastership().IsMaster })
	// Through learning mode (the lease length) and a little after, the
	// client never loses its capacity.
	for end := time.Now().Add(lease*time.Second + time.Second); time.Now().Before(end); time.Sleep(pollEvery) {
		if got := c.Has(); got != 30 {
			t.Fatalf("after the failover the intermediate's client holds %v, want 30 throughout", got)
		}
	}
	if _, clients, _ := follower.s.Counts(); clients != 1 {
		t.Fatalf("the new master has %d clients, want the intermediate", clients)
	}
	if capacity, ok := parentLease(mid, "r"); !ok || capacity != 30 {
		t.Fatalf("the intermediate's lease from the new master is %v (ok %v), want 30", capacity, ok)
	}
}

// A master whose Run ends (its server stops) reports that it is no longer
// the master before it resigns: while its key is still in etcd, so before
// another server can win.
func TestRunReportsLossBeforeResigning(t *testing.T) {
	et := etcdtest.Start(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{et.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	el, err := etcdelection.New(etcdelection.Config{Client: cli, Key: electKey, TTL: testTTL})
	if err != nil {
		t.Fatal(err)
	}
	defer el.Close()
	keys := func() int64 {
		resp, err := cli.Get(t.Context(), electKey+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Errorf("reading the election's keys: %v", err)
			return -1
		}
		return resp.Count
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	won := make(chan struct{})
	var last server.Mastership
	keysAtLoss := int64(-1)
	ran := make(chan error, 1)
	go func() {
		ran <- el.Run(ctx, "self:1", func(m server.Mastership) {
			// Run reports from one goroutine at a time, and the test reads
			// last and keysAtLoss only after Run has returned.
			last = m
			if m.IsMaster {
				close(won)
			} else if ctx.Err() != nil {
				keysAtLoss = keys()
			}
		})
	}()
	testwait.Recv(t, won, "the campaign to win")
	cancel()
	if err := testwait.Recv(t, ran, "Run to return"); err != nil {
		t.Fatalf("Run returned %v after its context ended, want nil", err)
	}
	if last.IsMaster {
		t.Fatal("Run returned with the server last told it is the master")
	}
	if keysAtLoss != 1 {
		t.Fatalf("when the loss was reported the election had %d keys, want this server's 1 (not yet resigned)", keysAtLoss)
	}
	testwait.Until(t, "the key to go with the resignation", func() bool { return keys() == 0 })
}
