package balancing

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
)

// RingPointsPerWeight is the number of points a member of average weight
// gets on a Ring: with equal weights every member has exactly this many.
const RingPointsPerWeight = 160

// MaxRingPoints is the most points a Ring holds. NewRing scales every
// member's share down in proportion when its weights would pass it.
const MaxRingPoints = 1 << 20

// FNV-1a 64-bit parameters.
const (
	fnvOffset64 = 0xcbf29ce484222325
	fnvPrime64  = 0x100000001b3
)

// KeyHash returns the ring position of a shard key: FNV-1a 64 over its
// bytes, then the murmur3 fmix64 finalizer to spread FNV's weak high bits.
// It depends on the key's bytes alone, so every process and Go version
// agrees on it, and it allocates nothing.
func KeyHash(key string) uint64 { return hash(key) }

// hash is KeyHash over a string or a byte slice, so NewRing can hash the
// point names it builds in a reused buffer without converting them.
func hash[T string | []byte](b T) uint64 {
	h := uint64(fnvOffset64)
	for i := 0; i < len(b); i++ {
		h ^= uint64(b[i])
		h *= fnvPrime64
	}
	return fmix64(h)
}

// fmix64 is murmur3's 64-bit finalizer: a bijection in which every input
// bit affects every output bit.
func fmix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}

// Ring is an immutable consistent-hash ring over n members (n >= 1),
// numbered 0..n-1 in the order NewRing was given their names. Each member
// is placed at a number of points in proportion to its weight; a position
// on the ring (a uint64, such as KeyHash of a shard key) is owned by the
// member of the first point at or after it, wrapping past the last point
// to the first.
//
// Invariants: every member has at least one point; there are at most
// MaxRingPoints points; points are sorted by position, ties by member
// index. Point j of a member named name is at
// KeyHash(name + "#" + strconv.Itoa(j)) and the number of points depends
// only on the weights, so rings built from the same names and weights in
// any process are identical. A member's points do not depend on its index
// or the other members' names: with equal weights, adding or removing a
// member moves only the keys homed on that member.
//
// A Ring is safe for concurrent use. The zero Ring has no members: its
// Home returns -1 and its Walk visits nothing.
type Ring struct {
	n      int
	pos    []uint64 // point positions, ascending
	owners []int32  // owners[i] is the member at pos[i]
}

// point is one point of a Ring under construction.
type point struct {
	pos   uint64
	owner int32
}

// NewRing returns a Ring over the members named names (unique and
// non-empty: the peers' host:port) with the given weights (nil: all 1;
// otherwise one per name, each finite and > 0).
//
// Member i gets round(RingPointsPerWeight * n * (weights[i] / sum)) points,
// at least 1, where sum is the weights' total added in index order (if
// that total overflows, every weight is first divided by the largest) and
// round is math.Round. If the points would total more than MaxRingPoints,
// each member keeps 1 point and the remaining MaxRingPoints - n are shared
// in proportion to the points it had beyond 1, rounding down. The
// arithmetic is IEEE float64 with every product explicitly rounded, so it
// is the same on every platform.
//
// It returns an error naming the member and the rule when names is empty
// or has more than MaxRingPoints entries, a name is empty or repeated,
// weights has the wrong length, or a weight is <= 0, NaN or infinite.
func NewRing(names []string, weights []float64) (*Ring, error) {
	n := len(names)
	if n == 0 {
		return nil, fmt.Errorf("balancing: ring has no members, must have at least 1")
	}
	if n > MaxRingPoints {
		return nil, fmt.Errorf("balancing: ring has %d members, must have at most MaxRingPoints (%d)", n, MaxRingPoints)
	}
	if weights != nil && len(weights) != n {
		return nil, fmt.Errorf("balancing: ring has %d weights for %d members, must have one weight per member or nil weights", len(weights), n)
	}
	first := make(map[string]int, n)
	for i, name := range names {
		if name == "" {
			return nil, fmt.Errorf("balancing: ring member %d has an empty name, must be non-empty (the peer's host:port)", i)
		}
		if j, dup := first[name]; dup {
			return nil, fmt.Errorf("balancing: ring member %d (%q) has the same name as member %d, names must be unique", i, name, j)
		}
		first[name] = i
		if weights != nil {
			if w := weights[i]; !(w > 0) || math.IsInf(w, 1) {
				return nil, fmt.Errorf("balancing: ring member %d (%q) has weight %v, must be finite and > 0", i, name, w)
			}
		}
	}

	counts, total := pointCounts(n, weights)
	pts := make([]point, 0, total)
	var buf []byte
	for i, name := range names {
		buf = append(buf[:0], name...)
		buf = append(buf, '#')
		prefix := len(buf)
		for j := range counts[i] {
			buf = strconv.AppendInt(buf[:prefix], int64(j), 10)
			pts = append(pts, point{pos: hash(buf), owner: int32(i)})
		}
	}
	sortPoints(pts)

	r := &Ring{n: n, pos: make([]uint64, len(pts)), owners: make([]int32, len(pts))}
	for i, p := range pts {
		r.pos[i], r.owners[i] = p.pos, p.owner
	}
	return r, nil
}

