package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
)

// starRepo is one FAIR_SHARE template for every resource, capacity 100,
// 60 s leases, no learning mode.
func starRepo() *Repository {
	return &Repository{Resources: []Template{{
		IdentifierGlob: "*",
		Capacity:       100,
		Algorithm:      Algorithm{Kind: FairShare, LeaseLength: 60, RefreshInterval: 15, LearningModeDuration: int64p(0)},
	}}}
}

// askFor sends one GetCapacity from client for ids, each wanting wants.
func askFor(s *Server, client string, wants float64, ids ...string) (*pb.GetCapacityResponse, error) {
	req := &pb.GetCapacityRequest{ClientId: proto.String(client)}
	for _, id := range ids {
		req.Resource = append(req.Resource, &pb.ResourceRequest{ResourceId: proto.String(id), Priority: proto.Int64(0), Wants: proto.Float64(wants)})
	}
	return s.getCapacity(context.Background(), req)
}

func mustAsk(t *testing.T, s *Server, client string, wants float64, ids ...string) *pb.GetCapacityResponse {
	t.Helper()
	resp, err := askFor(s, client, wants, ids...)
	if err != nil {
		t.Fatalf("%s asking for %v: %v", client, ids, err)
	}
	return resp
}

func wantExhausted(t *testing.T, err error, limit string) {
	t.Helper()
	if status.Code(err) != codes.ResourceExhausted || !containsAll(err.Error(), limit) {
		t.Fatalf("got %v, want ResourceExhausted naming %q", err, limit)
	}
}

func counts(t *testing.T, s *Server, resources, clients, leases int) {
	t.Helper()
	if r, c, l := s.Counts(); r != resources || c != clients || l != leases {
		t.Fatalf("Counts() = %d resources, %d clients, %d leases; want %d, %d, %d", r, c, l, resources, clients, leases)
	}
}

// Beyond the limits on resources, clients and leases a request is refused
// as a whole with ResourceExhausted naming the limit, and changes nothing;
// renewals are always admitted; releases and expiry make room again.
func TestLimitsRefuseBeyondThem(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	s, err := New(Config{Repository: starRepo(), Clock: clk, MaxResources: 3, MaxClients: 2, MaxLeases: 4})
	if err != nil {
		t.Fatal(err)
	}
	mustAsk(t, s, "a", 40, "r1", "r2", "r3")
	counts(t, s, 3, 1, 3)

	_, err = askFor(s, "a", 90, "r1", "r4")
	wantExhausted(t, err, "the server's limit of 3 resources (Config.MaxResources, --max-resources) is reached: 3 held, and this request would add at least 1")
	counts(t, s, 3, 1, 3)
	// Nothing changed: a still wants 40 of r1, so b gets the 60 left.
	if got := mustAsk(t, s, "b", 100, "r1").Response[0].GetGets().GetCapacity(); got != 60 {
		t.Fatalf("b got %v of r1, want 60 (a's refused request must not have changed its wants or lease)", got)
	}
	counts(t, s, 3, 2, 4)

	// At every limit, renewals still go through.
	mustAsk(t, s, "a", 40, "r1", "r2", "r3")
	mustAsk(t, s, "b", 100, "r1")

	_, err = askFor(s, "c", 1, "r1")
	wantExhausted(t, err, "limit of 2 clients (Config.MaxClients, --max-clients)")
	_, err = askFor(s, "b", 1, "r2")
	wantExhausted(t, err, "limit of 4 leases (Config.MaxLeases, --max-leases)")

	// b releases (the original client's shape): room for c.
	if _, err := s.releaseCapacity(context.Background(), &pb.ReleaseCapacityRequest{ClientId: proto.String("b"), ResourceId: []string{"", "r1"}}); err != nil {
		t.Fatal(err)
	}
	counts(t, s, 3, 1, 3)
	mustAsk(t, s, "c", 1, "r1")
	counts(t, s, 3, 2, 4)

	// Once the leases expired, a new resource is admitted: the refused
	// request first forgets what expired.
	clk.Add(60 * time.Second)
	mustAsk(t, s, "d", 1, "r4")
	counts(t, s, 1, 1, 1)
}

