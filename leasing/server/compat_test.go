package server

// These tests replay the original Doorman's requests byte for byte in
// shape (github.com/youtube/doorman: go/client/doorman/client.go,
// go/cmd/doorman_client, go/server/doorman/server.go's intermediate), as
// doorman-wire.md and the design document give them, over real gRPC on
// 127.0.0.1. The original's binaries predate Go modules and cannot be
// built here, so its requests are emulated exactly:
//
//   - a resource's first GetCapacity has no has field; later ones carry
//     the whole lease last received (expiry_time, refresh_interval,
//     capacity); priority is always set (0 by default); every request
//     carries all the client's resources;
//   - adding a resource sends a GetCapacity at once, renewing the others
//     too, however recently they were asked for;
//   - Resource.Release sends ReleaseCapacity with that one id;
//   - Client.Close sends ReleaseCapacity with n empty ids followed by the
//     n real ones (make([]string, n), then append);
//   - a response with a mastership field set is taken as a redirect, so a
//     master must leave it out;
//   - an intermediate server sends GetServerCapacity with one band per
//     resource (priority 1, num_clients, the sum of wants) and no has,
//     and, before it has clients, a request for resource "*" with one band
//     (priority 1, num_clients 1, wants 0).

import (
	"context"
	"math"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sluice-rpc/sluice/clock"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
)

// originalClient emulates the original Go client's requests.
type originalClient struct {
	t      *testing.T
	stub   pb.CapacityClient
	id     string
	order  []string
	wants  map[string]float64
	leases map[string]*pb.Lease
}

func newOriginalClient(t *testing.T, addr, id string) *originalClient {
	return &originalClient{t: t, stub: dial(t, addr), id: id, wants: map[string]float64{}, leases: map[string]*pb.Lease{}}
}

// request is the original's performRequests: every resource, with its
// priority (0), wants and the lease last received (nil at first).
func (c *originalClient) request() *pb.GetCapacityRequest {
	in := &pb.GetCapacityRequest{ClientId: proto.String(c.id)}
	for _, id := range c.order {
		in.Resource = append(in.Resource, &pb.ResourceRequest{
			Priority:   proto.Int64(0),
			ResourceId: proto.String(id),
			Wants:      proto.Float64(c.wants[id]),
			Has:        c.leases[id],
		})
	}
	return in
}

// refresh sends the request and stores the leases, failing the test unless
// every resource is answered and no mastership redirect comes back.
func (c *originalClient) refresh() map[string]float64 {
	c.t.Helper()
	out, err := c.stub.GetCapacity(context.Background(), c.request())
	if err != nil {
		c.t.Fatalf("%s: GetCapacity: %v", c.id, err)
	}
	if out.Mastership != nil {
		c.t.Fatalf("%s: the master's answer carries mastership %v: the original client would take it for a redirect", c.id, out.Mastership)
	}
	got := map[string]float64{}
	for _, r := range out.Response {
		c.leases[r.GetResourceId()] = r.GetGets()
		got[r.GetResourceId()] = r.GetGets().GetCapacity()
	}
	if len(got) != len(c.order) {
		c.t.Fatalf("%s: asked for %v, answered %v", c.id, c.order, got)
	}
	return got
}

// resource is the original's Client.Resource: add it and refresh at once.
func (c *originalClient) resource(id string, wants float64) map[string]float64 {
	c.t.Helper()
	c.order = append(c.order, id)
	c.wants[id] = wants
	return c.refresh()
}

// close is the original's Client.Close: n empty ids, then the n real ones.
func (c *originalClient) close() {
	c.t.Helper()
	in := &pb.ReleaseCapacityRequest{ClientId: proto.String(c.id), ResourceId: make([]string, len(c.order))}
	in.ResourceId = append(in.ResourceId, c.order...)
	out, err := c.stub.ReleaseCapacity(context.Background(), in)
	if err != nil {
		c.t.Fatalf("%s: ReleaseCapacity %q: %v (the original client would retry it forever)", c.id, in.ResourceId, err)
	}
	if out.Mastership != nil {
		c.t.Fatalf("%s: ReleaseCapacity answered mastership %v: the original client would take it for a redirect", c.id, out.Mastership)
	}
}

func originalTestServer(t *testing.T, clk clock.Clock) (*Server, string) {
	repo, err := ParseRepository([]byte(`
resources:
- identifier_glob: "r"
  capacity: 100
  algorithm: {kind: FAIR_SHARE, lease_length: 60, refresh_interval: 5, learning_mode_duration: 0}
- identifier_glob: "p"
  capacity: 90
  algorithm: {kind: 2, lease_length: 20, refresh_interval: 5, learning_mode_duration: 0}
- identifier_glob: "*"
  capacity: 1000
  algorithm: {kind: FAIR_SHARE, lease_length: 60, refresh_interval: 15, learning_mode_duration: 0}
`))
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Repository: repo, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return s, startServer(t, s, "")
}

