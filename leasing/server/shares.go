package server

import "math"

// This file holds the algorithms' core: a resource's clients kept in a
// treap ordered by wants per subclient, each subtree carrying the sums of
// its wants, subclients and granted capacity. Every change (a client's
// wants, its grant, its arrival or departure) costs O(log n) expected, and
// so does every share: the FairShare water level and the ProportionalShare
// split are found by one descent, exactly (no iteration, no
// approximation), so that a request's cost does not grow with the number
// of clients of its resource.
//
// A client asking on behalf of several (an intermediate server reporting
// num_clients in GetServerCapacity) counts as that many subclients, each
// entitled to an equal share, as in the original: FairShare gives a client
// with k subclients min(wants, k*level), ProportionalShare gives it at
// least min(wants, k*capacity/K) where K is the resource's total of
// subclients.

// slot is one lease in a table: the client's state, its place in the
// expiry list and its node in the shares treap. Slot 0 is unused, so that
// index 0 means "none".
type slot struct {
	client      string
	wants       float64 // what the client wants
	has         float64 // what the server granted it (unexpired)
	weight      float64 // subclients: 1 for a client, num_clients for a server
	priority    int64
	expiry      int64 // unix seconds; the lease is expired from then on
	lastRequest int64 // unix nanoseconds

	ent *clientEntry // the client's entry in the client table

	prev, next int32 // the expiry list of leases of this length, earliest first
	length     int32 // the lease length, in seconds: which expiry list

	// The treap, keyed by (ratio, index).
	ratio                       float64 // wants / weight
	left, right                 int32
	prio                        uint32
	sumWants, sumWeight, sumHas float64 // over the subtree
}

// table holds a resource's leases: a slot per client, expiry lists
// (earliest expiry first, so that expired leases are found at their heads
// in O(1)) and the shares treap.
type table struct {
	slots []slot
	free  []int32
	root  int32
	lists []expiryList
	rng   uint64
	// floors holds the floors of slots of servers that lost track of
	// their grant (see decide); nil for almost every resource, so that a
	// lease pays nothing for them.
	floors map[int32]floor
}

// floor is what a server that lost track of its last grant (it restarted,
// see decide) is granted and counted at least, until (unix seconds) the
// leases it handed out of that grant have ended; an intermediate asks its
// own parent for at least amount and weight (the server's subclients
// before) on its behalf meanwhile.
type floor struct {
	amount, weight float64
	until          int64
}

// floor returns slot i's floor, if one holds at sec.
func (t *table) floor(i int32, sec int64) (floor, bool) {
	if t.floors == nil {
		return floor{}, false
	}
	f, ok := t.floors[i]
	return f, ok && f.until > sec
}

// raiseFloor sets slot i's floor to f at sec, or raises the one holding.
func (t *table) raiseFloor(i int32, f floor, sec int64) {
	if old, ok := t.floor(i, sec); ok {
		f = floor{math.Max(old.amount, f.amount), math.Max(old.weight, f.weight), max(old.until, f.until)}
	}
	if t.floors == nil {
		t.floors = make(map[int32]floor)
	}
	t.floors[i] = f
}

func newTable() table {
	return table{slots: make([]slot, 1, 2), rng: 0x9e3779b97f4a7c15}
}

// n returns the number of leases in the table.
func (t *table) n() int { return len(t.slots) - 1 - len(t.free) }

// alloc returns a fresh slot for client, in neither the list nor the tree.
func (t *table) alloc(client string) int32 {
	var i int32
	if k := len(t.free); k > 0 {
		i = t.free[k-1]
		t.free = t.free[:k-1]
	} else {
		t.slots = append(t.slots, slot{})
		i = int32(len(t.slots) - 1)
	}
	t.rng ^= t.rng << 13
	t.rng ^= t.rng >> 7
	t.rng ^= t.rng << 17
	t.slots[i] = slot{client: client, weight: 1, prio: uint32(t.rng >> 32)}
	return i
}

// release returns slot i (already out of the list and the tree).
func (t *table) release(i int32) {
	t.slots[i] = slot{}
	delete(t.floors, i)
	t.free = append(t.free, i)
	if t.n() == 0 {
		// Give the memory of a resource that emptied back.
		t.slots = t.slots[:1:1]
		t.free = nil
		t.floors = nil
	}
}

