package server

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/uber-go/tally/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-rpc/sluice/internal/debughttp"
	"github.com/sluice-rpc/sluice/internal/testhttp"
	"github.com/sluice-rpc/sluice/internal/testwait"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
)

// The interceptor on a real gRPC server counts each RPC by outcome and
// times it in a real histogram; the counts reach Prometheus's text format
// on the debug listener, beside the status page and pprof.
func TestMetricsInterceptor(t *testing.T) {
	s, err := New(Config{Repository: testConfig(FairShare, 100), MaxResources: 1})
	if err != nil {
		t.Fatal(err)
	}
	dm := debughttp.NewMetrics(nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.UnaryInterceptor(NewMetrics(s, dm.Scope()).UnaryInterceptor()))
	s.Register(g)
	done := make(chan struct{})
	go func() { defer close(done); g.Serve(lis) }()
	t.Cleanup(func() { g.Stop(); testwait.Recv(t, done, "the gRPC server to stop") })
	debug, err := debughttp.Serve("127.0.0.1:0", dm, map[string]http.Handler{"/status": s})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { debug.Close() })

	c := dial(t, lis.Addr().String())
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
	dm.Close() // the last report: /metrics has every value

	body := testhttp.OK(t, "http://"+debug.Addr()+"/metrics")
	for _, want := range []string{
		`lease_server_requests{outcome="ok",rpc="GetCapacity"} 2`,
		`lease_server_requests{outcome="invalid",rpc="GetCapacity"} 1`,
		`lease_server_requests{outcome="exhausted",rpc="GetCapacity"} 1`,
		`lease_server_requests{outcome="not_master",rpc="GetCapacity"} 0`,
		`lease_server_requests{outcome="ok",rpc="Discovery"} 1`,
		`lease_server_requests{outcome="ok",rpc="ReleaseCapacity"} 1`,
		`lease_server_requests{outcome="ok",rpc="GetServerCapacity"} 0`,
		`lease_server_latency_bucket{rpc="GetCapacity",le="1e-05"}`,
		`lease_server_latency_bucket{rpc="GetCapacity",le="+Inf"} 4`,
		`lease_server_latency_count{rpc="GetCapacity"} 4`,
		`lease_server_resources 1`,
		`lease_server_clients 1`,
		`lease_server_leases 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
	if page := testhttp.OK(t, "http://"+debug.Addr()+"/status?format=json"); !strings.Contains(page, `"id": "c1"`) {
		t.Errorf("/status:\n%s", page)
	}
	if page := testhttp.OK(t, "http://"+debug.Addr()+"/debug/pprof/goroutine?debug=1"); !strings.Contains(page, "goroutine profile:") {
		t.Errorf("pprof:\n%.500s", page)
	}
}

// A non-master's answers carry only the master's address; an error
// other than a refusal is "failed".
func TestMetricsOutcomes(t *testing.T) {
	m := NewMetrics(nil, nil)
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
	s := newTestServer(b, testConfig(FairShare, 100), nil)
	dm := debughttp.NewMetrics(nil)
	defer dm.Close()
	ic := NewMetrics(s, dm.Scope()).UnaryInterceptor()
	info := &grpc.UnaryServerInfo{FullMethod: "/doorman.Capacity/GetCapacity"}
	resp := &pb.GetCapacityResponse{}
	h := func(context.Context, any) (any, error) { return resp, nil }
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		ic(ctx, nil, info, h)
	}
}
