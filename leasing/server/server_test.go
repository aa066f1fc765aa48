package server

import (
	"context"
	"math"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/uber-go/tally/v4"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-rpc/sluice/clock"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
	"github.com/sluice-rpc/sluice/stats"
)

// The server answers every request, however soon after the last (the 5 s
// minimum is the original client's rule, not its server's), and a new
// wants takes effect at once.
func TestServerAnswersEveryRequest(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	s := newTestServer(t, testConfig(FairShare, 100), clk)
	if got := ask(t, s, "a", 10); got != 10 {
		t.Fatalf("first ask got %v, want 10", got)
	}
	if got := ask(t, s, "a", 20); got != 20 {
		t.Fatalf("ask again at once with wants 20 got %v, want 20", got)
	}
	clk.Add(time.Second)
	if got := ask(t, s, "b", 100); got != 80 {
		t.Fatalf("b got %v while a holds 20, want 80", got)
	}
	clk.Add(100 * time.Millisecond)
	if got := ask(t, s, "a", 70); got != 20 {
		t.Fatalf("a asking for 70 got %v while b holds 80, want the 20 left", got)
	}
	if got := ask(t, s, "b", 100); got != 50 {
		t.Fatalf("b renewing at once got %v, want its fair share 50", got)
	}
	if got := ask(t, s, "a", 70); got != 50 {
		t.Fatalf("a renewing at once got %v, want its fair share 50", got)
	}
}

