package server

import (
	"context"
	"math"
	"math/rand"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sluice-rpc/sluice/clock"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
)

// finiteIn reports whether v is a number in [0, hi].
func finiteIn(v, hi float64) bool { return !math.IsNaN(v) && v >= 0 && v <= hi }

// checkStateFinite fails the test if any number the server keeps for a
// resource (a lease's wants and grant, the tree's sums, the gauges'
// totals) is NaN or infinite.
func checkStateFinite(t *testing.T, s *Server) {
	t.Helper()
	for _, r := range s.snapshot() {
		r.mu.Lock()
		for i := 1; i < len(r.tab.slots); i++ {
			sl := &r.tab.slots[i]
			for _, v := range []float64{sl.wants, sl.has, sl.ratio, sl.sumWants, sl.sumWeight, sl.sumHas} {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					r.mu.Unlock()
					t.Fatalf("resource %q, lease of %q: wants %v has %v ratio %v sums %v %v %v", r.id, sl.client,
						sl.wants, sl.has, sl.ratio, sl.sumWants, sl.sumWeight, sl.sumHas)
				}
			}
		}
		r.mu.Unlock()
	}
	st := s.Status(StatusQuery{})
	for _, r := range st.ResourceList {
		if math.IsNaN(r.Has) || math.IsInf(r.Has, 0) || math.IsNaN(r.Wants) || math.IsInf(r.Wants, 0) {
			t.Fatalf("the status page says resource %q handed out %v, wanted %v", r.ID, r.Has, r.Wants)
		}
	}
}

// Two clients wanting 1e308 on a PROPORTIONAL_SHARE resource (finite, so
// valid) poisoned it: the total of wants overflowed to +Inf, every grant
// became NaN, and the tree's sums kept the NaN after the attackers'
// leases expired. Over gRPC: every grant, the attackers' and the
// legitimate clients' (one renewing, one new), is finite and within the
// capacity, during the attack and after its leases expired; the
// legitimate clients get what they want (less than an equal share) as
// soon as the capacity is free (a new client's first answer may be 0
// while the attackers' unexpired leases hold it all, as with any clients
// holding it); and the server's state holds no NaN or Inf.
func TestHugeWantsDoNotPoisonAResource(t *testing.T) {
	const capacity = 1000
	clk := clock.NewFake(testEpoch)
	s := newTestServer(t, testConfig(ProportionalShare, capacity), clk)
	c := dial(t, startServer(t, s, ""))
	gets := func(client string, wants float64) float64 {
		t.Helper()
		g := askCapacity(t, c, client, wants, nil).Response[0].GetGets().GetCapacity()
		if !finiteIn(g, capacity) {
			t.Fatalf("%s wanting %v got %v, want a number in [0, %d]", client, wants, g, capacity)
		}
		return g
	}
	legit := func(client string) {
		t.Helper()
		if g := gets(client, 100); g != 100 {
			t.Fatalf("%s wanting 100 got %v, want 100 (less than an equal share)", client, g)
		}
	}
	var held map[string]float64
	handedOut := func() {
		t.Helper()
		var sum float64
		for _, g := range held {
			sum += g
		}
		if sum > capacity*(1+1e-12) {
			t.Fatalf("the leases %v add up to %v, over the capacity %d", held, sum, capacity)
		}
	}
	held = map[string]float64{"old": gets("old", 100)}
	held["attacker1"] = gets("attacker1", 1e308)
	held["attacker2"] = gets("attacker2", 1e308)
	legit("old")                   // a renewal
	held["new"] = gets("new", 100) // a new client: what is left
	handedOut()
	checkStateFinite(t, s)

	// A refresh interval later everyone has renewed: the attackers are
	// cut to their share, and the legitimate clients get what they want.
	clk.Add(15 * time.Second)
	held["attacker1"] = gets("attacker1", 1e308)
	held["attacker2"] = gets("attacker2", 1e308)
	legit("old")
	legit("new")
	held["old"], held["new"] = 100, 100
	handedOut()
	if a1, a2 := held["attacker1"], held["attacker2"]; a1 != a2 || a1 <= 0 {
		t.Fatalf("the attackers got %v and %v, want equal positive shares", a1, a2)
	}
	checkStateFinite(t, s)

	// The attackers go quiet; the legitimate clients renew through the
	// end of the attackers' leases and past it.
	for range 5 {
		clk.Add(15 * time.Second)
		legit("old")
		legit("new")
	}
	if got := gets("third", 800); got != 800 {
		t.Fatalf("a new client wanting 800 after the attackers' leases expired got %v, want 800", got)
	}
	checkStateFinite(t, s)
}