// pointCounts returns each of n members' number of points, as NewRing
// documents, and their total. weights are valid for n members or nil.
func pointCounts(n int, weights []float64) (counts []int, total int) {
	counts = make([]int, n)
	if weights == nil {
		for i := range counts {
			counts[i] = RingPointsPerWeight
		}
		total = RingPointsPerWeight * n
	} else {
		sum := 0.0
		for _, w := range weights {
			sum += w
		}
		scale := 1.0 // divides every weight before its share is taken
		if math.IsInf(sum, 1) {
			scale = slices.Max(weights)
			sum = 0
			for _, w := range weights {
				sum += w / scale
			}
		}
		base := float64(RingPointsPerWeight * n)
		for i, w := range weights {
			c := int(math.Round(float64(base * float64(w/scale/sum))))
			c = max(c, 1)
			counts[i] = c
			total += c
		}
	}
	if total <= MaxRingPoints {
		return counts, total
	}
	// Each member keeps 1 point; the rest of the budget is shared in
	// proportion to the points beyond 1, rounding down, so the total stays
	// within MaxRingPoints. The products are below 160n * 2^20 <= 2^48.
	budget, extra := MaxRingPoints-n, total-n
	total = 0
	for i, c := range counts {
		c = 1 + (c-1)*budget/extra
		counts[i] = c
		total += c
	}
	return counts, total
}

// sortPoints sorts points by position, ties by owner, so a ring's order
// does not depend on the order its points were made in. It sorts through
// sort.Interface, whose code a program on channel links anyway:
// slices.SortFunc would add an instance of the generic sort for points,
// 19 KB of a program's binary (channel's TestBinarySize), to build a ring
// of 100 members in 1.5 ms rather than 1.75 ms (BenchmarkNewRing).
func sortPoints(pts []point) { sort.Sort(byPosition(pts)) }

// byPosition orders points by position, ties by owner.
type byPosition []point

func (p byPosition) Len() int      { return len(p) }
func (p byPosition) Swap(i, j int) { p[i], p[j] = p[j], p[i] }
func (p byPosition) Less(i, j int) bool {
	if p[i].pos != p[j].pos {
		return p[i].pos < p[j].pos
	}
	return p[i].owner < p[j].owner
}

// Len returns the number of members.
func (r *Ring) Len() int { return r.n }

// Points returns the number of points on the ring.
func (r *Ring) Points() int { return len(r.pos) }

// search returns the index of the first point at or after h, wrapping to
// 0 past the last point. The ring must have points.
func (r *Ring) search(h uint64) int {
	lo, hi := 0, len(r.pos)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if r.pos[m] < h {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == len(r.pos) {
		return 0
	}
	return lo
}

// Home returns the member owning position h: the member of the first
// point at or after h, wrapping to the first point. It allocates nothing.
func (r *Ring) Home(h uint64) int {
	if len(r.pos) == 0 {
		return -1
	}
	return int(r.owners[r.search(h)])
}

// walkStackMembers is the most members Walk tracks in a bitset on its
// stack; larger rings allocate one per call.
const walkStackMembers = 512

// Walk calls visit with each distinct member in ring order starting at
// the home of h (the home first), each member once, until visit returns
// false or every member has been visited. This is the order in which a
// caller bounding loads falls back from a key's home.
//
// It allocates nothing for rings of up to 512 members (it keeps a bitset
// of visited members on its stack) provided visit does not escape; larger
// rings allocate one bitset per call.
func (r *Ring) Walk(h uint64, visit func(member int) bool) {
	np := len(r.pos)
	if np == 0 {
		return
	}
	var stack [walkStackMembers / 64]uint64
	var seen []uint64
	if words := (r.n + 63) / 64; words <= len(stack) {
		seen = stack[:words]
	} else {
		seen = make([]uint64, words)
	}
	// Every member has a point, so one turn of the ring visits them all;
	// visited counts them so a walk stops as soon as it has.
	i, visited := r.search(h), 0
	for range np {
		m := uint32(r.owners[i])
		if seen[m/64]&(1<<(m%64)) == 0 {
			seen[m/64] |= 1 << (m % 64)
			visited++
			if !visit(int(m)) || visited == r.n {
				return
			}
		}
		if i++; i == np {
			i = 0
		}
	}
}
