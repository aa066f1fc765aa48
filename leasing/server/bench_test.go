package server

import (
	"context"
	"fmt"
	"math/rand"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-rpc/sluice/clock"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
)

// renewals returns, for n clients of resource "r", two requests each: the
// same client with two different wants, so that alternating them moves the
// client in the shares on every request (the worst case; a renewal with
// unchanged wants and grant touches no tree at all).
func renewals(n int) [][2]*pb.GetCapacityRequest {
	rng := rand.New(rand.NewSource(1))
	reqs := make([][2]*pb.GetCapacityRequest, n)
	for i := range reqs {
		w := rng.Float64() * 20
		for j, wants := range []float64{w, w * 1.5} {
			reqs[i][j] = &pb.GetCapacityRequest{
				ClientId: proto.String(fmt.Sprintf("client-%d", i)),
				Resource: []*pb.ResourceRequest{{ResourceId: proto.String("r"), Priority: proto.Int64(0), Wants: proto.Float64(wants)}},
			}
		}
	}
	return reqs
}

// BenchmarkDecide is the server's work for one GetCapacity without gRPC:
// n clients of one resource renewing in turn, each with new wants. Its
// cost grows as log n: the shares are kept incrementally.
func BenchmarkDecide(b *testing.B) {
	for _, kind := range []Kind{FairShare, ProportionalShare} {
		for _, n := range []int{1000, 10000, 100000} {
			b.Run(fmt.Sprintf("%v/clients=%d", kind, n), func(b *testing.B) {
				s, err := New(Config{Repository: testConfig(kind, float64(n)*8), Clock: clock.NewFake(testEpoch)})
				if err != nil {
					b.Fatal(err)
				}
				reqs := renewals(n)
				ctx := context.Background()
				for i := range reqs {
					if _, err := s.getCapacity(ctx, reqs[i][0]); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := s.getCapacity(ctx, reqs[i%n][(i/n+1)%2]); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkAllocate is one full division of a capacity between 10,000
// clients from scratch (building the shares and every client's target).
func BenchmarkAllocate(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	wants := make([]float64, 10000)
	for i := range wants {
		wants[i] = rng.Float64() * 100
	}
	gets := make([]float64, len(wants))
	for _, kind := range []Kind{ProportionalShare, FairShare} {
		b.Run(fmt.Sprintf("%v/clients=%d", kind, len(wants)), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				Allocate(kind, 250000, wants, gets)
			}
		})
	}
}

// BenchmarkGetCapacityLoopback measures GetCapacity throughput over gRPC on
// loopback, the load generator in the same process: n clients of one
// FAIR_SHARE resource renewing in turn, a tenth of the requests with new
// wants, every request answered.
func BenchmarkGetCapacityLoopback(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) {
			s, err := New(Config{Repository: testConfig(FairShare, float64(n)*8)})
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
			reqs := renewals(n)
			ctx := context.Background()
			for i := range reqs {
				if _, err := clients[0].GetCapacity(ctx, reqs[i][0]); err != nil {
					b.Fatal(err)
				}
			}
			var next, unanswered atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(8)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					k := next.Add(1)
					req := reqs[k%int64(n)][0]
					if k%10 == 0 {
						req = reqs[k%int64(n)][1]
					}
					resp, err := clients[k%conns].GetCapacity(ctx, req)
					if err != nil {
						b.Error(err)
						return
					}
					if len(resp.Response) != 1 {
						unanswered.Add(1)
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
			if u := unanswered.Load(); u > 0 {
				b.Fatalf("%d requests answered without an entry", u)
			}
		})
	}
}

// BenchmarkLeaseMemory measures the heap a server keeps per lease, for
// many clients of one resource and for many resources of one client (a
// resource costs more than a client of it: its own state and maps).
// Together with the limits (Config.MaxLeases, MaxResources) it bounds a
// server's memory.
func BenchmarkLeaseMemory(b *testing.B) {
	const n = 100_000
	cases := []struct {
		name string
		req  func(i int) *pb.GetCapacityRequest
	}{
		{"clients=100000/resources=1", func(i int) *pb.GetCapacityRequest {
			return &pb.GetCapacityRequest{ClientId: proto.String(fmt.Sprintf("client-%06d", i)),
				Resource: []*pb.ResourceRequest{{ResourceId: proto.String("r"), Priority: proto.Int64(0), Wants: proto.Float64(1)}}}
		}},
		{"clients=1/resources=100000", func(i int) *pb.GetCapacityRequest {
			return &pb.GetCapacityRequest{ClientId: proto.String("client"),
				Resource: []*pb.ResourceRequest{{ResourceId: proto.String(fmt.Sprintf("resource-%06d", i)), Priority: proto.Int64(0), Wants: proto.Float64(1)}}}
		}},
	}
	repo := &Repository{Resources: []Template{{IdentifierGlob: "*", Capacity: 1e9,
		Algorithm: Algorithm{Kind: FairShare, LeaseLength: 60, RefreshInterval: 15, LearningModeDuration: int64p(0)}}}}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var perLease float64
			for i := 0; i < b.N; i++ {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				s, err := New(Config{Repository: repo, Clock: clock.NewFake(testEpoch)})
				if err != nil {
					b.Fatal(err)
				}
				for k := 0; k < n; k++ {
					// Built here, as gRPC would: the ids the server keeps count.
					if _, err := s.getCapacity(context.Background(), c.req(k)); err != nil {
						b.Fatal(err)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				if _, _, leases := s.Counts(); leases != n {
					b.Fatalf("%d leases, want %d", leases, n)
				}
				runtime.KeepAlive(s)
				perLease = float64(after.HeapAlloc-before.HeapAlloc) / n
			}
			b.ReportMetric(perLease, "B/lease")
		})
	}
}
