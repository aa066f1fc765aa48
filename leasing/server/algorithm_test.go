package server

import (
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/clock"
)

// The worked examples of the original Doorman's algorithms documentation
// (github.com/youtube/doorman), capacity 120.
func TestDocumentedExamples(t *testing.T) {
	tests := []struct {
		kind  Kind
		wants []float64
		gets  []float64
	}{
		{NoAlgorithm, []float64{100, 10, 1000}, []float64{100, 10, 1000}},
		{Static, []float64{50, 200, 300}, []float64{50, 120, 120}},
		{ProportionalShare, []float64{1000, 50, 10}, []float64{69.69072165, 40.309278351, 10}},
		{FairShare, []float64{1000, 50, 10}, []float64{60, 50, 10}},
	}
	for _, tt := range tests {
		t.Run(tt.kind.String(), func(t *testing.T) {
			// The pure algorithm.
			got := make([]float64, len(tt.wants))
			Allocate(tt.kind, 120, tt.wants, got)
			for i := range got {
				if math.Abs(got[i]-tt.gets[i]) > 1e-8 {
					t.Errorf("Allocate: c%d w%v got %v, want %v", i, tt.wants[i], got[i], tt.gets[i])
				}
			}
			// The server, clients renewing in turn: converged after the
			// round that registers the wants and one refresh cycle.
			clk := clock.NewFake(testEpoch)
			s := newTestServer(t, testConfig(tt.kind, 120), clk)
			var last []float64
			for round := 0; round < 2; round++ {
				last = last[:0]
				for i, w := range tt.wants {
					last = append(last, ask(t, s, clientName(i), w))
				}
				clk.Add(15 * time.Second)
			}
			for i := range last {
				if math.Abs(last[i]-tt.gets[i]) > 1e-8 {
					t.Errorf("server: c%d w%v got %v, want %v", i, tt.wants[i], last[i], tt.gets[i])
				}
			}
		})
	}
}

func sum(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s
}

// Property tests over random demands: the sum of unexpired leases never
// exceeds capacity; after one refresh cycle the total handed out is
// min(capacity, total wants) and every client has at least
// min(wants, capacity/n).
func TestSharingProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, kind := range []Kind{ProportionalShare, FairShare} {
		for trial := 0; trial < 200; trial++ {
			n := 1 + rng.Intn(12)
			capacity := float64(1 + rng.Intn(500))
			wants := make([]float64, n)
			for i := range wants {
				switch rng.Intn(3) {
				case 0:
					wants[i] = 0
				case 1:
					wants[i] = rng.Float64() * capacity / float64(n)
				default:
					wants[i] = rng.Float64() * capacity * 2
				}
			}
			clk := clock.NewFake(testEpoch)
			s := newTestServer(t, testConfig(kind, capacity), clk)
			gets := make([]float64, n)
			for round := 0; round < 2; round++ {
				for i, w := range wants {
					gets[i] = ask(t, s, clientName(i), w)
					if total := sum(gets); total > capacity+1e-9 {
						t.Fatalf("%v trial %d round %d: leases total %v > capacity %v", kind, trial, round, total, capacity)
					}
				}
				clk.Add(15 * time.Second)
			}
			want := math.Min(capacity, sum(wants))
			if total := sum(gets); math.Abs(total-want) > 1e-6 {
				t.Fatalf("%v trial %d: after one refresh cycle total %v, want min(capacity, wants) = %v (wants %v gets %v)", kind, trial, total, want, wants, gets)
			}
			equal := capacity / float64(n)
			for i := range gets {
				if floor := math.Min(wants[i], equal); gets[i] < floor-1e-9 {
					t.Fatalf("%v trial %d: client %d got %v < min(wants %v, equal share %v)", kind, trial, i, gets[i], wants[i], equal)
				}
			}
		}
	}
}

// A random walk of requests, wants changes, releases and time: the leases
// the server holds unexpired never sum to more than capacity.
func TestLeasesNeverExceedCapacity(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for _, kind := range []Kind{ProportionalShare, FairShare} {
		clk := clock.NewFake(testEpoch)
		const capacity = 100
		s := newTestServer(t, testConfig(kind, capacity), clk)
		for step := 0; step < 5000; step++ {
			client := clientName(rng.Intn(20))
			switch rng.Intn(10) {
			case 0:
				clk.Add(time.Duration(rng.Intn(20)) * time.Second)
			case 1:
				releaseAll(t, s, client)
			default:
				ask(t, s, client, rng.Float64()*60)
			}
			if held := unexpiredTotal(s, clk.Now()); held > capacity+1e-9 {
				t.Fatalf("%v step %d: unexpired leases total %v > capacity %v", kind, step, held, capacity)
			}
		}
	}
}

// unexpiredTotal is the capacity held in leases of resource "r" that have
// not expired by now, summed one by one.
func unexpiredTotal(s *Server, now time.Time) float64 {
	r := s.lookup("r")
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var total float64
	for _, i := range r.leases {
		if c := &r.tab.slots[i]; now.Unix() < c.expiry {
			total += c.has
		}
	}
	return total
}

// iterativeFairShare is the textbook round-based max-min fair division
// (O(n^2) in the worst case): each round splits what is left equally among
// the clients not yet satisfied. It is the oracle for FairShare.
func iterativeFairShare(capacity float64, wants []float64) []float64 {
	gets := make([]float64, len(wants))
	open := make([]int, len(wants))
	for i := range open {
		open[i] = i
	}
	remaining := capacity
	for len(open) > 0 && remaining > 1e-12 {
		share := remaining / float64(len(open))
		var next []int
		for _, i := range open {
			need := wants[i] - gets[i]
			if need <= share {
				gets[i] += need
				remaining -= need
			} else {
				gets[i] += share
				remaining -= share
				next = append(next, i)
			}
		}
		if len(next) == len(open) {
			break // everyone took a full share: nothing left
		}
		open = next
	}
	return gets
}

func TestFairShareMatchesIterativeOracle(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for trial := 0; trial < 500; trial++ {
		n := 1 + rng.Intn(30)
		capacity := rng.Float64() * 1000
		wants := make([]float64, n)
		for i := range wants {
			wants[i] = rng.Float64() * 2 * capacity / float64(n)
			if trial%2 == 1 { // many ties and zeros
				wants[i] = float64(rng.Intn(4)) * capacity / float64(2*n)
			}
		}
		got := make([]float64, n)
		Allocate(FairShare, capacity, wants, got)
		want := iterativeFairShare(capacity, wants)
		for i := range got {
			if math.Abs(got[i]-want[i]) > 1e-6 {
				t.Fatalf("trial %d client %d: sort-based %v, iterative %v (capacity %v wants %v)", trial, i, got[i], want[i], capacity, wants)
			}
		}
	}
}
