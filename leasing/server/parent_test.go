package server

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/testkit/slogtest"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
)

// originalNode emulates a server of the original Doorman as a parent:
// Discovery says whether it is the master (and who is); as master it
// hands each GetServerCapacity request to the test, which answers it as
// the original root does (per resource: gets, algorithm, safe_capacity;
// no mastership field); as non-master it answers with the mastership
// field alone.
type originalNode struct {
	pb.UnimplementedCapacityServer
	master string // empty: this node is the master
	self   string
	reqs   chan *pb.GetServerCapacityRequest
	answer chan *pb.GetServerCapacityResponse // nil response: fail the RPC
}

func startOriginalNode(t *testing.T, master string) *originalNode {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &originalNode{master: master, self: lis.Addr().String(),
		reqs: make(chan *pb.GetServerCapacityRequest), answer: make(chan *pb.GetServerCapacityResponse)}
	g := grpc.NewServer()
	pb.RegisterCapacityServer(g, n)
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Serve(lis)
	}()
	t.Cleanup(func() {
		g.Stop()
		testwait.Recv(t, done, "the emulated original server to stop")
	})
	return n
}

func (n *originalNode) Discovery(context.Context, *pb.DiscoveryRequest) (*pb.DiscoveryResponse, error) {
	if n.master != "" {
		return &pb.DiscoveryResponse{Mastership: &pb.Mastership{MasterAddress: proto.String(n.master)}, IsMaster: proto.Bool(false)}, nil
	}
	return &pb.DiscoveryResponse{Mastership: &pb.Mastership{MasterAddress: proto.String(n.self)}, IsMaster: proto.Bool(true)}, nil
}