// The original doorman_client (go/cmd/doorman_client) against Sluice's
// server: it asks once, prints the capacity and exits through Close, whose
// release ["", "r"] is answered OK at once; its capacity is released, so a
// second client gets all of it.
func TestOriginalDoormanClientExitsAndReleases(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	_, addr := originalTestServer(t, clk)
	first := newOriginalClient(t, addr, "doorman_client")
	if got := first.resource("r", 100)["r"]; got != 100 {
		t.Fatalf("doorman_client got %v, want 100", got)
	}
	first.close() // ReleaseCapacity{client_id, ["", "r"]}
	second := newOriginalClient(t, addr, "second")
	if got := second.resource("r", 100)["r"]; got != 100 {
		t.Fatalf("a second client got %v after the first exited, want all 100", got)
	}
}

// Close with two resources sends ["", "", "r", "p"]; Resource.Release
// sends just its id; a release of something never asked for is fine.
func TestOriginalReleaseShapes(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	s, addr := originalTestServer(t, clk)
	c := newOriginalClient(t, addr, "c")
	c.resource("r", 60)
	c.resource("p", 60)
	if _, clients, leases := s.Counts(); clients != 1 || leases != 2 {
		t.Fatalf("before close: %d clients, %d leases", clients, leases)
	}
	c.close()
	if _, clients, leases := s.Counts(); clients != 0 || leases != 0 {
		t.Fatalf("after ReleaseCapacity %q: %d clients, %d leases, want none", append(make([]string, 2), "r", "p"), clients, leases)
	}
	d := newOriginalClient(t, addr, "d")
	d.resource("r", 30)
	if _, err := d.stub.ReleaseCapacity(context.Background(), &pb.ReleaseCapacityRequest{ClientId: proto.String("d"), ResourceId: []string{"r", "never-asked"}}); err != nil {
		t.Fatal(err)
	}
	if _, _, leases := s.Counts(); leases != 0 {
		t.Fatalf("after Release: %d leases", leases)
	}
}

// The original client re-sends every resource whenever one is added, and
// refreshes at its refresh interval, which a client built with a shorter
// MinimumRefreshInterval makes shorter than 5 s: every request is
// answered with an entry per resource, and a wants change (Resource.Ask)
// takes effect at once.
func TestOriginalRenewalsAtShortIntervals(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	_, addr := originalTestServer(t, clk)
	a := newOriginalClient(t, addr, "a")
	b := newOriginalClient(t, addr, "b")
	a.resource("r", 80)
	got := a.resource("other", 5) // r again, 0 s after its first request, with has
	if got["r"] != 80 || got["other"] != 5 {
		t.Fatalf("a's second request: %v, want r 80 and other 5", got)
	}
	if a.leases["r"].GetExpiryTime() != testEpoch.Unix()+60 {
		t.Fatalf("lease %v", a.leases["r"])
	}
	b.resource("r", 80) // 20 left
	for step := 0; step < 6; step++ {
		clk.Add(500 * time.Millisecond)
		ga, gb := a.refresh()["r"], b.refresh()["r"]
		if ga+gb > 100+1e-9 {
			t.Fatalf("step %d: a %v + b %v > 100", step, ga, gb)
		}
	}
	if ga, gb := a.refresh()["r"], b.refresh()["r"]; ga != 50 || gb != 50 {
		t.Fatalf("after renewals every 0.5 s: a %v, b %v; want the fair 50 each", ga, gb)
	}
	a.wants["r"] = 10 // Ask(10)
	if got := a.refresh()["r"]; got != 10 {
		t.Fatalf("a asking for 10 at once got %v", got)
	}
	if got := b.refresh()["r"]; got != 80 {
		t.Fatalf("b renewing at once after a's change got %v, want 80", got)
	}
	if exp := b.leases["r"].GetExpiryTime(); exp != clk.Now().Unix()+60 {
		t.Fatalf("b's lease expires at %d, want now+60 = %d", exp, clk.Now().Unix()+60)
	}
}

// Discovery as the original's connection code reads it: is_master and the
// address; a master's other answers carry no mastership.
func TestOriginalDiscovery(t *testing.T) {
	_, addr := originalTestServer(t, clock.NewFake(testEpoch))
	d, err := dial(t, addr).Discovery(context.Background(), &pb.DiscoveryRequest{})
	if err != nil || !d.GetIsMaster() || d.GetMastership().GetMasterAddress() != addr {
		t.Fatalf("Discovery = %v, %v; want is_master and %s", d, err, addr)
	}
}

