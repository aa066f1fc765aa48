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
	"github.com/sluice-rpc/sluice/internal/testkit/slowtest"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
)

// kvRepo is a configured resource, "kv-rps", and a "*" template for every
// other id.
func kvRepo() *Repository {
	alg := Algorithm{Kind: FairShare, LeaseLength: 60, RefreshInterval: 15, LearningModeDuration: int64p(0)}
	return &Repository{Resources: []Template{
		{IdentifierGlob: "kv-rps", Capacity: 100, Algorithm: alg},
		{IdentifierGlob: "*", Capacity: 100, Algorithm: alg},
	}}
}

// askIDs sends one GetCapacity from client at ctx's source for ids, each
// wanting 1.
func askIDs(ctx context.Context, s *Server, client string, ids ...string) (*pb.GetCapacityResponse, error) {
	req := &pb.GetCapacityRequest{ClientId: proto.String(client)}
	for _, id := range ids {
		req.Resource = append(req.Resource, &pb.ResourceRequest{ResourceId: proto.String(id), Priority: proto.Int64(0), Wants: proto.Float64(1)})
	}
	return s.getCapacity(ctx, req)
}

func idsOf(prefix string, from, to int) []string {
	ids := make([]string, 0, to-from)
	for i := from; i < to; i++ {
		ids = append(ids, fmt.Sprintf("%s-%d", prefix, i))
	}
	return ids
}

// sourceHolds checks what source addr holds of the three tables.
func sourceHolds(t *testing.T, s *Server, addr string, clients, resources, leases int) {
	t.Helper()
	srcs, _ := s.topSources(1 << 30)
	for _, src := range srcs {
		if src.Source == addr {
			if src.Clients != clients || src.Resources != resources || src.Leases != leases {
				t.Fatalf("source %s holds %d clients, %d resources, %d leases; want %d, %d, %d",
					addr, src.Clients, src.Resources, src.Leases, clients, resources, leases)
			}
			return
		}
	}
	if clients+resources+leases != 0 {
		t.Fatalf("source %s holds nothing; want %d clients, %d resources, %d leases", addr, clients, resources, leases)
	}
}

// A full resource table is shared between sources as the client table
// is: a source holding less than its share takes the place of the least
// recently asked resource of the source holding the most (whose leases
// of it are released); a source at its share is refused; a configured
// resource is always created, and belongs to no source.
func TestFullResourceTableIsSharedBetweenSources(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	s, err := New(Config{Repository: kvRepo(), Clock: clk, MaxResources: 10})
	if err != nil {
		t.Fatal(err)
	}
	a, b := from("127.0.0.2"), from("127.0.0.3")
	for i := range 10 {
		if _, err := askIDs(a, s, "flood", fmt.Sprintf("a-%d", i)); err != nil {
			t.Fatal(err)
		}
		clk.Add(time.Second)
	}
	if _, err := askIDs(a, s, "flood", "a-10"); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("an eleventh resource of the only source: %v, want ResourceExhausted", err)
	}
	// a-0 is asked for again: a-1 is now the least recently asked.
	if _, err := askIDs(a, s, "flood", "a-0"); err != nil {
		t.Fatal(err)
	}
	// The configured resource is granted in the full table, and belongs
	// to nobody.
	if resp, err := askIDs(b, s, "b0", "kv-rps"); err != nil || resp.Response[0].GetGets().GetCapacity() != 1 {
		t.Fatalf("kv-rps from another source in a full resource table: %v, %v", resp, err)
	}
	sourceHolds(t, s, "127.0.0.3", 1, 0, 1)
	// b's share of the resource table is 10 / 2: its four resources take
	// the places of a's least recently asked ones, a-1 ... a-5 (kv-rps
	// counts, beyond the limit: five have to go).
	if _, err := askIDs(b, s, "b0", idsOf("b", 0, 4)...); err != nil {
		t.Fatalf("four resources of a source holding none: %v", err)
	}
	for i := 1; i <= 5; i++ {
		if s.lookup(fmt.Sprintf("a-%d", i)) != nil {
			t.Fatalf("a-%d is still held; want a-1 to a-5, the least recently asked, forgotten", i)
		}
	}
	if s.lookup("a-0") == nil || s.lookup("a-6") == nil {
		t.Fatal("a-0 or a-6 was forgotten")
	}
	sourceHolds(t, s, "127.0.0.2", 1, 5, 5)
	sourceHolds(t, s, "127.0.0.3", 1, 4, 5)
	counts(t, s, 10, 2, 10)
	// a is at its share, and b has none to take from a.
	_, err = askIDs(a, s, "flood", "a-1")
	wantRefusedAtShare(t, err, "a's forgotten resource, again")
	if _, err = askIDs(b, s, "b0", "b-4"); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("b's fifth resource, a holding five: %v, want ResourceExhausted", err)
	}
	// Renewals go on; the flood's client still holds its other leases.
	if _, err := askIDs(a, s, "flood", "a-0", "a-6", "a-7", "a-8", "a-9"); err != nil {
		t.Fatalf("a's renewals: %v", err)
	}
	if _, err := askIDs(b, s, "b0", append(idsOf("b", 0, 4), "kv-rps")...); err != nil {
		t.Fatalf("b's renewals: %v", err)
	}
	// A forgotten resource is reaped no second time: its leases' expiry
	// passes, and the counts add up.
	clk.Add(2 * time.Minute)
	if _, err := askIDs(b, s, "b1", "kv-rps"); err != nil {
		t.Fatal(err)
	}
	s.reap(clk.Now(), 1000, true)
	counts(t, s, 1, 1, 1)
	checkClientTable(t, s)
}