// A client's claim in has is bounded as its wants are: one claiming
// 1e308 under STATIC or NO_ALGORITHM in learning mode is echoed no more
// than the capacity (STATIC) or MaxCapacity (no algorithm), and the
// server's sums stay finite with two of them.
func TestHugeClaimsAreBounded(t *testing.T) {
	for _, kind := range []Kind{NoAlgorithm, Static, ProportionalShare, FairShare} {
		t.Run(kind.String(), func(t *testing.T) {
			clk := clock.NewFake(testEpoch)
			cfg := testConfig(kind, 100)
			cfg.Resources[0].Algorithm.LearningModeDuration = nil // learning for 60 s
			s := newTestServer(t, cfg, clk)
			hi := 100.0
			if kind == NoAlgorithm {
				hi = MaxCapacity
			}
			for _, client := range []string{"a", "b"} {
				resp, err := s.getCapacity(context.Background(), &pb.GetCapacityRequest{
					ClientId: proto.String(client),
					Resource: []*pb.ResourceRequest{{ResourceId: proto.String("r"), Priority: proto.Int64(0), Wants: proto.Float64(1e308),
						Has: &pb.Lease{ExpiryTime: proto.Int64(clk.Now().Unix() + 60), RefreshInterval: proto.Int64(15), Capacity: proto.Float64(1e308)}}},
				})
				if err != nil {
					t.Fatal(err)
				}
				if g := resp.Response[0].GetGets().GetCapacity(); !finiteIn(g, hi) {
					t.Fatalf("%s claiming 1e308 got %v, want at most %v", client, g, hi)
				}
			}
			checkStateFinite(t, s)
		})
	}
}

// The examples of the report: the product of the capacity left and a
// share of the excess overflowed, and the client wanting the most got
// all it wanted.
func TestProportionalShareOfHugeWants(t *testing.T) {
	for _, c := range []struct {
		wants, want []float64
	}{
		{[]float64{10, 1e307, 1e307}, []float64{10, 495, 495}},
		{[]float64{10, 1e308}, []float64{10, 990}},
		{[]float64{10, 1e308, 1e308}, []float64{10, 495, 495}},
		{[]float64{10, 1e308, 1e15}, []float64{10, 495, 495}}, // both at MaxCapacity
		{[]float64{math.MaxFloat64, math.MaxFloat64}, []float64{500, 500}},
	} {
		got := make([]float64, len(c.wants))
		Allocate(ProportionalShare, 1000, c.wants, got)
		for i := range got {
			if !close9(got[i], c.want[i]) {
				t.Errorf("Allocate(ProportionalShare, 1000, %v) = %v, want %v", c.wants, got, c.want)
				break
			}
		}
	}
}

// tinySlack is the absolute error the property tests allow beside a
// relative one: a capacity of a few subnormals divided between clients
// rounds to nothing.
const tinySlack = 1e-300

