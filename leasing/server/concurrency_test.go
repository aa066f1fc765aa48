package server

import (
	"context"
	"fmt"
	"math/rand"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-rpc/sluice/clock"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
)

// Many goroutines asking, renewing, releasing and serving as a tree,
// while time passes, the configuration changes and the status page is
// read: run under -race, and afterwards the counts the limits use are the
// state's exact counts (no reservation leaked), no resource hands out more
// than its capacity, and the limits held.
func TestConcurrentUse(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	repo := func(capacity float64) *Repository {
		return &Repository{Resources: []Template{
			{IdentifierGlob: "fair-*", Capacity: capacity, Algorithm: Algorithm{Kind: FairShare, LeaseLength: 5, RefreshInterval: 1, LearningModeDuration: int64p(0)}},
			{IdentifierGlob: "*", Capacity: capacity, Algorithm: Algorithm{Kind: ProportionalShare, LeaseLength: 3, RefreshInterval: 1, LearningModeDuration: int64p(0)}},
		}}
	}
	const maxResources, maxClients, maxLeases = 12, 20, 60
	s, err := New(Config{Repository: repo(100), Clock: clk, MaxResources: maxResources, MaxClients: maxClients, MaxLeases: maxLeases})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	ctx := context.Background()
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			for i := 0; i < 1500; i++ {
				client := fmt.Sprintf("c%d", rng.Intn(25))
				ids := []string{fmt.Sprintf("fair-%d", rng.Intn(8)), fmt.Sprintf("prop-%d", rng.Intn(8))}[:1+rng.Intn(2)]
				var err error
				switch rng.Intn(10) {
				case 0:
					_, err = s.ReleaseCapacity(ctx, &pb.ReleaseCapacityRequest{ClientId: proto.String(client), ResourceId: append([]string{""}, ids...)})
				case 1:
					_, err = s.GetServerCapacity(ctx, &pb.GetServerCapacityRequest{ServerId: proto.String("mid"), Resource: []*pb.ServerCapacityResourceRequest{{
						ResourceId: proto.String(ids[0]), Wants: []*pb.PriorityBandAggregate{{Priority: proto.Int64(1), NumClients: proto.Int64(3), Wants: proto.Float64(rng.Float64() * 90)}}}}})
				default:
					_, err = askFor(s, client, rng.Float64()*40, ids...)
				}
				if err != nil && status.Code(err) != codes.ResourceExhausted {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 200; i++ {
			clk.Add(100 * time.Millisecond)
			if i%50 == 0 {
				if err := s.SetRepository(repo(float64(80 + i/10))); err != nil {
					t.Error(err)
				}
				s.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
			}
		}
	}()
	wg.Wait()

	resources, clients, leases := s.Counts()
	now := clk.Now()
	var n, l int
	seen := map[string]bool{}
	for _, r := range s.snapshot() {
		n++
		r.mu.Lock()
		l += len(r.leases)
		var held float64
		for c, i := range r.leases {
			seen[c] = true
			if sl := &r.tab.slots[i]; now.Unix() < sl.expiry {
				held += sl.has
			}
		}
		if r.tmpl != nil && held > r.tmpl.Capacity+1e-9 {
			t.Errorf("%s: unexpired leases hold %v > capacity %v", r.id, held, r.tmpl.Capacity)
		}
		r.mu.Unlock()
	}
	if resources != n || clients != len(seen) || leases != l {
		t.Fatalf("Counts() = %d resources, %d clients, %d leases; the state holds %d, %d, %d", resources, clients, leases, n, len(seen), l)
	}
	if resources > maxResources || clients > maxClients || leases > maxLeases {
		t.Fatalf("limits exceeded: %d resources, %d clients, %d leases", resources, clients, leases)
	}
}