func (n *originalNode) GetServerCapacity(ctx context.Context, req *pb.GetServerCapacityRequest) (*pb.GetServerCapacityResponse, error) {
	if n.master != "" {
		return &pb.GetServerCapacityResponse{Mastership: &pb.Mastership{MasterAddress: proto.String(n.master)}}, nil
	}
	select {
	case n.reqs <- req:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case resp := <-n.answer:
		if resp == nil {
			return nil, status.Error(codes.Unavailable, "emulated outage")
		}
		return resp, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// originalAnswer is the original root's answer for resource "r".
func originalAnswer(capacity float64, expiry, refresh int64, safe float64) *pb.GetServerCapacityResponse {
	return &pb.GetServerCapacityResponse{Response: []*pb.ServerCapacityResourceResponse{{
		ResourceId: proto.String("r"),
		Gets:       &pb.Lease{ExpiryTime: proto.Int64(expiry), RefreshInterval: proto.Int64(refresh), Capacity: proto.Float64(capacity)},
		Algorithm: &pb.Algorithm{Kind: pb.Algorithm_FAIR_SHARE.Enum(), LeaseLength: proto.Int64(60), RefreshInterval: proto.Int64(refresh),
			LearningModeDuration: proto.Int64(0)},
		SafeCapacity: proto.Float64(safe),
	}}}
}

func leaseOf(t *testing.T, c pb.CapacityClient, client string, wants float64) *pb.Lease {
	t.Helper()
	resp := askCapacity(t, c, client, wants, nil)
	if len(resp.Response) != 1 {
		t.Fatalf("GetCapacity answered %v", resp)
	}
	return resp.Response[0].GetGets()
}

// A Sluice intermediate under a parent node that behaves as the
// original's: it finds the master through Discovery's redirect, asks
// with the request shape the original root expects (server_id; per
// resource its clients' wants summed per priority band with their
// number, and its lease as has once it holds one), hands out at most its
// lease, never beyond its lease's expiry, with half the parent's refresh
// interval, refreshes at half the parent's interval, and after its lease
// is lost hands out the parent's safe capacity per client.
// startIntermediate starts an intermediate under root on a fake clock:
// cfg with root as its Parent, and "mid" as its ID unless cfg names one.
func startIntermediate(t *testing.T, root *originalNode, cfg Config) (*Server, pb.CapacityClient, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(testEpoch)
	cfg.Parent, cfg.Clock = root.self, clk
	if cfg.ID == "" {
		cfg.ID = "mid"
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, dial(t, startServer(t, s, "")), clk
}

// firstLease has client ask the intermediate s for wants of "r", answers
// its first request to root with answer, and waits until s holds the
// lease.
func firstLease(t *testing.T, s *Server, c pb.CapacityClient, root *originalNode, client string, wants float64, answer *pb.GetServerCapacityResponse) {
	t.Helper()
	leaseOf(t, c, client, wants)
	testwait.Recv(t, root.reqs, "the intermediate's first request")
	root.answer <- answer
	testwait.Until(t, "the lease", func() bool { _, _, ok := s.parentLease("r"); return ok })
}

func TestIntermediateUnderOriginalRoot(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	root := startOriginalNode(t, "")
	follower := startOriginalNode(t, root.self)
	s, err := New(Config{Parent: follower.self, ID: "mid-1", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, startServer(t, s, ""))
	now := clk.Now().Unix()

	// Before the parent answers: nothing to hand out, come back in 1 s.
	if l := leaseOf(t, c, "a", 40); l.GetCapacity() != 0 || l.GetRefreshInterval() != 1 {
		t.Fatalf("before the parent's answer a got %v, want 0 to be renewed in 1 s", l)
	}
	req := testwait.Recv(t, root.reqs, "the intermediate's first GetServerCapacity at the master")
	// Before its parent's first answer a Sluice intermediate reports its
	// clients' claims, none here, marked with a refresh interval of 0 (see
	// reconstructed); the original reads only has.capacity, and a missing
	// has as 0, so this is the original's "no has".
	if req.GetServerId() != "mid-1" || len(req.Resource) != 1 || req.Resource[0].GetResourceId() != "r" ||
		req.Resource[0].GetHas().GetCapacity() != 0 || !reconstructed(req.Resource[0].Has) {
		t.Fatalf("first request %v, want server_id mid-1 and resource r claiming nothing", req)
	}
	if b := req.Resource[0].Wants; len(b) != 1 || b[0].GetPriority() != 0 || b[0].GetNumClients() != 1 || b[0].GetWants() != 40 {
		t.Fatalf("first request's bands %v, want one band: priority 0, 1 client wanting 40", b)
	}
	root.answer <- originalAnswer(100, now+20, 10, 5)
	testwait.Until(t, "the intermediate to hold its lease", func() bool { _, _, ok := s.parentLease("r"); return ok })

	// Within the lease: at most the leased 100, expiring with it, renewed
	// at half the parent's interval.
	if l := leaseOf(t, c, "a", 40); l.GetCapacity() != 40 || l.GetExpiryTime() != now+20 || l.GetRefreshInterval() != 5 {
		t.Fatalf("a got %v, want 40 until the parent lease's expiry %d, refresh 5", l, now+20)
	}
	if l := leaseOf(t, c, "b", 100); l.GetCapacity() != 60 {
		t.Fatalf("b got %v, want the 60 left of the lease of 100", l.GetCapacity())
	}
	resp := askCapacity(t, c, "b", 100, nil)
	if safe := resp.Response[0].GetSafeCapacity(); safe != 5 {
		t.Fatalf("the intermediate passes on safe_capacity %v, want the parent's 5", safe)
	}

	// The next refresh comes at half the parent's refresh interval, with
	// both clients in one band and the lease as has.
	testwait.Timers(t, clk, 1)
	clk.Add(5 * time.Second)
	req = testwait.Recv(t, root.reqs, "the intermediate's refresh after 5 s")
	r0 := req.Resource[0]
	if b := r0.Wants; len(b) != 1 || b[0].GetNumClients() != 2 || b[0].GetWants() != 140 {
		t.Fatalf("refresh bands %v, want one band of 2 clients wanting 140", b)
	}
	if h := r0.GetHas(); h == nil || h.GetCapacity() != 100 || h.GetExpiryTime() != now+20 {
		t.Fatalf("refresh has %v, want the lease: 100 until %d", h, now+20)
	}
	// The parent cuts the lease to 50: b holds 60, so a gets nothing more
	// until b has given some back.
	root.answer <- originalAnswer(50, now+25, 10, 5)
	testwait.Until(t, "the cut lease", func() bool { v, _, _ := s.parentLease("r"); return v == 50 })
	if l := leaseOf(t, c, "a", 40); l.GetCapacity() != 0 {
		t.Fatalf("after the cut a got %v, want 0 while b holds 60 of 50", l.GetCapacity())
	}
	if l := leaseOf(t, c, "b", 100); l.GetCapacity() != 25 {
		t.Fatalf("after the cut b got %v, want its fair share of 50, 25", l.GetCapacity())
	}
	if l := leaseOf(t, c, "a", 40); l.GetCapacity() != 25 {
		t.Fatalf("after b's renewal a got %v, want its fair share, 25", l.GetCapacity())
	}

	// The parent goes down: the refresh fails, the lease runs out, and the
	// intermediate hands out the safe capacity, 5 per client, in leases
	// that outlast the client's next renewal, 5 s later.
	testwait.Timers(t, clk, 1)
	clk.Add(5 * time.Second)
	testwait.Recv(t, root.reqs, "the intermediate's next refresh")
	root.answer <- nil
	// It retries at once on a fresh connection (the failure may have
	// been a stale one), and fails again.
	testwait.Recv(t, root.reqs, "the intermediate's retry")
	root.answer <- nil
	testwait.Until(t, "the failed refresh to be recorded", func() bool { p, _ := s.parentStatus(); return p.LastError != nil })
	clk.Add(20 * time.Second) // past the lease's expiry, now+25
	now = clk.Now().Unix()
	if l := leaseOf(t, c, "a", 40); l.GetCapacity() != 5 || l.GetRefreshInterval() != 5 || l.GetExpiryTime() != now+11 {
		t.Fatalf("in safe mode a got %v, want the safe 5 until %d, renewed in 5 s", l, now+11)
	}
}

// The root counts what an intermediate says it has handed out (has) as
// held until the intermediate says less, never more than it granted
// before: the capacity it takes back is not granted elsewhere while the
// intermediate's clients still hold it.
func TestRootCountsIntermediateClaims(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	s := newTestServer(t, testConfig(FairShare, 300), clk)
	band := func(n int64, wants float64) []*pb.PriorityBandAggregate {
		return []*pb.PriorityBandAggregate{{Priority: proto.Int64(1), NumClients: proto.Int64(n), Wants: proto.Float64(wants)}}
	}
	has := func(v float64) *pb.Lease {
		return &pb.Lease{ExpiryTime: proto.Int64(clk.Now().Unix() + 60), RefreshInterval: proto.Int64(15), Capacity: proto.Float64(v)}
	}
	ask := func(server string, wants float64, has *pb.Lease) float64 {
		t.Helper()
		resp, err := s.getServerCapacity(context.Background(), &pb.GetServerCapacityRequest{ServerId: proto.String(server),
			Resource: []*pb.ServerCapacityResourceRequest{{ResourceId: proto.String("r"), Has: has, Wants: band(2, wants)}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Response[0].GetGets().GetCapacity()
	}
	if got := ask("i1", 280, nil); got != 280 {
		t.Fatalf("i1 got %v, want 280", got)
	}
	if got := ask("i2", 300, nil); got != 20 {
		t.Fatalf("i2 got %v, want the 20 left", got)
	}
	// i1 is cut to its fair share, 150, but says its clients hold 280.
	if got := ask("i1", 280, has(280)); got != 150 {
		t.Fatalf("i1 got %v, want its fair share 150", got)
	}
	if got := ask("i2", 300, has(20)); got != 20 {
		t.Fatalf("i2 got %v while i1's clients hold 280, want 20", got)
	}
	// i1's clients gave back: it says 150.
	if got := ask("i1", 280, has(150)); got != 150 {
		t.Fatalf("i1 got %v, want 150", got)
	}
	if got := ask("i2", 300, has(20)); got != 150 {
		t.Fatalf("i2 got %v once i1 holds 150, want 150", got)
	}
	// A claim beyond what was granted counts for no more than the grant.
	if got := ask("i1", 280, has(1e9)); got != 150 {
		t.Fatalf("i1 claiming 1e9 got %v, want 150", got)
	}
	if got := ask("i2", 300, has(150)); got != 150 {
		t.Fatalf("i2 got %v after i1's inflated claim, want 150", got)
	}
}

// After its lease is lost, an intermediate whose parent sent a negative
// safe capacity (unlimited) hands each client what it wants; one whose
// parent sent none hands out nothing.
func TestIntermediateSafeModeUnlimitedAndNone(t *testing.T) {
	for _, tt := range []struct {
		name   string
		safe   *float64
		aWants float64
		want   float64
	}{
		{"unlimited", proto.Float64(-1), 40, 40},
		{"none", nil, 40, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := startOriginalNode(t, "")
			s, c, clk := startIntermediate(t, root, Config{})
			now := clk.Now().Unix()
			leaseOf(t, c, "a", tt.aWants)
			testwait.Recv(t, root.reqs, "the intermediate's first request")
			answer := originalAnswer(100, now+10, 4, 0)
			answer.Response[0].SafeCapacity = tt.safe
			root.answer <- answer
			testwait.Until(t, "the lease", func() bool { _, _, ok := s.parentLease("r"); return ok })
			clk.Add(11 * time.Second) // the lease is lost; the parent's answers stay unread
			if l := leaseOf(t, c, "a", tt.aWants); l.GetCapacity() != tt.want {
				t.Fatalf("in safe mode a got %v, want %v", l.GetCapacity(), tt.want)
			}
		})
	}
}

// An intermediate renews well within its lease, whose expiry cuts its
// clients' leases: at half the parent's refresh interval even when that
// is 1 s (not rounded up to a whole second), and after a failed refresh
// (such as one landing while the parent node's mastership moves) again
// within parentMinBackoff, not a second later, by when a client renewing
// meanwhile would have been handed a lease ending before its next
// renewal. The test ticks the link itself and reads when each round
// sets the next: a loop on its own may ask once more at once for a
// resource its round has just asked for (see tickParent), a round this
// test would take for the next.
func TestIntermediateRenewsWithinItsLease(t *testing.T) {
	root, s, d, clk := drivenIntermediateWithResource(t)
	c := dial(t, startServer(t, s, ""))
	now := clk.Now().Unix()
	tick := func() <-chan time.Time {
		done := make(chan time.Time, 1)
		go func() { done <- d.Tick(context.Background()) }()
		return done
	}
	round := tick()
	testwait.Recv(t, root.reqs, "the first request")
	root.answer <- originalAnswer(100, now+3, 1, 100)
	if next, want := testwait.Recv(t, round, "the first round"), clk.Now().Add(500*time.Millisecond); !next.Equal(want) {
		t.Fatalf("the next round is at %v, want half the parent's 1 s interval later, %v", next, want)
	}

	clk.Add(500 * time.Millisecond)
	round = tick()
	testwait.Recv(t, root.reqs, "the refresh at half the parent's 1 s interval")
	root.answer <- nil
	testwait.Recv(t, root.reqs, "the immediate retry on a fresh connection")
	root.answer <- nil
	next := testwait.Recv(t, round, "the failed round")
	if p, _ := s.parentStatus(); p.LastError == nil {
		t.Fatal("the failed refresh was not recorded")
	}
	if wait := next.Sub(clk.Now()); wait > parentMinBackoff {
		t.Fatalf("after a failed refresh the next round is %v later, want at most parentMinBackoff (%v)", wait, parentMinBackoff)
	}

	clk.Add(next.Sub(clk.Now()))
	round = tick()
	req := testwait.Recv(t, root.reqs, "the retry after the backoff")
	if h := req.Resource[0].GetHas(); h.GetCapacity() != 100 || h.GetExpiryTime() != now+3 {
		t.Fatalf("the retry's has is %v, want the lease still held: 100 until %d", h, now+3)
	}
	root.answer <- originalAnswer(100, now+4, 1, 100)
	testwait.Recv(t, round, "the retry's round")
	if _, e, _ := s.parentLease("r"); e.Unix() != now+4 {
		t.Fatalf("the parent lease ends at %v, want the renewed %d", e.Unix(), now+4)
	}
	if l := leaseOf(t, c, "a", 30); l.GetCapacity() != 30 || l.GetExpiryTime() != now+4 {
		t.Fatalf("a got %v, want 30 until the renewed lease's expiry %d", l, now+4)
	}
}

// drivenIntermediateWithResource starts an intermediate under an
// original root whose parent link the test ticks (driveParent), on a fake
// clock, and has a client create resource "r" on it, which wakes the
// link.
func drivenIntermediateWithResource(t *testing.T) (*originalNode, *Server, parentDriver, *clock.Fake) {
	t.Helper()
	root := startOriginalNode(t, "")
	clk := clock.NewFake(testEpoch)
	s, err := New(Config{Parent: root.self, ID: "mid", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.driveParent(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, startServer(t, s, ""))
	leaseOf(t, c, "a", 30)
	return root, s, d, clk
}

// A round answers the wake-ups that came before it: the first client of
// a resource wakes the refresh loop, and when the loop's first round was
// already on its way (it started after the resource appeared) that round
// asks for it. The wake-up left pending would start a second round at
// once, asking the parent again for what it has just answered; once
// behind the loop's timer it is what made this package's tests wait on a
// round that was not due (a flake seen in CI).
func TestIntermediateRoundAnswersEarlierWake(t *testing.T) {
	root, _, d, clk := drivenIntermediateWithResource(t)
	now := clk.Now().Unix()
	done := make(chan time.Time)
	go func() { done <- d.Tick(context.Background()) }()
	if req := testwait.Recv(t, root.reqs, "the round's request"); len(req.Resource) != 1 || req.Resource[0].GetResourceId() != "r" {
		t.Fatalf("the round asked for %v, want r", req.Resource)
	}
	root.answer <- originalAnswer(100, now+20, 10, 5)
	if next := testwait.Recv(t, done, "the round to end"); !next.Equal(clk.Now().Add(5 * time.Second)) {
		t.Fatalf("the next round is at %v, want half the parent's 10 s interval from now", next)
	}
	if d.Woken() {
		t.Fatal("the wake-up from before the round is still pending: the loop would ask the parent again at once")
	}
}

// A wake-up that arrives during a round for a change made before the
// round looked at the resources is answered by that round too: a client's
// request records its new resource and only then wakes the loop, and a
// round can fall in between (a flake under load: the extra round took the
// request a test meant for the next). A change made during the round
// still starts another. The changes are made by hand here, to place the
// wake-up within the round.
func TestIntermediateRoundAnswersWakeOfChangeBeforeIt(t *testing.T) {
	root, s, d, clk := drivenIntermediateWithResource(t)
	now := clk.Now().Unix()
	round := func(during func()) {
		t.Helper()
		done := make(chan time.Time)
		go func() { done <- d.Tick(context.Background()) }()
		testwait.Recv(t, root.reqs, "the round's request")
		during()
		root.answer <- originalAnswer(100, now+20, 10, 5)
		testwait.Recv(t, done, "the round to end")
	}
	s.parent.changes.Add(1) // a change made before the round, its wake-up still to come
	round(func() { s.parent.wake <- struct{}{} })
	if d.Woken() {
		t.Fatal("the wake-up of a change made before the round starts another round")
	}
	round(s.pokeParent)
	if !d.Woken() {
		t.Fatal("a change made during the round does not start another round")
	}
}

// An intermediate in learning mode whose parent has not answered yet (it
// has just started, or just won its node's mastership) echoes what its
// clients say they have, as a root does, rather than handing out 0 until
// the parent answers (forever, if the parent is unreachable), and its
// first request tells the parent it has their sum.
func TestIntermediateLearnsBeforeParentAnswers(t *testing.T) {
	root := startOriginalNode(t, "")
	s, c, clk := startIntermediate(t, root, Config{})
	now := clk.Now().Unix()
	claim := func(v float64) *pb.Lease {
		return &pb.Lease{ExpiryTime: proto.Int64(now + 20), RefreshInterval: proto.Int64(5), Capacity: proto.Float64(v)}
	}
	l := askCapacity(t, c, "a", 40, claim(30)).Response[0].GetGets()
	if l.GetCapacity() != 30 || l.GetRefreshInterval() != 1 {
		t.Fatalf("before the parent's answer a claiming 30 got %v, want its claim echoed, to be renewed in 1 s", l)
	}
	req := testwait.Recv(t, root.reqs, "the intermediate's first request")
	if h := req.Resource[0].GetHas(); h.GetCapacity() != 30 {
		t.Fatalf("the first request's has is %v, want the 30 echoed to the clients", h)
	}
	// The parent stays silent: the intermediate keeps echoing claims.
	if l := askCapacity(t, c, "b", 40, claim(25)).Response[0].GetGets(); l.GetCapacity() != 25 {
		t.Fatalf("before the parent's answer b claiming 25 got %v, want 25", l)
	}
	root.answer <- originalAnswer(100, now+20, 10, 5)
	testwait.Until(t, "the intermediate to hold its lease", func() bool { _, _, ok := s.parentLease("r"); return ok })
	if l := leaseOf(t, c, "a", 40); l.GetCapacity() != 40 || l.GetExpiryTime() != now+20 {
		t.Fatalf("after the parent's answer a got %v, want 40 until %d", l, now+20)
	}
}

// In safe mode an intermediate's leases last past the client's next
// renewal, however late in a second the client asked: expiries are whole
// seconds, and a lease of one refresh interval would end up to a second
// before the renewal it asks for, leaving the client nothing meanwhile.
func TestIntermediateSafeModeLeaseCoversRenewal(t *testing.T) {
	root := startOriginalNode(t, "")
	s, c, clk := startIntermediate(t, root, Config{})
	now := clk.Now().Unix()
	firstLease(t, s, c, root, "a", 40, originalAnswer(100, now+10, 4, 5))
	clk.Add(11*time.Second + 900*time.Millisecond) // the lease is lost; the parent's answers stay unread
	for range 3 {
		asked := clk.Now()
		l := leaseOf(t, c, "a", 40)
		if l.GetCapacity() != 5 {
			t.Fatalf("in safe mode a got %v, want the safe 5", l.GetCapacity())
		}
		renewal := asked.Add(time.Duration(l.GetRefreshInterval()) * time.Second)
		if expiry := time.Unix(l.GetExpiryTime(), 0); !expiry.After(renewal) {
			t.Fatalf("in safe mode a, asking at %v, got a lease ending at %v, not after its renewal at %v", asked, expiry, renewal)
		}
		clk.Add(renewal.Sub(clk.Now())) // the client renews on time
	}
}

// answerAll answers every resource of req as the original root does,
// leasing it capacity until expiry, to be refreshed every refresh
// seconds.
func answerAll(req *pb.GetServerCapacityRequest, capacity float64, expiry, refresh int64) *pb.GetServerCapacityResponse {
	resp := &pb.GetServerCapacityResponse{}
	for _, rr := range req.GetResource() {
		a := originalAnswer(capacity, expiry, refresh, 1).Response[0]
		a.ResourceId = proto.String(rr.GetResourceId())
		resp.Response = append(resp.Response, a)
	}
	return resp
}

// A failed batch of a refresh (one request per 1000 resources) does not
// stop the round: the other batches are sent and applied, the error names
// the failed batch, and the server logs once at Warn when refreshes start
// failing and once at Info when they succeed again.
func TestIntermediateRefreshCarriesOnPastFailedBatch(t *testing.T) {
	root := startOriginalNode(t, "")
	var log slogtest.Lines
	s, c, clk := startIntermediate(t, root, Config{Logger: log.Logger()})
	now := clk.Now().Unix()
	ids := make([]string, DefaultMaxResourcesPerRequest+1)
	for i := range ids {
		ids[i] = fmt.Sprintf("r%04d", i)
	}
	for _, part := range [][]string{ids[:DefaultMaxResourcesPerRequest], ids[DefaultMaxResourcesPerRequest:]} {
		req := &pb.GetCapacityRequest{ClientId: proto.String("a")}
		for _, id := range part {
			req.Resource = append(req.Resource, &pb.ResourceRequest{ResourceId: proto.String(id), Priority: proto.Int64(0), Wants: proto.Float64(1)})
		}
		if _, err := c.GetCapacity(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	leasedUntil := func(expiry int64, ids ...string) bool {
		for _, id := range ids {
			if _, e, ok := s.parentLease(id); !ok || e.Unix() != expiry {
				return false
			}
		}
		return true
	}
	// The first rounds (sent as resources appeared) lease them all.
	testwait.Until(t, "every resource to be leased", func() bool {
		select {
		case req := <-root.reqs:
			root.answer <- answerAll(req, 1, now+20, 10)
		default:
		}
		return leasedUntil(now+20, ids...)
	})
	if p, _ := s.parentStatus(); p.LastError != nil {
		t.Fatalf("after the first rounds LastError is %v, want nil", p.LastError)
	}

	// The next round: the first batch fails (and its retry), the second
	// is still sent and applied.
	testwait.Timers(t, clk, 1)
	clk.Add(5 * time.Second)
	req := testwait.Recv(t, root.reqs, "the round's first batch")
	if n := len(req.Resource); n != DefaultMaxResourcesPerRequest {
		t.Fatalf("the first batch has %d resources, want %d", n, DefaultMaxResourcesPerRequest)
	}
	root.answer <- nil
	testwait.Recv(t, root.reqs, "the first batch's retry")
	root.answer <- nil
	req = testwait.Recv(t, root.reqs, "the round's second batch, after the first failed")
	if n := len(req.Resource); n != 1 || req.Resource[0].GetResourceId() != ids[len(ids)-1] {
		t.Fatalf("the second batch is %v, want the last resource alone", req.Resource)
	}
	root.answer <- answerAll(req, 1, now+25, 10)
	testwait.Until(t, "the second batch's lease and the first's error", func() bool {
		p, _ := s.parentStatus()
		return leasedUntil(now+25, ids[len(ids)-1]) && p.LastError != nil
	})
	if p, _ := s.parentStatus(); !containsAll(p.LastError.Error(), `batch 1 of 2 (1000 resources, "r0000" to "r0999")`, "emulated outage") {
		t.Fatalf("LastError is %q, want it to name the failed batch and its error", p.LastError)
	}
	if !leasedUntil(now+20, ids[:DefaultMaxResourcesPerRequest]...) {
		t.Fatal("the failed batch's resources changed lease")
	}

	// The failed batch is retried after the backoff, and succeeds. The
	// clock moves a parentMinBackoff at a time, and only while the loop
	// waits on its timer: on a loaded machine a batch can time out and
	// count as a second failure, doubling the backoff (its length is
	// TestTickBacksOffAfterAFailure's to check).
	testwait.Until(t, "the retried round's first batch", func() bool {
		select {
		case req := <-root.reqs:
			root.answer <- answerAll(req, 1, now+25, 10)
			return true
		default:
		}
		if clk.Timers() == 1 {
			clk.Add(parentMinBackoff)
		}
		return false
	})
	req = testwait.Recv(t, root.reqs, "the retried round's second batch")
	root.answer <- answerAll(req, 1, now+25, 10)
	testwait.Until(t, "the recovery", func() bool {
		p, _ := s.parentStatus()
		return leasedUntil(now+25, ids...) && p.LastError == nil
	})
	const failed, again = "WARN doorman server: refreshing leases from the parent failed", "INFO doorman server: refreshing leases from the parent works again"
	testwait.Until(t, "the recovery to be logged", func() bool { return log.Count(again) >= 1 })
	if log.Count(failed) != 1 || log.Count("batch 1 of 2") != 1 || log.Count(again) != 1 {
		t.Fatalf("the log:\n%s\nwant the failure (naming batch 1 of 2) once, then the recovery once", log.String())
	}
}

// constSource is a random source whose every draw is the same.
type constSource uint64

func (c constSource) Uint64() uint64 { return uint64(c) }

// After failed refreshes an intermediate waits parentMinBackoff doubled
// per failure, at most parentMaxBackoff, each wait drawn from the upper
// half of that (so the intermediates of a parent that went down come back
// apart), and sends nothing meanwhile however often it is woken. The
// draws come from Config.Rand: the lowest waits exactly half the
// ceiling, the highest just under it, and any draw in between.
func TestTickBacksOffAfterAFailure(t *testing.T) {
	for _, tt := range []struct {
		name  string
		src   rand.Source
		check func(wait, ceiling time.Duration) bool
	}{
		{"lowest draw", constSource(0), func(w, c time.Duration) bool { return w == c/2 }},
		{"highest draw", constSource(math.MaxUint64), func(w, c time.Duration) bool { return w >= c-time.Microsecond && w < c }},
		{"seeded draws", rand.NewPCG(1, 2), func(w, c time.Duration) bool { return w >= c/2 && w < c }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(testEpoch)
			parent := &parentConn{capacity: 100, clk: clk, err: status.Error(codes.Unavailable, "parent down")}
			s := startManualIntermediate(t, Config{Repository: testConfig(FairShare, 0), Clock: clk, ID: "dc", Rand: rand.New(tt.src).Float64}, parent)
			ask(t, s, "c1", 50)
			ctx := context.Background()
			for n := 1; n <= 9; n++ {
				ceiling := min(parentMinBackoff<<(n-1), parentMaxBackoff)
				sent := len(parent.reqs)
				now := clk.Now()
				next := s.tickParent(ctx)
				if len(parent.reqs) == sent {
					t.Fatalf("failure %d: the tick sent nothing", n)
				}
				if wait := next.Sub(now); !tt.check(wait, ceiling) {
					t.Fatalf("failure %d: the tick waits %v, want in [%v, %v) as the draw says", n, wait, ceiling/2, ceiling)
				}
				sent = len(parent.reqs)
				clk.Add(next.Sub(now) / 2)
				if again := s.tickParent(ctx); !again.Equal(next) || len(parent.reqs) != sent {
					t.Fatalf("failure %d: woken during the backoff, the tick sent %d requests and waits until %v, want none and %v",
						n, len(parent.reqs)-sent, again, next)
				}
				clk.Add(next.Sub(clk.Now()))
			}
		})
	}
}

// A configuration reload takes effect on an intermediate at the parent's
// next answer: what the parent does not send (here the algorithm, so the
// lease length) comes from the new configuration, not the one the
// resource was first matched against.
func TestIntermediateReloadAppliesAtParentAnswer(t *testing.T) {
	root := startOriginalNode(t, "")
	repo := func(leaseLength int64) *Repository {
		r := testConfig(FairShare, 1)
		r.Resources[0].Algorithm.LeaseLength = leaseLength
		return r
	}
	s, c, clk := startIntermediate(t, root, Config{Repository: repo(60)})
	now := clk.Now().Unix()
	answer := func(expiry int64) *pb.GetServerCapacityResponse {
		a := originalAnswer(100, expiry, 10, 5)
		a.Response[0].Algorithm = nil // as a parent that sends none
		return a
	}
	firstLease(t, s, c, root, "a", 40, answer(now+1000))
	if l := leaseOf(t, c, "a", 40); l.GetExpiryTime() != now+60 {
		t.Fatalf("a got %v, want a lease of the configured 60 s, until %d", l, now+60)
	}

	if err := s.SetRepository(repo(30)); err != nil {
		t.Fatal(err)
	}
	testwait.Timers(t, clk, 1)
	clk.Add(5 * time.Second)
	testwait.Recv(t, root.reqs, "the refresh after the reload")
	root.answer <- answer(now + 1001)
	testwait.Until(t, "the renewed lease", func() bool { _, e, _ := s.parentLease("r"); return e.Unix() == now+1001 })
	now = clk.Now().Unix()
	if l := leaseOf(t, c, "a", 40); l.GetExpiryTime() != now+30 {
		t.Fatalf("after the reload a got %v, want a lease of the reloaded 30 s, until %d", l, now+30)
	}
}

// An intermediate's leases cut at its own lease's expiry share one expiry
// list, however much of its lease is left when each is granted (one list
// per remaining length would make renewals scan many), and still expire
// in order.
func TestIntermediateCutLeasesShareOneExpiryList(t *testing.T) {
	root := startOriginalNode(t, "")
	s, c, clk := startIntermediate(t, root, Config{})
	now := clk.Now().Unix()
	firstLease(t, s, c, root, "c0", 1, originalAnswer(100, now+30, 60, 5))
	lists := func() int {
		r := s.lookup("r")
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.tab.lists)
	}
	for i := range 15 {
		if l := leaseOf(t, c, clientName(i), 1); l.GetExpiryTime() != now+30 {
			t.Fatalf("client %d got %v, want a lease cut at the intermediate's expiry %d", i, l, now+30)
		}
		clk.Add(time.Second)
	}
	if n := lists(); n != 1 {
		t.Fatalf("15 leases cut at one expiry, granted a second apart, are in %d expiry lists, want 1", n)
	}
	// They expire together with the intermediate's lease; a renewal after
	// it (the parent silent: safe mode, leases of their own length) finds
	// and drops them.
	clk.Add(20 * time.Second)
	leaseOf(t, c, "late", 1)
	if r := s.lookup("r"); func() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.leases) }() != 1 {
		t.Fatal("the expired cut leases were not dropped at the next request")
	}
}