// Property tests of every algorithm over extreme demands: wants of 0,
// tiny (subnormal), ordinary, huge (up to math.MaxFloat64) and equal,
// mixed, under capacities from 0 to MaxCapacity. Every result is finite,
// non-negative and, but for NO_ALGORITHM, within the capacity; the
// results of PROPORTIONAL_SHARE and FAIR_SHARE add up to the capacity or
// the total of wants, whichever is less; FAIR_SHARE gives every client
// at least min(wants, capacity/n); PROPORTIONAL_SHARE gives a client
// wanting more than an equal share that share plus a part of what the
// others leave in proportion to what it wants beyond it. Wants are taken
// as at most MaxCapacity.
func TestAlgorithmsWithExtremeWants(t *testing.T) {
	rng := rand.New(rand.NewSource(35))
	wantsPool := []float64{0, 5e-324, 1e-300, 1e-9, 0.5, 1, 10, 1000, 1e9, MaxCapacity / 3, MaxCapacity, 2 * MaxCapacity, 1e307, 1e308, math.MaxFloat64}
	capPool := []float64{0, 5e-324, 1e-300, 1e-9, 1, 120, 1000, 1e9, MaxCapacity}
	kinds := []Kind{NoAlgorithm, Static, ProportionalShare, FairShare}
	for trial := range 4000 {
		n := 1 + rng.Intn(8)
		capacity := capPool[rng.Intn(len(capPool))]
		wants := make([]float64, n)
		for i := range wants {
			switch rng.Intn(4) {
			case 0: // equal to the one before
				if i > 0 {
					wants[i] = wants[i-1]
					continue
				}
				fallthrough
			case 1:
				wants[i] = rng.Float64() * capacity
			default:
				wants[i] = wantsPool[rng.Intn(len(wantsPool))]
			}
		}
		clamped := make([]float64, n)
		var sumWants float64
		for i, w := range wants {
			clamped[i] = math.Min(w, MaxCapacity)
			sumWants += clamped[i]
		}
		for _, kind := range kinds {
			gets := make([]float64, n)
			Allocate(kind, capacity, wants, gets)
			fail := func(format string, args ...any) {
				t.Helper()
				t.Fatalf("trial %d: Allocate(%v, %v, %v) = %v: "+format, append([]any{trial, kind, capacity, wants, gets}, args...)...)
			}
			var total float64
			for i, g := range gets {
				hi := capacity
				if kind == NoAlgorithm {
					hi = MaxCapacity
				}
				if !finiteIn(g, hi) {
					fail("client %d's share is not in [0, %v]", i, hi)
				}
				if g > clamped[i] {
					fail("client %d gets more than it wants", i)
				}
				total += g
			}
			switch kind {
			case NoAlgorithm:
				for i := range gets {
					if gets[i] != clamped[i] {
						fail("client %d does not get its wants %v", i, clamped[i])
					}
				}
			case Static:
				for i := range gets {
					if gets[i] != math.Min(clamped[i], capacity) {
						fail("client %d does not get min(wants, capacity)", i)
					}
				}
			case ProportionalShare, FairShare:
				want := math.Min(capacity, sumWants)
				if math.Abs(total-want) > 1e-9*want+tinySlack {
					fail("the shares add up to %v, want min(capacity, wants) = %v", total, want)
				}
				for i := range gets {
					if fair := math.Min(clamped[i], capacity/float64(n)); gets[i] < fair*(1-1e-9)-tinySlack {
						fail("client %d gets less than min(wants, capacity/n) = %v", i, fair)
					}
				}
			}
			if kind == ProportionalShare && sumWants > capacity {
				// Above the equal share e, each gets e plus the same part
				// of what it wants beyond e.
				e := capacity / float64(n)
				part := -1.0
				for i := range gets {
					if clamped[i] <= e || clamped[i]-e < 1e-6*clamped[i] {
						continue
					}
					p := (gets[i] - e) / (clamped[i] - e)
					if part < 0 {
						part = p
					} else if math.Abs(p-part) > 1e-9*math.Max(1, part) {
						fail("client %d gets %v of what it wants beyond the equal share, another %v", i, p, part)
					}
				}
			}
		}
	}
}

// The algorithms with subclients (servers asking for several clients)
// over the same extreme values, through the table the server keeps: every
// target finite, within the capacity, and the table's sums finite.
func TestTableWithExtremeWants(t *testing.T) {
	rng := rand.New(rand.NewSource(36))
	pool := []float64{0, 5e-324, 1, 1000, MaxCapacity, math.MaxFloat64}
	for trial := range 500 {
		tab := newTable()
		n := 1 + rng.Intn(10)
		capacity := []float64{0, 1, 1000, MaxCapacity}[rng.Intn(4)]
		wants := make([]float64, n)
		weights := make([]float64, n)
		for k := range n {
			wants[k] = clampWants(pool[rng.Intn(len(pool))])
			weights[k] = float64(1 + rng.Intn(MaxSubclients))
			i := tab.alloc("")
			tab.slots[i].wants, tab.slots[i].weight = wants[k], weights[k]
			tab.insert(i)
			tab.setHas(i, capacity)
		}
		w, k, h := tab.totals()
		for _, v := range []float64{w, k, h} {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("trial %d: totals %v %v %v", trial, w, k, h)
			}
		}
		for _, kind := range []Kind{Static, ProportionalShare, FairShare} {
			s := tab.computeShares(kind, capacity)
			for j := range n {
				if g := s.target(wants[j], weights[j]); !finiteIn(g, capacity) {
					t.Fatalf("trial %d %v capacity %v: client wanting %v for %v gets %v", trial, kind, capacity, wants[j], weights[j], g)
				}
			}
		}
	}
}

// A template's capacity and safe capacity are bounded by MaxCapacity,
// and the error names the bound.
func TestTemplateCapacityIsBounded(t *testing.T) {
	over := 2 * MaxCapacity
	for _, tmpl := range []Template{
		{IdentifierGlob: "r", Capacity: over},
		{IdentifierGlob: "r", Capacity: 1, SafeCapacity: &over},
	} {
		tmpl.Algorithm = Algorithm{Kind: FairShare, LeaseLength: 60, RefreshInterval: 15}
		if err := tmpl.Validate(); err == nil || !containsAll(err.Error(), "MaxCapacity", "1e+15") {
			t.Errorf("Validate of %+v: %v, want an error naming MaxCapacity", tmpl, err)
		}
	}
	ok := Template{IdentifierGlob: "r", Capacity: MaxCapacity, Algorithm: Algorithm{Kind: FairShare, LeaseLength: 60, RefreshInterval: 15}}
	if err := ok.Validate(); err != nil {
		t.Errorf("a capacity of MaxCapacity: %v", err)
	}
}
