package server

import (
	"fmt"
	"math/rand"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/uber-go/tally/v4"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-rpc/sluice/clock"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
)

// Many goroutines asking, renewing, releasing and serving as a tree, from
// three sources, while time passes, the configuration changes and the
// status page is read: run under -race, and afterwards the counts the
// limits use are the state's exact counts (no reservation leaked), no
// resource hands out more than its capacity, the limits held, and the
// client table and the sources' counts of clients, resources and leases
// agree with the state after the evictions (of clients, and of resources
// from a full resource table).
func TestConcurrentUse(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	repo := func(capacity float64) *Repository {
		return &Repository{Resources: []Template{
			{IdentifierGlob: "fair-*", Capacity: capacity, Algorithm: Algorithm{Kind: FairShare, LeaseLength: 5, RefreshInterval: 1, LearningModeDuration: int64p(0)}},
			{IdentifierGlob: "*", Capacity: capacity, Algorithm: Algorithm{Kind: ProportionalShare, LeaseLength: 3, RefreshInterval: 1, LearningModeDuration: int64p(0)}},
		}}
	}
	const maxResources, maxClients, maxLeases = 12, 20, 60
	scope := tally.NewTestScope("", nil)
	s, err := New(Config{Repository: repo(100), Clock: clk, Scope: scope, MaxResources: maxResources, MaxClients: maxClients, MaxLeases: maxLeases})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			// Three sources, so that a full client table evicts.
			ctx := from(fmt.Sprintf("10.0.0.%d", w%3+1))
			for i := 0; i < 1500; i++ {
				client := fmt.Sprintf("c%d", rng.Intn(25))
				ids := []string{fmt.Sprintf("fair-%d", rng.Intn(8)), fmt.Sprintf("prop-%d", rng.Intn(8))}[:1+rng.Intn(2)]
				var err error
				switch rng.Intn(10) {
				case 0:
					_, err = s.releaseCapacity(ctx, &pb.ReleaseCapacityRequest{ClientId: proto.String(client), ResourceId: append([]string{""}, ids...)})
				case 1:
					_, err = s.getServerCapacity(ctx, &pb.GetServerCapacityRequest{ServerId: proto.String("mid"), Resource: []*pb.ServerCapacityResourceRequest{{
						ResourceId: proto.String(ids[0]), Wants: []*pb.PriorityBandAggregate{{Priority: proto.Int64(1), NumClients: proto.Int64(3), Wants: proto.Float64(rng.Float64() * 90)}}}}})
				default:
					req := &pb.GetCapacityRequest{ClientId: proto.String(client)}
					for _, id := range ids {
						req.Resource = append(req.Resource, &pb.ResourceRequest{ResourceId: proto.String(id), Wants: proto.Float64(rng.Float64() * 40)})
					}
					_, err = s.getCapacity(ctx, req)
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
	// The limits hold up to what the grant's doc allows: a creation beyond
	// a request's reservation (the state changed between its admission and
	// its work, as when a resource it counted on was dropped meanwhile) is
	// counted without a check, so each of the workers' requests in flight
	// may have added its ids' resources and leases, and its client, over a
	// limit. About 1 run in 75 ends one resource or client over.
	const workers, idsPerRequest = 8, 2
	if resources > maxResources+workers*idsPerRequest || clients > maxClients+workers || leases > maxLeases+workers*idsPerRequest {
		t.Fatalf("limits exceeded beyond the racing requests' creations: %d resources (max %d), %d clients (max %d), %d leases (max %d)",
			resources, maxResources, clients, maxClients, leases, maxLeases)
	}
	if resources > maxResources || clients > maxClients || leases > maxLeases {
		t.Logf("over a limit by racing creations, as the grant's doc allows: %d resources, %d clients, %d leases", resources, clients, leases)
	}
	checkClientTable(t, s)
	if n := scope.Snapshot().Counters()[metricClientsEvicted+"+"].Value(); n == 0 {
		t.Error("no client was evicted: the client table was never full for a source below its share")
	} else {
		t.Logf("%d clients evicted", n)
	}
	t.Logf("%d resources evicted", scope.Snapshot().Counters()[metricResourcesEvicted+"+"].Value())
}

// checkClientTable checks that the client table agrees with the leases:
// each client's entry counts the leases that name it, and each source
// the entries it holds, their leases and the resources it created, in
// its lists and in the heaps' order.
func checkClientTable(t *testing.T, s *Server) {
	t.Helper()
	held := map[*clientEntry]int{}
	resBySource := map[*source]int{}
	for _, r := range s.snapshot() {
		r.mu.Lock()
		for c, i := range r.leases {
			e := r.tab.slots[i].ent
			if e == nil || e.id != c {
				t.Errorf("resource %s: the lease of %s names entry %v", r.id, c, e)
				continue
			}
			held[e]++
		}
		r.mu.Unlock()
		s.srcMu.Lock()
		switch {
		case r.configured && r.src != nil:
			t.Errorf("configured resource %s belongs to source %s", r.id, sourceName(r.src.addr))
		case !r.configured && (r.src == nil || r.evicting):
			t.Errorf("resource %s: of source %v, evicting %v", r.id, r.src, r.evicting)
		case r.src != nil:
			resBySource[r.src]++
		}
		s.srcMu.Unlock()
	}
	bySource := map[*source]int{}
	leasesBySource := map[*source]int{}
	entries := 0
	for i := range s.clients {
		sh := &s.clients[i]
		sh.mu.Lock()
		for id, e := range sh.m {
			entries++
			if int(e.leases) != held[e] || e.leases == 0 {
				t.Errorf("client %s: its entry counts %d leases, the resources %d", id, e.leases, held[e])
			}
			s.srcMu.Lock()
			if e.src == nil || e.evicting {
				t.Errorf("client %s: entry of source %v, evicting %v", id, e.src, e.evicting)
			} else {
				bySource[e.src]++
				leasesBySource[e.src] += int(e.leases)
			}
			s.srcMu.Unlock()
		}
		sh.mu.Unlock()
	}
	if entries != len(held) {
		t.Errorf("%d entries in the client table, %d clients holding leases", entries, len(held))
	}
	s.srcMu.Lock()
	defer s.srcMu.Unlock()
	holding := map[*source]bool{}
	for src := range bySource {
		holding[src] = true
	}
	for src := range resBySource {
		holding[src] = true
	}
	if len(s.sources) != len(holding) {
		t.Errorf("%d sources, %d holding clients or resources", len(s.sources), len(holding))
	}
	for tb := range s.srcHeaps {
		if len(s.srcHeaps[tb].srcs) != len(s.sources) {
			t.Errorf("%d sources, %d in heap %d", len(s.sources), len(s.srcHeaps[tb].srcs), tb)
		}
	}
	for tb, m := range []map[*source]int{bySource, resBySource, leasesBySource} {
		if s.srcHolding[tb] != len(m) {
			t.Errorf("table %d: %d sources counted holding some, %d do", tb, s.srcHolding[tb], len(m))
		}
	}
	for addr, src := range s.sources {
		if src.held[tabClients] != bySource[src] || src.plain.n+src.servers.n != src.held[tabClients] {
			t.Errorf("source %s counts %d clients, lists %d and %d; its entries are %d", sourceName(addr), src.held[tabClients], src.plain.n, src.servers.n, bySource[src])
		}
		if src.held[tabResources] != resBySource[src] || src.res.n != src.held[tabResources] {
			t.Errorf("source %s counts %d resources, lists %d; %d are its", sourceName(addr), src.held[tabResources], src.res.n, resBySource[src])
		}
		if src.held[tabLeases] != leasesBySource[src] {
			t.Errorf("source %s counts %d leases, its clients hold %d", sourceName(addr), src.held[tabLeases], leasesBySource[src])
		}
		for tb := range s.srcHeaps {
			h, i := s.srcHeaps[tb].srcs, src.idx[tb]
			if h[i] != src || i > 0 && h[(i-1)/2].held[tb] < src.held[tb] {
				t.Errorf("source %s is out of place in heap %d", sourceName(addr), tb)
			}
		}
	}
}
