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

// rpcMetrics records a Server's RPCs on Config.Scope (see
// Server.UnaryInterceptor).
type rpcMetrics struct {
	srv                        *Server
	rpcs                       map[string]*rpcSeries // by full method name
	resources, clients, leases tally.Gauge
}

type rpcSeries struct {
	latency                                   tally.Histogram
	ok, invalid, exhausted, notMaster, failed tally.Counter
}

// The full method names of doorman.Capacity.
var capacityMethods = []string{"Discovery", "GetCapacity", "GetServerCapacity", "ReleaseCapacity"}

// newRPCMetrics returns the metrics of srv's RPCs, recorded on scope (not
// nil). Every series exists from the start, at zero.
func newRPCMetrics(srv *Server, scope tally.Scope) *rpcMetrics {
	m := &rpcMetrics{srv: srv, rpcs: make(map[string]*rpcSeries, len(capacityMethods)),
		resources: scope.Gauge(stats.LeaseServerResources),
		clients:   scope.Gauge(stats.LeaseServerClients),
		leases:    scope.Gauge(stats.LeaseServerLeases),
	}
	for _, name := range capacityMethods {
		rs := scope.Tagged(map[string]string{stats.LeaseTagRPC: name})
		c := func(outcome string) tally.Counter {
			return rs.Tagged(map[string]string{stats.LeaseTagOutcome: outcome}).Counter(stats.LeaseServerRequests)
		}
		m.rpcs["/"+pb.Capacity_ServiceDesc.ServiceName+"/"+name] = &rpcSeries{
			latency: rs.Histogram(stats.LeaseServerLatency, slices.Clone(stats.LeaseServerLatencyBuckets)),
			ok:      c(stats.LeaseOutcomeOK), invalid: c(stats.LeaseOutcomeInvalid),
			exhausted: c(stats.LeaseOutcomeExhausted), notMaster: c(stats.LeaseOutcomeNotMaster),
			failed: c(stats.LeaseOutcomeFailed),
		}
	}
	return m
}

// UnaryInterceptor returns the interceptor that records s's RPCs on
// Config.Scope: requests per RPC and outcome (stats.LeaseServerRequests:
// ok, invalid, exhausted, not_master, failed), their latency
// (stats.LeaseServerLatency, a histogram per RPC) and the resources,
// clients and leases the server holds (gauges, updated after every
// request). Only the four doorman.Capacity methods are recorded, so other
// services on the same gRPC server create no series. The series exist, at
// zero, from the first call of UnaryInterceptor or Serve.
//
// Serve installs it. Give it only to a gRPC server of your own that s is
// registered on (Register), with grpc.ChainUnaryInterceptor; given to
// Serve as well, it would count every RPC twice.
//
// Through tally's Prometheus reporter (tools/internal/debughttp) the names
// are lease_server_requests{rpc="GetCapacity",outcome="ok"},
// lease_server_latency_bucket{rpc="GetCapacity",le="5e-05"} and so on.
func (s *Server) UnaryInterceptor() grpc.UnaryServerInterceptor {
	s.rpcOnce.Do(func() { s.rpcMetrics = newRPCMetrics(s, s.scope) })
	return s.rpcMetrics.intercept
}

func (m *rpcMetrics) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
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

// counter returns the counter of a request's outcome. A master's answers
// carry no mastership (the original client would take one for a
// redirect), a non-master's only that; Discovery says is_master.
func (rm *rpcSeries) counter(resp any, err error) tally.Counter {
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
