package server

import (
	"context"
	"net"
	"testing"

	"github.com/uber-go/tally/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
	"github.com/sluice-rpc/sluice/stats"
)

// The interceptor on a real gRPC server counts each RPC by outcome, times
// it in a histogram with the buckets Prometheus shows, and keeps the
// server's counts in gauges: on the gRPC server Serve makes, and on one of
// the caller's that has UnaryInterceptor. (That they reach Prometheus's
// text format on the debug listener is checked where /metrics is served:
// sluice-lab doorman serve's test in the tools module.)
func TestMetricsInterceptor(t *testing.T) {
	t.Run("Serve", func(t *testing.T) {
		testMetrics(t, func(s *Server) string { return serveWith(t, s) })
	})
	t.Run("Register", func(t *testing.T) {
		testMetrics(t, func(s *Server) string {
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			g := grpc.NewServer(grpc.UnaryInterceptor(s.UnaryInterceptor()))
			s.Register(g)
			done := make(chan struct{})
			go func() { defer close(done); g.Serve(lis) }()
			t.Cleanup(func() { g.Stop(); testwait.Recv(t, done, "the gRPC server to stop") })
			return lis.Addr().String()
		})
	})
}

// testMetrics makes RPCs of every outcome to a server serve starts, and
// checks the metrics recorded on its Config.Scope.
func testMetrics(t *testing.T, serve func(*Server) string) {
	scope := tally.NewTestScope("", nil)
	s, err := New(Config{Repository: testConfig(FairShare, 100), MaxResources: 1, Scope: scope})
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, serve(s))
	ctx := context.Background()
	get := func(client, id string, wants float64) error {
		_, err := c.GetCapacity(ctx, &pb.GetCapacityRequest{ClientId: proto.String(client), Resource: []*pb.ResourceRequest{
			{ResourceId: proto.String(id), Priority: proto.Int64(0), Wants: proto.Float64(wants)}}})
		return err
	}
	for i, want := range []codes.Code{codes.OK, codes.OK, codes.InvalidArgument, codes.ResourceExhausted} {
		var err error
		switch i {
		case 0, 1:
			err = get(clientName(i), "r", 10)
		case 2:
			err = get("a", "r", -1)
		case 3:
			err = get("a", "other", 1) // a second resource, beyond MaxResources
		}
		if status.Code(err) != want {
			t.Fatalf("request %d: %v, want %v", i, err, want)
		}
	}
	if _, err := c.Discovery(ctx, &pb.DiscoveryRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReleaseCapacity(ctx, &pb.ReleaseCapacityRequest{ClientId: proto.String("c0"), ResourceId: []string{"r"}}); err != nil {
		t.Fatal(err)
	}
	snap := scope.Snapshot()
	counters, gauges, histograms := snap.Counters(), snap.Gauges(), snap.Histograms()
	for _, want := range []struct {
		rpc, outcome string
		n            int64
	}{
		{"GetCapacity", stats.LeaseOutcomeOK, 2},
		{"GetCapacity", stats.LeaseOutcomeInvalid, 1},
		{"GetCapacity", stats.LeaseOutcomeExhausted, 1},
		{"GetCapacity", stats.LeaseOutcomeNotMaster, 0},
		{"Discovery", stats.LeaseOutcomeOK, 1},
		{"ReleaseCapacity", stats.LeaseOutcomeOK, 1},
		{"GetServerCapacity", stats.LeaseOutcomeOK, 0},
	} {
		key := stats.LeaseServerRequests + "+" + stats.LeaseTagOutcome + "=" + want.outcome + "," + stats.LeaseTagRPC + "=" + want.rpc
		c := counters[key]
		if c == nil {
			t.Errorf("no counter %s", key)
			continue
		}
		if c.Value() != want.n {
			t.Errorf("%s = %d, want %d", key, c.Value(), want.n)
		}
	}
	h := histograms[stats.LeaseServerLatency+"+"+stats.LeaseTagRPC+"=GetCapacity"]
	if h == nil {
		t.Fatal("no GetCapacity latency histogram")
	}
	var timed int64
	for _, n := range h.Durations() {
		timed += n
	}
	if timed != 4 || len(h.Durations()) != len(stats.LeaseServerLatencyBuckets)+1 {
		t.Errorf("GetCapacity latency: %d requests timed in %d buckets, want 4 in %d", timed, len(h.Durations()), len(stats.LeaseServerLatencyBuckets)+1)
	}
	for _, name := range []string{stats.LeaseServerResources, stats.LeaseServerClients, stats.LeaseServerLeases} {
		if g := gauges[name+"+"]; g == nil || g.Value() != 1 {
			t.Errorf("gauge %s = %v, want 1", name, g)
		}
	}
}

// A non-master's answers carry only the master's address; an error
// other than a refusal is "failed".
func TestMetricsOutcomes(t *testing.T) {
	m := newRPCMetrics(nil, tally.NoopScope)
	rm := m.rpcs["/doorman.Capacity/GetCapacity"]
	master := &pb.Mastership{MasterAddress: proto.String("10.0.0.2:7000")}
	for _, tc := range []struct {
		resp any
		err  error
		want tally.Counter
	}{
		{&pb.GetCapacityResponse{}, nil, rm.ok},
		{&pb.GetCapacityResponse{Mastership: master}, nil, rm.notMaster},
		{&pb.GetServerCapacityResponse{Mastership: master}, nil, rm.notMaster},
		{&pb.ReleaseCapacityResponse{Mastership: master}, nil, rm.notMaster},
		{&pb.DiscoveryResponse{IsMaster: proto.Bool(false), Mastership: master}, nil, rm.notMaster},
		{&pb.DiscoveryResponse{IsMaster: proto.Bool(true), Mastership: master}, nil, rm.ok},
		{nil, status.Error(codes.InvalidArgument, "x"), rm.invalid},
		{nil, status.Error(codes.ResourceExhausted, "x"), rm.exhausted},
		{nil, status.Error(codes.Canceled, "x"), rm.failed},
		{nil, context.DeadlineExceeded, rm.failed},
	} {
		if got := rm.counter(tc.resp, tc.err); got != tc.want {
			t.Errorf("%T %v: wrong counter", tc.resp, tc.err)
		}
	}
}

// BenchmarkMetricsInterceptor is the interceptor's cost per request,
// around a handler that does nothing.
func BenchmarkMetricsInterceptor(b *testing.B) {
	// A root scope as a process's metrics have one, reporting nowhere.
	scope, closer := tally.NewRootScope(tally.ScopeOptions{Reporter: tally.NullStatsReporter}, 0)
	defer closer.Close()
	s, err := New(Config{Repository: testConfig(FairShare, 100), Scope: scope})
	if err != nil {
		b.Fatal(err)
	}
	ic := s.UnaryInterceptor()
	info := &grpc.UnaryServerInfo{FullMethod: "/doorman.Capacity/GetCapacity"}
	resp := &pb.GetCapacityResponse{}
	h := func(context.Context, any) (any, error) { return resp, nil }
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		ic(ctx, nil, info, h)
	}
}
