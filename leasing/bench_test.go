package leasing

import (
	"context"
	"fmt"
	"math/rand"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-rpc/sluice/clock"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
)

// BenchmarkAlgorithmRun is one full algorithm run over 10,000 clients:
// computing the shares and every client's target.
func BenchmarkAlgorithmRun(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	wants := make([]float64, 10000)
	for i := range wants {
		wants[i] = rng.Float64() * 100
	}
	gets := make([]float64, len(wants))
	for _, kind := range []Kind{ProportionalShare, FairShare} {
		b.Run(fmt.Sprintf("%v/clients=%d", kind, len(wants)), func(b *testing.B) {
			b.ReportAllocs()
			var scratch []float64
			for i := 0; i < b.N; i++ {
				var s shares
				s, scratch = computeShares(kind, 250000, wants, scratch)
				for j, w := range wants {
					gets[j] = s.target(w)
				}
			}
		})
	}
}

// BenchmarkFairShareIterative is the round-based O(n^2) FAIR_SHARE over
// the same 10,000 clients, for comparison with BenchmarkAlgorithmRun.
func BenchmarkFairShareIterative(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	wants := make([]float64, 10000)
	for i := range wants {
		wants[i] = rng.Float64() * 100
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		iterativeFairShare(250000, wants)
	}
}

// BenchmarkServerDecide is the server's per-request work without gRPC:
// 1,000 clients renewing in turn.
func BenchmarkServerDecide(b *testing.B) {
	s, err := NewServer(ServerConfig{Config: testConfig(FairShare, 1000), MinRefreshInterval: time.Nanosecond})
	if err != nil {
		b.Fatal(err)
	}
	reqs := make([]*pb.GetCapacityRequest, 1000)
	for i := range reqs {
		reqs[i] = &pb.GetCapacityRequest{
			ClientId: proto.String(fmt.Sprintf("client-%d", i)),
			Resource: []*pb.ResourceRequest{{ResourceId: proto.String("r"), Priority: proto.Int64(0), Wants: proto.Float64(float64(i % 10))}},
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.GetCapacity(context.Background(), reqs[i%len(reqs)]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGetCapacityLoopback measures the server's GetCapacity
// throughput over gRPC on loopback, 1,000 distinct clients renewing in
// turn (the minimum refresh interval is disabled so that every request
// runs the algorithm).
func BenchmarkGetCapacityLoopback(b *testing.B) {
	s, err := NewServer(ServerConfig{Config: testConfig(FairShare, 1000), Clock: clock.Real, MinRefreshInterval: time.Nanosecond})
	if err != nil {
		b.Fatal(err)
	}
	addr := startServer(b, s, "")
	const conns = 4
	clients := make([]pb.CapacityClient, conns)
	for i := range clients {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		defer cc.Close()
		clients[i] = pb.NewCapacityClient(cc)
	}
	reqs := make([]*pb.GetCapacityRequest, 1000)
	for i := range reqs {
		reqs[i] = &pb.GetCapacityRequest{
			ClientId: proto.String(fmt.Sprintf("client-%d", i)),
			Resource: []*pb.ResourceRequest{{ResourceId: proto.String("r"), Priority: proto.Int64(0), Wants: proto.Float64(float64(i % 10))}},
		}
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := next.Add(1)
			if _, err := clients[n%conns].GetCapacity(context.Background(), reqs[n%int64(len(reqs))]); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
}

// BenchmarkGaugeAcquireRelease is one uncontended slot taken and given
// back: the per-call cost of a concurrency lease.
func BenchmarkGaugeAcquireRelease(b *testing.B) {
	g := NewGauge(newFixedSource(10))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := g.Acquire(ctx); err != nil {
			b.Fatal(err)
		}
		g.Release()
	}
}

// BenchmarkRateLimiterWait is one admission at a rate far above the
// benchmark's: the per-call cost of a rate lease that does not bind.
func BenchmarkRateLimiterWait(b *testing.B) {
	l := NewRateLimiter(newFixedSource(1e12))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := l.Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