func TestServerLeaseFields(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	cfg := testConfig(FairShare, 100)
	cfg.Resources[0].SafeCapacity = nil
	s := newTestServer(t, cfg, clk)
	ask(t, s, "a", 10)
	resp, err := s.getCapacity(context.Background(), &pb.GetCapacityRequest{
		ClientId: proto.String("b"),
		Resource: []*pb.ResourceRequest{{ResourceId: proto.String("r"), Priority: proto.Int64(1), Wants: proto.Float64(5)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := resp.Response[0]
	if got, want := r.GetGets().GetExpiryTime(), testEpoch.Unix()+60; got != want {
		t.Errorf("expiry_time = %d, want %d", got, want)
	}
	if got := r.GetGets().GetRefreshInterval(); got != 15 {
		t.Errorf("refresh_interval = %d, want 15", got)
	}
	if got := r.GetSafeCapacity(); got != 50 {
		t.Errorf("dynamic safe_capacity = %v, want 100/2 clients = 50", got)
	}
	static := -1.0
	cfg = testConfig(FairShare, 100)
	cfg.Resources[0].SafeCapacity = &static
	if err := s.SetRepository(cfg); err != nil {
		t.Fatal(err)
	}
	clk.Add(5 * time.Second)
	resp, _ = s.getCapacity(context.Background(), &pb.GetCapacityRequest{
		ClientId: proto.String("b"),
		Resource: []*pb.ResourceRequest{{ResourceId: proto.String("r"), Priority: proto.Int64(1), Wants: proto.Float64(5)}},
	})
	if got := resp.Response[0].GetSafeCapacity(); got != -1 {
		t.Errorf("static safe_capacity = %v, want -1 (unlimited)", got)
	}
}

func TestServerExpiredLeasesAreCleaned(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	s := newTestServer(t, testConfig(FairShare, 100), clk)
	if got := ask(t, s, "a", 100); got != 100 {
		t.Fatalf("a got %v, want 100", got)
	}
	if got := ask(t, s, "b", 100); got != 0 {
		t.Fatalf("b got %v while a holds everything, want 0", got)
	}
	clk.Add(60 * time.Second) // a's lease expires; b's first lease too
	if got := ask(t, s, "b", 100); got != 100 {
		t.Fatalf("b got %v after a's lease expired, want 100", got)
	}
}

func TestServerRelease(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	s := newTestServer(t, testConfig(FairShare, 100), clk)
	ask(t, s, "a", 100)
	if _, err := s.releaseCapacity(context.Background(), &pb.ReleaseCapacityRequest{
		ClientId: proto.String("a"), ResourceId: []string{"r", "unknown"},
	}); err != nil {
		t.Fatal(err)
	}
	if got := ask(t, s, "b", 100); got != 100 {
		t.Fatalf("b got %v right after a released, want 100", got)
	}
}

func TestServerLearningMode(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	cfg := testConfig(FairShare, 100)
	cfg.Resources[0].Algorithm.LearningModeDuration = int64p(30)
	s := newTestServer(t, cfg, clk)
	has := func(client string, wants, has float64) float64 {
		resp, err := s.getCapacity(context.Background(), &pb.GetCapacityRequest{
			ClientId: proto.String(client),
			Resource: []*pb.ResourceRequest{{
				ResourceId: proto.String("r"), Priority: proto.Int64(0), Wants: proto.Float64(wants),
				Has: &pb.Lease{ExpiryTime: proto.Int64(testEpoch.Unix() + 30), RefreshInterval: proto.Int64(15), Capacity: proto.Float64(has)},
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Response[0].GetGets().GetCapacity()
	}
	if got := has("a", 80, 70); got != 70 {
		t.Errorf("learning: client reporting has 70 got %v, want 70", got)
	}
	if got := ask(t, s, "b", 50); got != 0 {
		t.Errorf("learning: new client got %v, want 0", got)
	}
	clk.Add(30 * time.Second)
	if got := ask(t, s, "b", 50); got != 30 {
		t.Errorf("after learning: b got %v, want 30 (a still holds 70)", got)
	}
}

func TestServerExplicitZeroLearningMode(t *testing.T) {
	s := newTestServer(t, testConfig(FairShare, 100), clock.NewFake(testEpoch))
	if got := ask(t, s, "a", 50); got != 50 {
		t.Fatalf("with learning_mode_duration 0 got %v, want 50 at once", got)
	}
}

func TestServerUnmatchedTemplate(t *testing.T) {
	scope := tally.NewTestScope("", nil)
	cfg := testConfig(FairShare, 10)
	s, err := New(Config{Repository: cfg, Clock: clock.NewFake(testEpoch), Scope: scope})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.getCapacity(context.Background(), &pb.GetCapacityRequest{
		ClientId: proto.String("a"),
		Resource: []*pb.ResourceRequest{{ResourceId: proto.String("other"), Priority: proto.Int64(0), Wants: proto.Float64(1234)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Response[0].GetGets().GetCapacity(); got != 1234 {
		t.Errorf("unmatched resource got %v, want what it asked (1234)", got)
	}
	if got := scope.Snapshot().Counters()[stats.LeaseUnmatchedTemplate+"+"].Value(); got != 1 {
		t.Errorf("%s = %d, want 1", stats.LeaseUnmatchedTemplate, got)
	}
}

func TestServerRejectsInvalidRequests(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	s, err := New(Config{Repository: testConfig(FairShare, 100), Clock: clk, MaxResourcesPerRequest: 2, MaxIDLength: 8})
	if err != nil {
		t.Fatal(err)
	}
	rr := func(id string, wants float64) *pb.ResourceRequest {
		return &pb.ResourceRequest{ResourceId: proto.String(id), Priority: proto.Int64(0), Wants: proto.Float64(wants)}
	}
	tests := map[string]*pb.GetCapacityRequest{
		"empty client id":   {ClientId: proto.String(""), Resource: []*pb.ResourceRequest{rr("r", 1)}},
		"long client id":    {ClientId: proto.String("123456789"), Resource: []*pb.ResourceRequest{rr("r", 1)}},
		"empty resource id": {ClientId: proto.String("a"), Resource: []*pb.ResourceRequest{rr("r", 1), rr("", 1)}},
		"long resource id":  {ClientId: proto.String("a"), Resource: []*pb.ResourceRequest{rr("r", 1), rr("123456789", 1)}},
		"negative wants":    {ClientId: proto.String("a"), Resource: []*pb.ResourceRequest{rr("r", -1)}},
		"NaN wants":         {ClientId: proto.String("a"), Resource: []*pb.ResourceRequest{rr("r", math.NaN())}},
		"infinite wants":    {ClientId: proto.String("a"), Resource: []*pb.ResourceRequest{rr("r", math.Inf(1))}},
		"too many":          {ClientId: proto.String("a"), Resource: []*pb.ResourceRequest{rr("r", 1), rr("s", 1), rr("t", 1)}},
		"duplicate":         {ClientId: proto.String("a"), Resource: []*pb.ResourceRequest{rr("r", 1), rr("r", 1)}},
	}
	for name, req := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := s.getCapacity(context.Background(), req)
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("got %v, want InvalidArgument", err)
			}
		})
	}
	// No state changed: a's first valid request is answered in full.
	if got := ask(t, s, "a", 100); got != 100 {
		t.Fatalf("after rejected requests a got %v, want 100 (no state may change)", got)
	}
	if _, err := s.releaseCapacity(context.Background(), &pb.ReleaseCapacityRequest{ClientId: proto.String("")}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("ReleaseCapacity with empty client id: %v, want InvalidArgument", err)
	}
}

func TestServerDiscovery(t *testing.T) {
	s, err := New(Config{Repository: testConfig(FairShare, 1), Address: "10.0.0.1:7000"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.discovery(context.Background(), &pb.DiscoveryRequest{})
	if err != nil || !d.GetIsMaster() || d.GetMastership().GetMasterAddress() != "10.0.0.1:7000" {
		t.Fatalf("Discovery = %v, %v", d, err)
	}
}

func TestServerStatusPage(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	s := newTestServer(t, testConfig(FairShare, 100), clk)
	ask(t, s, "client-one", 30)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	body := rec.Body.String()
	for _, want := range []string{`resource "r"`, "FAIR_SHARE", "client-one", "handed out 30"} {
		if !strings.Contains(body, want) {
			t.Errorf("status page lacks %q:\n%s", want, body)
		}
	}
}

func TestServerForgetsResourcesWithoutClients(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	s := newTestServer(t, testConfig(FairShare, 100), clk)
	ask(t, s, "a", 10)
	clk.Add(61 * time.Second) // a's lease expired
	resp, err := s.getCapacity(context.Background(), &pb.GetCapacityRequest{
		ClientId: proto.String("b"),
		Resource: []*pb.ResourceRequest{{ResourceId: proto.String("other"), Priority: proto.Int64(0), Wants: proto.Float64(1)}},
	})
	if err != nil || len(resp.Response) != 1 {
		t.Fatalf("GetCapacity: %v %v", resp, err)
	}
	if s.lookup("r") != nil || s.lookup("other") == nil {
		t.Fatalf("after the sweep: r kept %v, other kept %v; want only \"other\"", s.lookup("r") != nil, s.lookup("other") != nil)
	}
	if res, clients, leases := s.Counts(); res != 1 || clients != 1 || leases != 1 {
		t.Fatalf("Counts() = %d resources, %d clients, %d leases; want 1, 1, 1 (b on other)", res, clients, leases)
	}
	if got := ask(t, s, "c", 100); got != 100 {
		t.Fatalf("r after it was forgotten: got %v, want 100", got)
	}
}

// A configuration pushed after learning mode ended must not put resources
// back into it.
func TestSetConfigDoesNotRestartLearningMode(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	cfg := testConfig(FairShare, 100)
	cfg.Resources[0].Algorithm.LearningModeDuration = nil // learning for lease_length (60 s)
	s := newTestServer(t, cfg, clk)
	ask(t, s, "a", 10) // the resource exists, in learning mode
	clk.Add(100 * time.Second)
	longer := testConfig(FairShare, 100)
	longer.Resources[0].Algorithm.LearningModeDuration = nil
	longer.Resources[0].Algorithm.LeaseLength = 300
	if err := s.SetRepository(longer); err != nil {
		t.Fatal(err)
	}
	if got := ask(t, s, "b", 10); got != 10 {
		t.Fatalf("a new client after the config push got %v, want 10 (learning mode had ended)", got)
	}
}

// Short leases load and are honoured: the server has no minimum refresh
// interval of its own (the original accepts lease_length: 1).
func TestShortLeases(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	cfg := testConfig(FairShare, 100)
	cfg.Resources[0].Algorithm.LeaseLength = 3
	cfg.Resources[0].Algorithm.RefreshInterval = 1
	s := newTestServer(t, cfg, clk)
	if got := ask(t, s, "a", 100); got != 100 {
		t.Fatalf("a got %v, want 100", got)
	}
	clk.Add(2 * time.Second)
	if got := ask(t, s, "b", 100); got != 0 {
		t.Fatalf("b got %v 2 s into a's 3 s lease, want 0", got)
	}
	clk.Add(time.Second) // a's lease (from t=0) has expired, b's (from t=2) has not
	if got := ask(t, s, "b", 100); got != 100 {
		t.Fatalf("b got %v after a's 3 s lease expired, want 100", got)
	}
	// From 3 s leases to 1 s: b's renewal expires before a's older lease
	// would have, and is forgotten first.
	cfg = testConfig(FairShare, 100)
	cfg.Resources[0].Algorithm.LeaseLength = 1
	cfg.Resources[0].Algorithm.RefreshInterval = 1
	if err := s.SetRepository(cfg); err != nil {
		t.Fatalf("SetRepository with a 1 s lease: %v", err)
	}
	if got := ask(t, s, "c", 100); got != 0 {
		t.Fatalf("c got %v while b holds 100 for 3 s more, want 0", got)
	}
	if got := ask(t, s, "b", 40); got != 40 {
		t.Fatalf("b renewing for 40 got %v", got)
	}
	clk.Add(time.Second)
	if got := ask(t, s, "c", 100); got != 100 {
		t.Fatalf("c got %v once b's 1 s lease expired, want 100", got)
	}
	counts(t, s, 1, 1, 1)
}

// In learning mode a client gets back what it says it has, but never more
// than the capacity left.
func TestLearningModeEchoIsCapped(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	cfg := testConfig(FairShare, 100)
	cfg.Resources[0].Algorithm.LearningModeDuration = nil // learning for 60 s
	s := newTestServer(t, cfg, clk)
	has := func(client string, capacity float64) float64 {
		t.Helper()
		resp, err := s.getCapacity(context.Background(), &pb.GetCapacityRequest{
			ClientId: proto.String(client),
			Resource: []*pb.ResourceRequest{{ResourceId: proto.String("r"), Priority: proto.Int64(0), Wants: proto.Float64(10),
				Has: &pb.Lease{ExpiryTime: proto.Int64(clk.Now().Unix() + 60), RefreshInterval: proto.Int64(15), Capacity: proto.Float64(capacity)}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Response[0].GetGets().GetCapacity()
	}
	if got := has("greedy", 1e308); got != 100 {
		t.Fatalf("a claim of 1e308 got %v, want the capacity 100", got)
	}
	if got := has("honest", 30); got != 0 {
		t.Fatalf("with the capacity taken, a claim of 30 got %v, want 0", got)
	}
}
