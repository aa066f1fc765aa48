package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-rpc/sluice/clock"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
)

// askAsServer sends one GetServerCapacity for resource "r" on behalf of
// subclients clients wanting wants in all, with has (nil for none), and
// returns the lease granted.
func askAsServer(t *testing.T, s *Server, id string, wants float64, subclients int64, has *pb.Lease) *pb.Lease {
	t.Helper()
	resp, err := s.getServerCapacity(context.Background(), &pb.GetServerCapacityRequest{
		ServerId: proto.String(id),
		Resource: []*pb.ServerCapacityResourceRequest{{
			ResourceId: proto.String("r"),
			Has:        has,
			Wants: []*pb.PriorityBandAggregate{{Priority: proto.Int64(0), NumClients: proto.Int64(subclients),
				Wants: proto.Float64(wants)}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetResponse()) != 1 {
		t.Fatalf("GetServerCapacity answered %v", resp)
	}
	return resp.GetResponse()[0].GetGets()
}

// An intermediate that restarts (or whose node's new master takes over)
// knows only the clients that have come back to it: its first request
// reports their few wants and subclients, and a has that is not the lease
// the parent granted. Its other clients still hold leases of that grant
// until it ends. The parent grants and counts the restarted server at
// least its old grant until then, so that it hands that part to no one
// else; afterwards the split follows the wants again. Were the restarted
// server given its small fair share at once and its sibling the rest, the
// clients' total would overshoot capacity until the old leases ended (see
// sluice-lab sim doorman --scenario tree-mishaps).
func TestRestartedIntermediateKeepsItsOldGrantUntilItEnds(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	s := newTestServer(t, testConfig(FairShare, 100), clk)
	a := askAsServer(t, s, "a", 100, 5, nil) // alone: all of it
	b := askAsServer(t, s, "b", 100, 5, nil) // nothing left yet
	a = askAsServer(t, s, "a", 100, 5, a)    // granted half: its clients still hold the rest
	a = askAsServer(t, s, "a", 100, 5, a)    // has handed out only that half now
	b = askAsServer(t, s, "b", 100, 5, b)
	if a.GetCapacity() != 50 || b.GetCapacity() != 50 {
		t.Fatalf("grants %v and %v, want 50 each", a.GetCapacity(), b.GetCapacity())
	}
	clk.Add(10 * time.Second)
	// a renews normally, with the lease it was granted: nothing changes.
	a = askAsServer(t, s, "a", 100, 5, a)
	oldExpiry := a.GetExpiryTime()

	// a restarts: one of its five clients is back, claiming 10 of the 50
	// (a Sluice intermediate marks the claims it echoes before its
	// parent's first answer with a refresh interval of 0).
	clk.Add(5 * time.Second)
	claim := &pb.Lease{Capacity: proto.Float64(10), ExpiryTime: proto.Int64(oldExpiry - 3), RefreshInterval: proto.Int64(0)}
	a = askAsServer(t, s, "a", 14, 1, claim)
	if got := a.GetCapacity(); got != 50 {
		t.Errorf("restarted a granted %v, want its old grant of 50", got)
	}
	// The lease ends with the old grant, when a's learning mode may end.
	if got := a.GetExpiryTime(); got != oldExpiry {
		t.Errorf("restarted a's lease ends at %v, want with the old grant at %v", got, oldExpiry)
	}
	b = askAsServer(t, s, "b", 100, 5, b)
	if got := b.GetCapacity(); got != 50 {
		t.Errorf("b granted %v while a's old leases run, want 50", got)
	}
	// a renews its new lease, still knowing only the one client.
	clk.Add(time.Second)
	a = askAsServer(t, s, "a", 14, 1, &pb.Lease{Capacity: proto.Float64(14), ExpiryTime: proto.Int64(a.GetExpiryTime()), RefreshInterval: proto.Int64(15)})
	if got := a.GetCapacity(); got != 50 {
		t.Errorf("a renewing before its old grant ends granted %v, want 50", got)
	}
	b = askAsServer(t, s, "b", 100, 5, b)
	if got := b.GetCapacity(); got != 50 {
		t.Errorf("b granted %v before a's old grant ends, want 50", got)
	}

	// Once the old grant has ended, a's few wants set its share.
	clk.Add(time.Unix(oldExpiry, 0).Sub(clk.Now()))
	a = askAsServer(t, s, "a", 14, 1, &pb.Lease{Capacity: proto.Float64(14), ExpiryTime: proto.Int64(a.GetExpiryTime()), RefreshInterval: proto.Int64(15)})
	if got := a.GetCapacity(); got != 14 {
		t.Errorf("a granted %v after its old grant ended, want its wants of 14", got)
	}
	b = askAsServer(t, s, "b", 100, 5, b)
	if got := b.GetCapacity(); got != 86 {
		t.Errorf("b granted %v after a's old grant ended, want the other 86", got)
	}
}

// startManualIntermediate starts an intermediate of cfg, its parent
// "parent" and its address cfg.ID, whose refreshes from its parent the
// test drives with tickParent (as a simulator does through
// serverhook.DriveParent), talking to parent in memory. It is stopped
// when the test ends.
func startManualIntermediate(t *testing.T, cfg Config, parent *parentConn) *Server {
	t.Helper()
	cfg.Parent, cfg.Address = "parent", cfg.ID
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.driveParent(func(string) (pb.Conn, error) { return parent, nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// parentConn is an in-memory parent for an intermediate: it records the
// GetServerCapacity requests and grants capacity for every resource, or
// answers err when it is set.
type parentConn struct {
	pb.CapacityClient // nil: other RPCs are not expected
	capacity          float64
	clk               clock.Clock
	reqs              []*pb.GetServerCapacityRequest
	expiry            int64 // of the leases granted; 0 means in 60 s
	err               error
}

func (p *parentConn) Close() error { return nil }

func (p *parentConn) Discovery(context.Context, *pb.DiscoveryRequest, ...grpc.CallOption) (*pb.DiscoveryResponse, error) {
	return &pb.DiscoveryResponse{IsMaster: proto.Bool(true)}, nil
}

func (p *parentConn) GetServerCapacity(_ context.Context, in *pb.GetServerCapacityRequest, _ ...grpc.CallOption) (*pb.GetServerCapacityResponse, error) {
	p.reqs = append(p.reqs, in)
	if p.err != nil {
		return nil, p.err
	}
	resp := &pb.GetServerCapacityResponse{}
	expiry := p.expiry
	if expiry == 0 {
		expiry = p.clk.Now().Unix() + 60
	}
	for _, r := range in.GetResource() {
		resp.Response = append(resp.Response, &pb.ServerCapacityResourceResponse{
			ResourceId: r.ResourceId,
			Gets:       &pb.Lease{Capacity: proto.Float64(p.capacity), ExpiryTime: proto.Int64(expiry), RefreshInterval: proto.Int64(10)},
		})
	}
	return resp, nil
}

// An intermediate whose child server restarted asks its own parent on the
// child's behalf for the child's old grant and subclients while the floor
// lasts: otherwise the parent, seeing fewer wants and subclients, cuts the
// intermediate's grant and its other children pay for the restart.
func TestIntermediateAsksForItsRestartedChildsOldGrant(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	parent := &parentConn{capacity: 100, clk: clk}
	s := startManualIntermediate(t, Config{Repository: testConfig(FairShare, 0), Clock: clk, ID: "region"}, parent)
	ctx := context.Background()
	a := askAsServer(t, s, "a", 100, 5, nil) // before the parent's answer
	s.tickParent(ctx)
	a = askAsServer(t, s, "a", 100, 5, a)
	b := askAsServer(t, s, "b", 100, 5, nil)
	for range 3 {
		clk.Add(time.Second)
		s.tickParent(ctx)
		a = askAsServer(t, s, "a", 100, 5, &pb.Lease{Capacity: proto.Float64(a.GetCapacity()), ExpiryTime: a.ExpiryTime, RefreshInterval: a.RefreshInterval})
		b = askAsServer(t, s, "b", 100, 5, &pb.Lease{Capacity: proto.Float64(b.GetCapacity()), ExpiryTime: b.ExpiryTime, RefreshInterval: b.RefreshInterval})
	}
	if a.GetCapacity() != 50 || b.GetCapacity() != 50 {
		t.Fatalf("grants %v and %v of 100, want 50 each", a.GetCapacity(), b.GetCapacity())
	}
	// a restarts: one client back, holding nothing (its lease ran out
	// while a was down).
	clk.Add(time.Second)
	claim := &pb.Lease{Capacity: proto.Float64(0), ExpiryTime: proto.Int64(clk.Now().Unix()), RefreshInterval: proto.Int64(0)}
	if got := askAsServer(t, s, "a", 14, 1, claim).GetCapacity(); got != 50 {
		t.Fatalf("restarted a granted %v, want its old 50", got)
	}
	s.tickParent(ctx)
	last := parent.reqs[len(parent.reqs)-1].GetResource()[0].GetWants()
	var wants float64
	var subclients int64
	for _, band := range last {
		wants += band.GetWants()
		subclients += band.GetNumClients()
	}
	if wants < 150 || subclients != 10 {
		t.Errorf("asked the parent for %v wanted by %d subclients, want at least b's 100 and a's old 50, and 10 subclients (a's 5 before its restart)", wants, subclients)
	}
}

// A server that lost an answer repeats the lease it was granted before:
// that is no restart, and what it says it has handed out sets what is
// counted for it, as usual.
func TestLostAnswerIsNoRestart(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	s := newTestServer(t, testConfig(FairShare, 100), clk)
	a := askAsServer(t, s, "a", 100, 5, nil)
	b := askAsServer(t, s, "b", 100, 5, nil)
	a = askAsServer(t, s, "a", 100, 5, a)
	a = askAsServer(t, s, "a", 100, 5, a)
	b = askAsServer(t, s, "b", 100, 5, b)
	if a.GetCapacity() != 50 || b.GetCapacity() != 50 {
		t.Fatalf("grants %v and %v, want 50 each", a.GetCapacity(), b.GetCapacity())
	}
	clk.Add(time.Second)
	older := a
	askAsServer(t, s, "a", 100, 5, a) // answered, but the answer is lost
	// a's clients now want 10; it repeats the older lease, saying it has
	// handed out 10 of it.
	clk.Add(time.Second)
	a = askAsServer(t, s, "a", 10, 5, &pb.Lease{Capacity: proto.Float64(10), ExpiryTime: older.ExpiryTime, RefreshInterval: older.RefreshInterval})
	if got := a.GetCapacity(); got != 10 {
		t.Errorf("a granted %v, want its wants of 10", got)
	}
	if got := askAsServer(t, s, "b", 100, 5, b).GetCapacity(); got != 90 {
		t.Errorf("b granted %v after a gave 40 back, want 90", got)
	}
}

// A restarted intermediate ends its learning mode with the first lease
// its parent grants it, which a Sluice parent ends with its grant before
// the restart (when the leases handed out of it have ended), rather than
// a whole lease length after the restart, so that the tree settles as
// soon as the leases of before the restart have ended.
func TestRestartedIntermediateLearnsUntilItsFirstLeaseEnds(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	parent := &parentConn{capacity: 100, clk: clk, expiry: testEpoch.Unix() + 20}
	repo := &Repository{Resources: []Template{{IdentifierGlob: "r", Algorithm: Algorithm{Kind: FairShare, LeaseLength: 60, RefreshInterval: 5}}}}
	s := startManualIntermediate(t, Config{Repository: repo, Clock: clk, ID: "dc"}, parent)
	// A client back from before the restart claims 30; one whose lease
	// ran out asks with none and, in learning mode, gets nothing.
	claim := &pb.Lease{Capacity: proto.Float64(30), ExpiryTime: proto.Int64(testEpoch.Unix() + 15), RefreshInterval: proto.Int64(5)}
	if got := leaseFor(t, s, "c1", 50, claim).GetCapacity(); got != 30 {
		t.Fatalf("c1 claiming 30 got %v in learning mode, want its claim", got)
	}
	s.tickParent(context.Background()) // the parent grants 100 until epoch+20
	if got := ask(t, s, "c2", 50); got != 0 {
		t.Fatalf("c2 got %v while learning, want 0", got)
	}
	clk.Add(20 * time.Second)
	parent.expiry = 0
	s.tickParent(context.Background())
	if got := ask(t, s, "c2", 50); got != 50 {
		t.Errorf("c2 got %v after the first lease ended, want 50: learning mode is over", got)
	}
}

// leaseFor sends one GetCapacity for resource "r" with has and returns
// the lease granted.
func leaseFor(t *testing.T, s *Server, client string, wants float64, has *pb.Lease) *pb.Lease {
	t.Helper()
	resp, err := s.getCapacity(context.Background(), &pb.GetCapacityRequest{
		ClientId: proto.String(client),
		Resource: []*pb.ResourceRequest{{ResourceId: proto.String("r"), Wants: proto.Float64(wants), Has: has}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetResponse()) != 1 {
		t.Fatalf("GetCapacity answered %v", resp)
	}
	return resp.GetResponse()[0].GetGets()
}