// The original intermediate server's GetServerCapacity requests: one band
// per resource, no has; and the "*" probe it sends before it has clients.
// Each is answered with the algorithm's share for its subclients, the
// lease, the template's algorithm and the safe capacity.
func TestOriginalIntermediateRequests(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	_, addr := originalTestServer(t, clk)
	stub := dial(t, addr)
	band := func(n int64, wants float64) []*pb.PriorityBandAggregate {
		return []*pb.PriorityBandAggregate{{Priority: proto.Int64(1), NumClients: proto.Int64(n), Wants: proto.Float64(wants)}}
	}
	probe, err := stub.GetServerCapacity(context.Background(), &pb.GetServerCapacityRequest{
		ServerId: proto.String("intermediate:1"),
		Resource: []*pb.ServerCapacityResourceRequest{{ResourceId: proto.String("*"), Wants: band(1, 0)}},
	})
	if err != nil || probe.Mastership != nil || len(probe.Response) != 1 {
		t.Fatalf("the * probe: %v, %v", probe, err)
	}
	if r := probe.Response[0]; r.GetResourceId() != "*" || r.GetGets().GetCapacity() != 0 || r.GetAlgorithm().GetKind() != pb.Algorithm_FAIR_SHARE {
		t.Fatalf("the * probe answered %v", r)
	}

	// A direct client of r wants 40; the intermediate speaks for 3 clients
	// wanting 300 in all. Among 4 subclients the water level is 25 (40 +
	// 3L = 100 would need L >= 40), so the direct client's share is 25 and
	// the intermediate's 75; but the direct client holds 40 until it
	// renews, so the intermediate gets the 60 left first.
	direct := newOriginalClient(t, addr, "direct")
	direct.resource("r", 40)
	resp, err := stub.GetServerCapacity(context.Background(), &pb.GetServerCapacityRequest{
		ServerId: proto.String("intermediate:1"),
		Resource: []*pb.ServerCapacityResourceRequest{
			{ResourceId: proto.String("r"), Wants: band(3, 300)},
			{ResourceId: proto.String("p"), Wants: band(2, 60)},
		},
	})
	if err != nil || resp.Mastership != nil || len(resp.Response) != 2 {
		t.Fatalf("GetServerCapacity: %v, %v", resp, err)
	}
	r, p := resp.Response[0], resp.Response[1]
	if r.GetResourceId() != "r" || r.GetGets().GetCapacity() != 60 {
		t.Fatalf("r: %v, want 60 (100 less the 40 the direct client holds)", r)
	}
	if a := r.GetAlgorithm(); a.GetKind() != pb.Algorithm_FAIR_SHARE || a.GetLeaseLength() != 60 || a.GetRefreshInterval() != 5 || a.GetLearningModeDuration() != 0 || a.LearningModeDuration == nil {
		t.Fatalf("r's algorithm %v", a)
	}
	if g := r.GetGets(); g.GetExpiryTime() != testEpoch.Unix()+60 || g.GetRefreshInterval() != 5 {
		t.Fatalf("r's lease %v", g)
	}
	if got := r.GetSafeCapacity(); got != 25 {
		t.Fatalf("r's dynamic safe capacity %v, want 100 / 4 subclients", got)
	}
	if p.GetResourceId() != "p" || p.GetGets().GetCapacity() != 60 || p.GetAlgorithm().GetKind() != pb.Algorithm_PROPORTIONAL_SHARE {
		t.Fatalf("p: %v, want all 60 it wants of 90", p)
	}
	// The direct client renews: its fair share is 25 now, and once it holds
	// that the intermediate's share is 75 (3 subclients at level 25).
	if got := direct.refresh()["r"]; got != 25 {
		t.Fatalf("the direct client renewing got %v, want its fair 25", got)
	}
	resp, err = stub.GetServerCapacity(context.Background(), &pb.GetServerCapacityRequest{
		ServerId: proto.String("intermediate:1"),
		Resource: []*pb.ServerCapacityResourceRequest{{ResourceId: proto.String("r"), Has: r.GetGets(), Wants: band(3, 300)}},
	})
	if err != nil || resp.Response[0].GetGets().GetCapacity() != 75 {
		t.Fatalf("the intermediate renewing: %v, %v; want 75", resp, err)
	}
}

