package server

import (
	"context"
	"slices"
	"time"

	"github.com/uber-go/tally/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
	"github.com/sluice-rpc/sluice/stats"
)

// Metrics records a Server's RPCs on a tally scope, from outside the
// server, as a gRPC interceptor: requests per RPC and outcome
// (stats.LeaseServerRequests: ok, invalid, exhausted, not_master,
// failed), their latency (stats.LeaseServerLatency, a histogram per RPC)
// and the resources, clients and leases the server holds (gauges,
// updated after every request). Only the four doorman.Capacity methods
// are recorded, so other services on the same gRPC server create no
// series.
//
// Through tally's Prometheus reporter (tools/internal/debughttp) the names are
// lease_server_requests{rpc="GetCapacity",outcome="ok"},
// lease_server_latency_bucket{rpc="GetCapacity",le="5e-05"} and so on.
type Metrics struct {
	srv                        *Server
	rpcs                       map[string]*rpcMetrics // by full method name
	resources, clients, leases tally.Gauge
}

type rpcMetrics struct {
	latency                                   tally.Histogram
	ok, invalid, exhausted, notMaster, failed tally.Counter
}

// The full method names of doorman.Capacity.
var capacityMethods = []string{"Discovery", "GetCapacity", "GetServerCapacity", "ReleaseCapacity"}

// NewMetrics returns the metrics of srv (not nil), recorded on scope (nil
// means tally.NoopScope). Every series exists from the start, at zero.
func NewMetrics(srv *Server, scope tally.Scope) *Metrics {
	if scope == nil {
		scope = tally.NoopScope
	}
	m := &Metrics{srv: srv, rpcs: make(map[string]*rpcMetrics, len(capacityMethods)),
		resources: scope.Gauge(stats.LeaseServerResources),
		clients:   scope.Gauge(stats.LeaseServerClients),
		leases:    scope.Gauge(stats.LeaseServerLeases),
	}
	for _, name := range capacityMethods {
		rs := scope.Tagged(map[string]string{stats.LeaseTagRPC: name})
		c := func(outcome string) tally.Counter {
			return rs.Tagged(map[string]string{stats.LeaseTagOutcome: outcome}).Counter(stats.LeaseServerRequests)
		}
		m.rpcs["/"+pb.Capacity_ServiceDesc.ServiceName+"/"+name] = &rpcMetrics{
			latency: rs.Histogram(stats.LeaseServerLatency, slices.Clone(stats.LeaseServerLatencyBuckets)),
			ok:      c(stats.LeaseOutcomeOK), invalid: c(stats.LeaseOutcomeInvalid),
			exhausted: c(stats.LeaseOutcomeExhausted), notMaster: c(stats.LeaseOutcomeNotMaster),
			failed: c(stats.LeaseOutcomeFailed),
		}
	}
	return m
}

// UnaryInterceptor returns the interceptor that records the RPCs, for
// grpc.UnaryInterceptor or grpc.ChainUnaryInterceptor on the gRPC server
// the Server is registered on.
func (m *Metrics) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		rm := m.rpcs[info.FullMethod]
		if rm == nil {
			return handler(ctx, req)
		}
		start := time.Now()
		resp, err := handler(ctx, req)
		rm.latency.RecordDuration(time.Since(start))
		rm.counter(resp, err).Inc(1)
		res, clients, leases := m.srv.Counts()
		m.resources.Update(float64(res))
		m.clients.Update(float64(clients))
		m.leases.Update(float64(leases))
		return resp, err
	}
}

// counter returns the counter of a request's outcome. A master's answers
// carry no mastership (the original client would take one for a
// redirect), a non-master's only that; Discovery says is_master.
func (rm *rpcMetrics) counter(resp any, err error) tally.Counter {
	if err != nil {
		switch status.Code(err) {
		case codes.InvalidArgument:
			return rm.invalid
		case codes.ResourceExhausted:
			return rm.exhausted
		}
		return rm.failed
	}
	switch r := resp.(type) {
	case *pb.DiscoveryResponse:
		if !r.GetIsMaster() {
			return rm.notMaster
		}
	case interface{ GetMastership() *pb.Mastership }:
		if r.GetMastership() != nil {
			return rm.notMaster
		}
	}
	return rm.ok
}
