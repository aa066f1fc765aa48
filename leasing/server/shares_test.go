package server

import (
	"math"
	"math/rand"
	"sort"
	"testing"
)

// naiveFairShare is weighted max-min fair division done the textbook way,
// round by round (O(n^2)): each round splits what is left between the
// clients not yet satisfied in proportion to their weights.
func naiveFairShare(capacity float64, wants, weights []float64) []float64 {
	gets := make([]float64, len(wants))
	open := make([]int, 0, len(wants))
	for i := range wants {
		open = append(open, i)
	}
	remaining := capacity
	for len(open) > 0 && remaining > 0 {
		var k float64
		for _, i := range open {
			k += weights[i]
		}
		per := remaining / k
		var next []int
		for _, i := range open {
			need := wants[i] - gets[i]
			if need <= per*weights[i] {
				gets[i] += need
				remaining -= need
			} else {
				next = append(next, i)
			}
		}
		if len(next) == len(open) { // nobody satisfied: all get the level
			for _, i := range open {
				gets[i] += per * weights[i]
			}
			break
		}
		open = next
	}
	return gets
}

// naiveProportionalShare is ProportionalShare written out from its
// definition (the original's, with subclients): every client gets its
// wants if the total fits or they fit in its equal share; the others get
// their equal share plus the capacity the modest left, in proportion to
// how far they exceed it.
func naiveProportionalShare(capacity float64, wants, weights []float64) []float64 {
	var total, k float64
	for i := range wants {
		total += wants[i]
		k += weights[i]
	}
	gets := make([]float64, len(wants))
	equal := capacity / k
	var extra, excess float64
	for i := range wants {
		if e := equal * weights[i]; wants[i] < e {
			extra += e - wants[i]
		} else {
			excess += wants[i] - e
		}
	}
	for i := range wants {
		e := equal * weights[i]
		if total <= capacity || wants[i] <= e || excess == 0 {
			gets[i] = wants[i]
			continue
		}
		gets[i] = math.Min(wants[i], e+(wants[i]-e)*extra/excess)
	}
	return gets
}