// GetServerCapacity's bands are aggregated: their num_clients and wants
// add up, priorities are ignored, and the share is the algorithm's for
// that many subclients, the same as that many clients asking alone would
// get in all.
func TestGetServerCapacityAggregatesBands(t *testing.T) {
	for _, kind := range []Kind{FairShare, ProportionalShare} {
		t.Run(kind.String(), func(t *testing.T) {
			clk := clock.NewFake(testEpoch)
			s := newTestServer(t, testConfig(kind, 120), clk)
			// Two clients asking alone (wants 1000 and 10) and a server for
			// three clients in two bands (wants 20+30+50 = 100 for 3).
			gsc := func() float64 {
				t.Helper()
				resp, err := s.getServerCapacity(context.Background(), &pb.GetServerCapacityRequest{
					ServerId: proto.String("mid"),
					Resource: []*pb.ServerCapacityResourceRequest{{ResourceId: proto.String("r"), Wants: []*pb.PriorityBandAggregate{
						{Priority: proto.Int64(0), NumClients: proto.Int64(2), Wants: proto.Float64(50)},
						{Priority: proto.Int64(7), NumClients: proto.Int64(1), Wants: proto.Float64(50)},
					}}},
				})
				if err != nil {
					t.Fatal(err)
				}
				return resp.Response[0].GetGets().GetCapacity()
			}
			var mid, big, small float64
			for round := 0; round < 3; round++ {
				big, small, mid = ask(t, s, "big", 1000), ask(t, s, "small", 10), gsc()
			}
			wants := []float64{1000, 10, 100}
			weights := []float64{1, 1, 3}
			var want []float64
			if kind == FairShare {
				want = naiveFairShare(120, wants, weights)
			} else {
				want = naiveProportionalShare(120, wants, weights)
			}
			if !close9(big, want[0]) || !close9(small, want[1]) || !close9(mid, want[2]) {
				t.Fatalf("big %v small %v mid %v, want %v", big, small, mid, want)
			}
			if math.Abs(big+small+mid-120) > 1e-9 {
				t.Fatalf("handed out %v, want all 120", big+small+mid)
			}
		})
	}
}

// Invalid GetServerCapacity requests are refused as a whole, naming the
// field: num_clients below 1 (as the original refuses), bad wants, a bad
// server id.
func TestGetServerCapacityRejectsInvalidRequests(t *testing.T) {
	s := newTestServer(t, testConfig(FairShare, 100), clock.NewFake(testEpoch))
	band := func(n int64, w float64) []*pb.PriorityBandAggregate {
		return []*pb.PriorityBandAggregate{{Priority: proto.Int64(1), NumClients: proto.Int64(n), Wants: proto.Float64(w)}}
	}
	tests := map[string]struct {
		req  *pb.GetServerCapacityRequest
		want string
	}{
		"no server id":  {&pb.GetServerCapacityRequest{ServerId: proto.String("")}, "server_id is empty"},
		"zero clients":  {&pb.GetServerCapacityRequest{ServerId: proto.String("m"), Resource: []*pb.ServerCapacityResourceRequest{{ResourceId: proto.String("r"), Wants: band(0, 1)}}}, "wants[0].num_clients is 0, must be >= 1"},
		"NaN wants":     {&pb.GetServerCapacityRequest{ServerId: proto.String("m"), Resource: []*pb.ServerCapacityResourceRequest{{ResourceId: proto.String("r"), Wants: band(1, math.NaN())}}}, "wants[0].wants is NaN"},
		"negative has":  {&pb.GetServerCapacityRequest{ServerId: proto.String("m"), Resource: []*pb.ServerCapacityResourceRequest{{ResourceId: proto.String("r"), Wants: band(1, 1), Has: &pb.Lease{ExpiryTime: proto.Int64(0), RefreshInterval: proto.Int64(0), Capacity: proto.Float64(-1)}}}}, "has.capacity is -1"},
		"empty id":      {&pb.GetServerCapacityRequest{ServerId: proto.String("m"), Resource: []*pb.ServerCapacityResourceRequest{{ResourceId: proto.String(""), Wants: band(1, 1)}}}, "resource[0].resource_id is empty"},
		"huge subcount": {&pb.GetServerCapacityRequest{ServerId: proto.String("m"), Resource: []*pb.ServerCapacityResourceRequest{{ResourceId: proto.String("r"), Wants: append(band(MaxSubclients, 1), band(1, 1)...)}}}, "num_clients add up to more than"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := s.getServerCapacity(context.Background(), tt.req)
			if err == nil || !containsAll(err.Error(), "InvalidArgument", tt.want) {
				t.Fatalf("got %v, want InvalidArgument naming %q", err, tt.want)
			}
		})
	}
	if _, _, leases := s.Counts(); leases != 0 {
		t.Fatalf("refused requests left %d leases", leases)
	}
}