// A full lease table is shared between sources: a source holding fewer
// leases than its share releases the leases of the least recently asking
// client of the source holding the most.
func TestFullLeaseTableIsSharedBetweenSources(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	s, err := New(Config{Repository: kvRepo(), Clock: clk, MaxLeases: 20})
	if err != nil {
		t.Fatal(err)
	}
	a, b := from("127.0.0.2"), from("127.0.0.3")
	shared := idsOf("shared", 0, 4)
	for i := range 5 {
		if _, err := askIDs(a, s, fmt.Sprintf("a%d", i), shared...); err != nil {
			t.Fatal(err)
		}
		clk.Add(time.Second)
	}
	counts(t, s, 4, 5, 20)
	if _, err := askIDs(a, s, "a5", "kv-rps"); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a 21st lease of the only source: %v, want ResourceExhausted", err)
	}
	// b holds no lease: its client's lease of kv-rps takes a0's four.
	if resp, err := askIDs(b, s, "b0", "kv-rps"); err != nil || resp.Response[0].GetGets().GetCapacity() != 1 {
		t.Fatalf("kv-rps from another source in a full lease table: %v, %v", resp, err)
	}
	if s.clientKnown("a0") || !s.clientKnown("a1") {
		t.Fatal("want a0, the least recently asking client of a, evicted, and only it")
	}
	sourceHolds(t, s, "127.0.0.2", 4, 4, 16)
	sourceHolds(t, s, "127.0.0.3", 1, 0, 1)
	// b's share is 20 / 2: nine more leases fit by evicting (three of a's
	// clients); then b is at its share.
	if _, err := askIDs(b, s, "b0", idsOf("b", 0, 9)...); err != nil {
		t.Fatalf("nine more leases: %v", err)
	}
	sourceHolds(t, s, "127.0.0.3", 1, 9, 10)
	sourceHolds(t, s, "127.0.0.2", 2, 4, 8)
	// Two leases are left, and a takes them; then b is at its share.
	if _, err := askIDs(a, s, "a5", shared[:2]...); err != nil {
		t.Fatalf("the last two leases: %v", err)
	}
	_, err = askIDs(b, s, "b1", "kv-rps")
	wantRefusedAtShare(t, err, "b's eleventh lease")
	checkClientTable(t, s)
}

// Over gRPC: 127.0.0.2 fills the resource table with bulk requests of
// resource ids; a client of 127.0.0.3 is then granted the configured
// resource, and a resource of its own. With the default table of 100,000
// resources under the slow gate.
func TestResourceFloodLeavesRoomForAnotherSource(t *testing.T) {
	maxResources := 3 * DefaultMaxResourcesPerRequest
	if slowtest.Enabled() {
		maxResources = DefaultMaxResources
	}
	s := newServer(t, Config{Repository: kvRepo(), MaxResources: maxResources})
	addr := startServer(t, s, "")
	flood, other := dialFrom(t, addr, "127.0.0.2"), dialFrom(t, addr, "127.0.0.3")
	ask := func(c pb.CapacityClient, client string, ids ...string) (*pb.GetCapacityResponse, error) {
		req := &pb.GetCapacityRequest{ClientId: proto.String(client)}
		for _, id := range ids {
			req.Resource = append(req.Resource, &pb.ResourceRequest{ResourceId: proto.String(id), Priority: proto.Int64(0), Wants: proto.Float64(1)})
		}
		return c.GetCapacity(context.Background(), req)
	}
	for i := 0; i < maxResources; i += DefaultMaxResourcesPerRequest {
		if _, err := ask(flood, fmt.Sprintf("flood-%d", i), idsOf("flood", i, i+DefaultMaxResourcesPerRequest)...); err != nil {
			t.Fatalf("flood request %d: %v", i/DefaultMaxResourcesPerRequest, err)
		}
	}
	if _, err := ask(flood, "flood-more", "flood-more"); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("one more resource from the flood: %v, want ResourceExhausted", err)
	}
	if resp, err := ask(other, "kv-client", "kv-rps"); err != nil || resp.Response[0].GetGets().GetCapacity() != 1 {
		t.Fatalf("kv-rps from 127.0.0.3 after the flood: %v, %v", resp, err)
	}
	if resp, err := ask(other, "kv-client", "kv-rps", "own"); err != nil || resp.Response[1].GetGets().GetCapacity() != 1 {
		t.Fatalf("a resource of its own from 127.0.0.3 after the flood: %v, %v", resp, err)
	}
	if _, err := ask(flood, "flood-more", "flood-more"); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("one more resource from the flood, after another source's: %v, want ResourceExhausted", err)
	}
	checkClientTable(t, s)
}