// less orders slots by ratio, then index: a total order.
func (t *table) less(a, b int32) bool {
	ra, rb := t.slots[a].ratio, t.slots[b].ratio
	return ra < rb || (ra == rb && a < b)
}

func (t *table) pull(i int32) {
	s := &t.slots[i]
	s.sumWants, s.sumWeight, s.sumHas = s.wants, s.weight, s.has
	if l := s.left; l != 0 {
		ls := &t.slots[l]
		s.sumWants += ls.sumWants
		s.sumWeight += ls.sumWeight
		s.sumHas += ls.sumHas
	}
	if r := s.right; r != 0 {
		rs := &t.slots[r]
		s.sumWants += rs.sumWants
		s.sumWeight += rs.sumWeight
		s.sumHas += rs.sumHas
	}
}

// merge joins treaps a and b, every key of a less than every key of b.
func (t *table) merge(a, b int32) int32 {
	if a == 0 {
		return b
	}
	if b == 0 {
		return a
	}
	if t.slots[a].prio >= t.slots[b].prio {
		t.slots[a].right = t.merge(t.slots[a].right, b)
		t.pull(a)
		return a
	}
	t.slots[b].left = t.merge(a, t.slots[b].left)
	t.pull(b)
	return b
}

// split splits treap x into the keys less than k's and the others.
func (t *table) split(x, k int32) (int32, int32) {
	if x == 0 {
		return 0, 0
	}
	if t.less(x, k) {
		l, r := t.split(t.slots[x].right, k)
		t.slots[x].right = l
		t.pull(x)
		return x, r
	}
	l, r := t.split(t.slots[x].left, k)
	t.slots[x].left = r
	t.pull(x)
	return l, x
}

// insert adds slot i to the tree, keyed by its ratio.
func (t *table) insert(i int32) {
	s := &t.slots[i]
	s.ratio = s.wants / s.weight
	s.left, s.right = 0, 0
	t.pull(i)
	l, r := t.split(t.root, i)
	t.root = t.merge(t.merge(l, i), r)
}

// remove takes slot i out of the tree.
func (t *table) remove(i int32) { t.root = t.removeFrom(t.root, i) }

func (t *table) removeFrom(x, i int32) int32 {
	if x == i {
		return t.merge(t.slots[i].left, t.slots[i].right)
	}
	if x == 0 {
		return 0
	}
	if t.less(i, x) {
		t.slots[x].left = t.removeFrom(t.slots[x].left, i)
	} else {
		t.slots[x].right = t.removeFrom(t.slots[x].right, i)
	}
	t.pull(x)
	return x
}

// setHas changes slot i's granted capacity, keeping the sums.
func (t *table) setHas(i int32, has float64) {
	if t.slots[i].has == has {
		return
	}
	t.slots[i].has = has
	t.repath(t.root, i)
}

// repath recomputes the sums on the path from x down to i.
func (t *table) repath(x, i int32) {
	if x == 0 {
		return
	}
	if x != i {
		if t.less(i, x) {
			t.repath(t.slots[x].left, i)
		} else {
			t.repath(t.slots[x].right, i)
		}
	}
	t.pull(x)
}

// setDemand changes slot i's wants and weight, moving it in the tree.
func (t *table) setDemand(i int32, wants, weight float64) {
	s := &t.slots[i]
	if s.wants == wants && s.weight == weight {
		return
	}
	t.remove(i)
	s = &t.slots[i]
	s.wants, s.weight = wants, weight
	t.insert(i)
}

// totals returns the sums over every lease: wants, subclients, granted.
func (t *table) totals() (wants, weight, has float64) {
	if t.root == 0 {
		return 0, 0, 0
	}
	s := &t.slots[t.root]
	return s.sumWants, s.sumWeight, s.sumHas
}

// fairLevel returns the water level L of weighted max-min fair division:
// the L for which the sum over clients of min(wants, weight*L) equals
// capacity, or +Inf when the total wants fit. One descent: at a node of
// ratio r, if giving every client min(wants, weight*r) fits, the level is
// at least r and every client of ratio <= r is satisfied; otherwise it is
// below r and every client of ratio >= r gets weight*L.
func (t *table) fairLevel(capacity float64) float64 {
	var below, above float64 // wants of satisfied clients; weight of the others
	for x := t.root; x != 0; {
		s := &t.slots[x]
		var lw, rk float64
		if s.left != 0 {
			lw = t.slots[s.left].sumWants
		}
		if s.right != 0 {
			rk = t.slots[s.right].sumWeight
		}
		if below+lw+s.wants+s.ratio*(above+rk) <= capacity {
			below += lw + s.wants
			x = s.right
		} else {
			above += s.weight + rk
			x = s.left
		}
	}
	if above == 0 {
		return math.Inf(1)
	}
	return math.Max(0, (capacity-below)/above)
}