func close9(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

// checkTree verifies the treap's invariants: in-order keys increase,
// priorities form a heap, and every subtree's sums are those of its
// nodes.
func checkTree(t *testing.T, tab *table) {
	t.Helper()
	var walk func(x int32) (n int, w, k, h float64)
	var last int32
	walk = func(x int32) (int, float64, float64, float64) {
		if x == 0 {
			return 0, 0, 0, 0
		}
		s := &tab.slots[x]
		for _, c := range []int32{s.left, s.right} {
			if c != 0 && tab.slots[c].prio > s.prio {
				t.Fatalf("node %d: child %d has a higher priority", x, c)
			}
		}
		ln, lw, lk, lh := walk(s.left)
		if last != 0 && !tab.less(last, x) {
			t.Fatalf("in-order keys not increasing at node %d", x)
		}
		last = x
		rn, rw, rk, rh := walk(s.right)
		w, k, h := lw+s.wants+rw, lk+s.weight+rk, lh+s.has+rh
		if !close9(w, s.sumWants) || !close9(k, s.sumWeight) || !close9(h, s.sumHas) {
			t.Fatalf("node %d: sums (%v %v %v), want (%v %v %v)", x, s.sumWants, s.sumWeight, s.sumHas, w, k, h)
		}
		return ln + 1 + rn, w, k, h
	}
	if n, _, _, _ := walk(tab.root); n != tab.n() {
		t.Fatalf("tree holds %d nodes, table %d", n, tab.n())
	}
}

// The incremental shares (one descent of the treap after random
// arrivals, departures and changes of wants, weights and grants) are
// the straightforward computation's, for FairShare and ProportionalShare,
// with ties, zeros and subclients.
func TestSharesMatchStraightforwardComputation(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for trial := 0; trial < 300; trial++ {
		tab := newTable()
		live := map[int32]bool{}
		capacity := rng.Float64() * 1000
		if trial%10 == 0 {
			capacity = 0
		}
		steps := 1 + rng.Intn(200)
		for step := 0; step < steps; step++ {
			switch op := rng.Intn(10); {
			case op < 4 || len(live) == 0: // arrival
				i := tab.alloc("")
				tab.slots[i].wants, tab.slots[i].weight = randWants(rng, capacity), randWeight(rng, trial)
				tab.insert(i)
				live[i] = true
			case op < 6: // departure
				for i := range live {
					tab.remove(i)
					tab.release(i)
					delete(live, i)
					break
				}
			case op < 9: // new demand
				for i := range live {
					tab.setDemand(i, randWants(rng, capacity), randWeight(rng, trial))
					break
				}
			default: // new grant
				for i := range live {
					tab.setHas(i, rng.Float64()*capacity)
					break
				}
			}
		}
		checkTree(t, &tab)
		idx := make([]int32, 0, len(live))
		for i := range live {
			idx = append(idx, i)
		}
		sort.Slice(idx, func(a, b int) bool { return idx[a] < idx[b] })
		wants := make([]float64, len(idx))
		weights := make([]float64, len(idx))
		for j, i := range idx {
			wants[j], weights[j] = tab.slots[i].wants, tab.slots[i].weight
		}
		for _, kind := range []Kind{FairShare, ProportionalShare} {
			var want []float64
			if kind == FairShare {
				want = naiveFairShare(capacity, wants, weights)
			} else {
				want = naiveProportionalShare(capacity, wants, weights)
			}
			s := tab.computeShares(kind, capacity)
			var total float64
			for j := range idx {
				got := s.target(wants[j], weights[j])
				total += got
				if !close9(got, want[j]) {
					t.Fatalf("trial %d %v: client %d (wants %v, weight %v) gets %v, straightforward %v\ncapacity %v wants %v weights %v",
						trial, kind, j, wants[j], weights[j], got, want[j], capacity, wants, weights)
				}
			}
			var sumWants float64
			for _, w := range wants {
				sumWants += w
			}
			if want := math.Min(capacity, sumWants); len(idx) > 0 && !close9(total, want) {
				t.Fatalf("trial %d %v: shares add up to %v, want min(capacity, wants) = %v", trial, kind, total, want)
			}
		}
	}
}

func randWants(rng *rand.Rand, capacity float64) float64 {
	switch rng.Intn(4) {
	case 0:
		return 0
	case 1:
		return float64(rng.Intn(4)) * capacity / 8 // ties
	default:
		return rng.Float64() * capacity
	}
}

func randWeight(rng *rand.Rand, trial int) float64 {
	if trial%2 == 0 {
		return 1
	}
	return float64(1 + rng.Intn(5))
}

// A large table: the exact level for 100,000 clients, and a resource that
// empties gives its memory back.
func TestSharesLargeTable(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	tab := newTable()
	wants := make([]float64, 100000)
	ones := make([]float64, len(wants))
	for i := range wants {
		wants[i] = rng.Float64() * 100
		ones[i] = 1
		j := tab.alloc("")
		tab.slots[j].wants = wants[i]
		tab.insert(j)
	}
	const capacity = 2_000_000
	want := naiveFairShare(capacity, wants, ones)
	s := tab.computeShares(FairShare, capacity)
	for i := 0; i < len(wants); i += 997 {
		if got := s.target(wants[i], 1); !close9(got, want[i]) {
			t.Fatalf("client %d: %v, want %v", i, got, want[i])
		}
	}
	for j := int32(1); j <= int32(len(wants)); j++ {
		tab.remove(j)
		tab.release(j)
	}
	if tab.root != 0 || cap(tab.slots) != 1 || tab.free != nil {
		t.Fatalf("an emptied table keeps root %d, %d slots, %d free", tab.root, cap(tab.slots), len(tab.free))
	}
}

// The expiry lists keep each lease length's leases in expiry order
// whatever happens (renewals, a lease length changing, the clock going
// back), earliest and latest find the first and last expiry, and unlink
// works from anywhere.
func TestExpiryLists(t *testing.T) {
	tab := newTable()
	rng := rand.New(rand.NewSource(3))
	now := int64(1000)
	var live []int32
	for k := 0; k < 3000; k++ {
		switch rng.Intn(10) {
		case 0:
			now += int64(rng.Intn(3)) - 1 // sometimes back
		case 1, 2:
			i := tab.alloc("")
			length := []int64{5, 60, 60, 60}[rng.Intn(4)]
			tab.link(i, now+length, length)
			live = append(live, i)
		case 3:
			if len(live) > 0 {
				j := rng.Intn(len(live))
				tab.unlink(live[j])
				tab.release(live[j])
				live = append(live[:j], live[j+1:]...)
			}
		default:
			if len(live) > 0 {
				i := live[rng.Intn(len(live))]
				length := []int64{5, 60, 60, 60}[rng.Intn(4)]
				tab.unlink(i)
				tab.link(i, now+length, length)
			}
		}
		n := 0
		var first, last int64 = 1 << 62, 0
		for _, l := range tab.lists {
			prev := int64(-1)
			for i := l.head; i != 0; i = tab.slots[i].next {
				sl := &tab.slots[i]
				if sl.expiry < prev || int32(sl.length) != l.length {
					t.Fatalf("step %d: list of length %d out of order or mixed at slot %d", k, l.length, i)
				}
				if p := sl.prev; p != 0 && tab.slots[p].next != i {
					t.Fatalf("step %d: broken back link at %d", k, i)
				}
				if sl.next == 0 && l.tail != i {
					t.Fatalf("step %d: tail %d, last slot %d", k, l.tail, i)
				}
				prev = sl.expiry
				first, last = min(first, sl.expiry), max(last, sl.expiry)
				n++
			}
		}
		if n != len(live) {
			t.Fatalf("step %d: lists hold %d of %d leases", k, n, len(live))
		}
		if n > 0 && (tab.slots[tab.earliest()].expiry != first || tab.latest() != last) {
			t.Fatalf("step %d: earliest %d latest %d, want %d and %d", k, tab.slots[tab.earliest()].expiry, tab.latest(), first, last)
		}
		if n == 0 && (tab.earliest() != 0 || tab.lists != nil) {
			t.Fatalf("step %d: empty table keeps lists %v", k, tab.lists)
		}
	}
}