// A flood of new resource ids stops at the limit; the flood's requests are
// refused while a renewal of an existing lease is answered.
func TestFloodStopsAtTheLimit(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	s, err := New(Config{Repository: starRepo(), Clock: clk, MaxResources: 250, MaxLeases: 1000})
	if err != nil {
		t.Fatal(err)
	}
	mustAsk(t, s, "victim", 10, "kv")
	refused := 0
	for req := 0; req < 10; req++ {
		ids := make([]string, 100)
		for i := range ids {
			ids[i] = fmt.Sprintf("flood-%d-%d", req, i)
		}
		if _, err := askFor(s, "flooder", 1, ids...); err != nil {
			wantExhausted(t, err, "limit of 250 resources")
			refused++
		}
		if got := mustAsk(t, s, "victim", 10, "kv").Response[0].GetGets().GetCapacity(); got != 10 {
			t.Fatalf("the victim's renewal got %v during the flood, want 10", got)
		}
	}
	if refused != 8 {
		t.Fatalf("%d of 10 flood requests refused, want 8 (2 fit under 250 resources with the victim's)", refused)
	}
	counts(t, s, 201, 2, 201)
}

// Resources whose leases expired are forgotten by the requests that come
// after, a few per request, without a sweep: each request checks at most
// reapPerRequest due resources.
func TestExpiredResourcesAreForgottenGradually(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	s := newTestServer(t, starRepo(), clk)
	ids := make([]string, 50)
	for i := range ids {
		ids[i] = fmt.Sprintf("idle-%d", i)
	}
	mustAsk(t, s, "idle", 1, ids...)
	clk.Add(30 * time.Second)
	mustAsk(t, s, "live", 1, "live")
	counts(t, s, 51, 2, 51)
	clk.Add(30 * time.Second) // the idle leases expire; live's has 30 s left
	for n := 1; ; n++ {
		mustAsk(t, s, "live", 1, "live")
		r, _, _ := s.Counts()
		if want := max(51-n*reapPerRequest, 1); r != want {
			t.Fatalf("after %d requests %d resources left, want %d", n, r, want)
		}
		if r == 1 {
			break
		}
	}
	counts(t, s, 1, 1, 1)
	if s.lookup("live") == nil || s.lookup("idle-0") != nil {
		t.Fatal("the wrong resources were forgotten")
	}
}

// Forgetting expired resources never waits on a busy resource: with an
// expired resource's lock held elsewhere, requests for others are answered
// at once, and the busy one is checked again later.
func TestReaperSkipsBusyResources(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	s := newTestServer(t, starRepo(), clk)
	mustAsk(t, s, "a", 1, "busy")
	clk.Add(60 * time.Second) // busy's lease expired: it is due
	busy := s.lookup("busy")
	busy.mu.Lock()
	answered := make(chan error, 1)
	go func() {
		_, err := askFor(s, "b", 1, "other")
		answered <- err
	}()
	if err := testwait.Recv(t, answered, "a request while an expired resource is locked"); err != nil {
		t.Fatal(err)
	}
	busy.mu.Unlock()
	counts(t, s, 2, 2, 2)
	clk.Add(time.Second)
	mustAsk(t, s, "b", 1, "other")
	counts(t, s, 1, 1, 1)
}

// A lease removed by expiry, release or reaping frees its share at once,
// in the same request that notices it.
func TestExpiredLeaseFreesItsShare(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	s := newTestServer(t, testConfig(FairShare, 100), clk)
	ask(t, s, "a", 100)
	clk.Add(30 * time.Second)
	if got := ask(t, s, "b", 100); got != 0 {
		t.Fatalf("b got %v while a holds 100", got)
	}
	clk.Add(30 * time.Second)
	if got := ask(t, s, "b", 100); got != 100 {
		t.Fatalf("b got %v once a's lease expired, want 100", got)
	}
	counts(t, s, 1, 1, 1)
}

func TestConfigLimitsValidated(t *testing.T) {
	for _, c := range []Config{
		{Repository: starRepo(), MaxResources: -1},
		{Repository: starRepo(), MaxClients: -1},
		{Repository: starRepo(), MaxLeases: -1},
		{Repository: starRepo(), MaxIDLength: -1},
		{Repository: starRepo(), MaxResourcesPerRequest: -1},
		{},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) succeeded", c)
		}
	}
	_, err := New(Config{Repository: starRepo(), MaxLeases: -5})
	if err == nil || err.Error() != "server: Config.MaxLeases is -5, must be >= 0 (0 means the default)" {
		t.Fatalf("error %v", err)
	}
}