// below returns the sums of wants and weight over the clients whose ratio
// is less than r.
func (t *table) below(r float64) (wants, weight float64) {
	for x := t.root; x != 0; {
		s := &t.slots[x]
		if s.ratio < r {
			if s.left != 0 {
				wants += t.slots[s.left].sumWants
				weight += t.slots[s.left].sumWeight
			}
			wants += s.wants
			weight += s.weight
			x = s.right
		} else {
			x = s.left
		}
	}
	return wants, weight
}

// shares is the result of one algorithm run over a resource's clients: a
// summary from which any client's target is computed in O(1).
type shares struct {
	kind     Kind
	capacity float64
	// FairShare: a client gets min(wants, weight*level).
	level float64
	// ProportionalShare: a client whose wants fit in its equal share
	// (weight*equal) gets them; the others get
	// weight*equal + extra*(wants-weight*equal)/excess, capped at wants.
	all                  bool // the total wants fit: everyone gets its wants
	equal, extra, excess float64
}

// computeShares runs kind over the table's clients in O(log n).
func (t *table) computeShares(kind Kind, capacity float64) shares {
	s := shares{kind: kind, capacity: capacity}
	wants, weight, _ := t.totals()
	switch kind {
	case ProportionalShare:
		if weight == 0 || wants <= capacity {
			s.all = true
			return s
		}
		s.equal = capacity / weight
		bw, bk := t.below(s.equal)
		s.extra = s.equal*bk - bw
		s.excess = (wants - bw) - s.equal*(weight-bk)
	case FairShare:
		s.level = t.fairLevel(capacity)
	}
	return s
}

// target is what a client wanting w on behalf of weight subclients should
// get once every client has renewed, before capping by the capacity other
// clients still hold.
func (s *shares) target(w, weight float64) float64 {
	switch s.kind {
	case NoAlgorithm:
		return w
	case Static:
		return math.Min(w, s.capacity)
	case ProportionalShare:
		e := weight * s.equal
		if s.all || w <= e {
			return math.Min(w, s.capacity)
		}
		// w-e is part of the excess: the fraction is at most 1 (but for
		// rounding), so the product cannot overflow, as extra*(w-e)
		// could with huge wants.
		frac := 0.0
		if s.excess > 0 {
			frac = math.Min(1, (w-e)/s.excess)
		}
		return math.Min(math.Min(w, e+s.extra*frac), s.capacity)
	case FairShare:
		if math.IsInf(s.level, 1) {
			return math.Min(w, s.capacity)
		}
		return math.Min(math.Min(w, weight*s.level), s.capacity)
	}
	return 0
}

// clampWants returns wants as the algorithms take it: within [0,
// MaxCapacity] (NaN as 0), so that sums over a resource's clients stay
// finite.
func clampWants(w float64) float64 {
	if !(w > 0) {
		return 0
	}
	return math.Min(w, MaxCapacity)
}

// Allocate divides capacity between clients wanting wants[i] under kind and
// writes each client's share to gets (which must be at least as long as
// wants). It is the algorithm the server runs, without leases: the shares
// clients converge to once all have renewed. It takes O(n log n).
//
// As in the server, wants and capacity are taken within [0, MaxCapacity]
// (NaN as 0): every share is finite, at least 0 and at most the capacity
// (but for NoAlgorithm, which ignores the capacity and gives what is
// wanted, up to MaxCapacity).
func Allocate(kind Kind, capacity float64, wants, gets []float64) {
	capacity = clampWants(capacity)
	t := newTable()
	for _, w := range wants {
		i := t.alloc("")
		t.slots[i].wants = clampWants(w)
		t.insert(i)
	}
	s := t.computeShares(kind, capacity)
	for i, w := range wants {
		gets[i] = s.target(clampWants(w), 1)
	}
}