// A bulk request pauses as long as it ran every bulkSlice of wall time,
// so that it takes at most about half a processor; a small one never
// pauses. (With it, a side client's p99 during the flood of
// tools/benchmarks/README.md fell from 3.3-5.9 ms to 2.6-4.6 ms.)
func TestBulkRequestsPauseHalfTheTime(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	s := newTestServer(t, &Repository{Resources: []Template{{IdentifierGlob: "*", Capacity: 100,
		Algorithm: Algorithm{Kind: FairShare, LeaseLength: 60, RefreshInterval: 15, LearningModeDuration: int64p(0)}}}}, clk)
	// Wall time advances 250 µs at every look: 32 resources' work.
	wall := testEpoch
	var paused []time.Duration
	s.wall = func() time.Time { wall = wall.Add(250 * time.Microsecond); return wall }
	s.hold = func(_ context.Context, d time.Duration) { paused = append(paused, d); wall = wall.Add(d) }
	request := func(n int) {
		req := &pb.GetCapacityRequest{ClientId: proto.String(fmt.Sprintf("c%d", n))}
		for i := range n {
			req.Resource = append(req.Resource, &pb.ResourceRequest{ResourceId: proto.String(fmt.Sprintf("r%d-%d", n, i)),
				Priority: proto.Int64(0), Wants: proto.Float64(1)})
		}
		if _, err := s.getCapacity(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	request(bulkRequest) // not bulk: yields, never pauses
	if len(paused) != 0 {
		t.Fatalf("a request of %d resources paused %v", bulkRequest, paused)
	}
	// 31 looks of 250 µs (one per 32 resources): the first starts a
	// slice, then every fourth ends one (1 ms run) with a pause: 7.
	request(1000)
	if len(paused) != 7 {
		t.Errorf("a request of 1000 resources paused %d times, want 7 (one per 1 ms it ran)", len(paused))
	}
	for _, d := range paused {
		if d != bulkSlice {
			t.Errorf("paused %v, want %v", d, bulkSlice)
		}
	}
}

// The answer to a bulk request refused for a limit is held back
// refusalDelay; a small refused request, an invalid one and an accepted
// bulk one are answered at once. (With it and the pauses above, the side
// client's p99 over the whole flood fell from 4.2-5.7 ms to 2.3-2.9 ms.)
func TestRefusedBulkRequestsWait(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	s, err := New(Config{Repository: &Repository{Resources: []Template{{IdentifierGlob: "*", Capacity: 100,
		Algorithm: Algorithm{Kind: FairShare, LeaseLength: 60, RefreshInterval: 15}}}}, Clock: clk, MaxResources: 100})
	if err != nil {
		t.Fatal(err)
	}
	var held []time.Duration
	s.hold = func(_ context.Context, d time.Duration) { held = append(held, d) }
	s.wall = func() time.Time { return testEpoch } // no bulk request runs long enough to pause
	request := func(client string, n int, wants float64) error {
		req := &pb.GetCapacityRequest{ClientId: proto.String(client)}
		for i := range n {
			req.Resource = append(req.Resource, &pb.ResourceRequest{ResourceId: proto.String(fmt.Sprintf("%s-%d", client, i)),
				Priority: proto.Int64(0), Wants: proto.Float64(wants)})
		}
		_, err := s.getCapacity(context.Background(), req)
		return err
	}
	if err := request("a", 90, 1); err != nil { // bulk, accepted
		t.Fatal(err)
	}
	if err := request("b", 20, 1); status.Code(err) != codes.ResourceExhausted { // small, refused
		t.Fatalf("20 more resources: %v, want ResourceExhausted", err)
	}
	if err := request("c", 10, -1); status.Code(err) != codes.InvalidArgument { // invalid
		t.Fatalf("negative wants: %v, want InvalidArgument", err)
	}
	if len(held) != 0 {
		t.Fatalf("held back %v before any refused bulk request", held)
	}
	if err := request("d", 100, 1); status.Code(err) != codes.ResourceExhausted { // bulk, refused
		t.Fatalf("100 more resources: %v, want ResourceExhausted", err)
	}
	if len(held) != 1 || held[0] != refusalDelay {
		t.Errorf("held back %v for a refused bulk request, want once %v", held, refusalDelay)
	}
}
