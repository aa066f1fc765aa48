package leasing

import "math"

// shares is the result of one algorithm run over a resource's clients: a
// summary from which any client's target is computed in O(1). It is
// recomputed only when a client's wants, the set of clients or the capacity
// change.
type shares struct {
	kind     Kind
	capacity float64
	// FairShare: clients get min(wants, level).
	level float64
	// ProportionalShare: clients wanting up to equal get their wants; the
	// others get equal + extra*(wants-equal)/excess, capped at wants.
	equal, extra, excess float64
}

// computeShares runs kind over wants. scratch, if long enough, is used for
// FairShare's selection so that steady-state runs allocate nothing; the
// possibly grown buffer is returned. Both ProportionalShare and FairShare
// run in O(n) (FairShare in expected O(n)).
func computeShares(kind Kind, capacity float64, wants []float64, scratch []float64) (shares, []float64) {
	s := shares{kind: kind, capacity: capacity}
	n := len(wants)
	switch kind {
	case ProportionalShare:
		if n == 0 {
			return s, scratch
		}
		s.equal = capacity / float64(n)
		for _, w := range wants {
			if w < s.equal {
				s.extra += s.equal - w
			} else {
				s.excess += w - s.equal
			}
		}
	case FairShare:
		scratch = append(scratch[:0], wants...)
		s.level = fairLevel(capacity, scratch)
	}
	return s, scratch
}

// target is what a client wanting w should get once every client has
// renewed, before capping by the capacity other clients still hold.
func (s *shares) target(w float64) float64 {
	switch s.kind {
	case NoAlgorithm:
		return w
	case Static:
		return math.Min(w, s.capacity)
	case ProportionalShare:
		if w <= s.equal || s.excess == 0 {
			return w
		}
		return math.Min(w, s.equal+s.extra*(w-s.equal)/s.excess)
	case FairShare:
		return math.Min(w, s.level)
	}
	return 0
}

// Allocate divides capacity between clients wanting wants[i] under kind and
// writes each client's share to gets (which must be at least as long as
// wants). It is the algorithm the server runs, without leases: the shares
// clients converge to once all have renewed. ProportionalShare runs in
// O(n) and FairShare in O(n log n).
func Allocate(kind Kind, capacity float64, wants, gets []float64) {
	s, _ := computeShares(kind, capacity, wants, nil)
	for i, w := range wants {
		gets[i] = s.target(w)
	}
}

// fairLevel returns the water level L of max-min fair division: the L for
// which the sum over clients of min(wants, L) equals capacity, or +Inf if
// the total wants fit. It runs in expected O(n) by quickselect-style
// partitioning (xs is reordered): for a pivot p, if giving every client
// min(wants, p) fits in capacity then L >= p and the clients wanting at
// most p are satisfied; otherwise L < p and those wanting p or more get L.
func fairLevel(capacity float64, xs []float64) float64 {
	var below float64 // total wants of clients known to be satisfied
	above := 0        // clients known to get the level
	for len(xs) > 0 {
		p := median3(xs[0], xs[len(xs)/2], xs[len(xs)-1])
		// Three-way partition: [ < p | == p | > p ].
		lt, i, gt := 0, 0, len(xs)
		var sumLT, sumEQ float64
		for i < gt {
			switch x := xs[i]; {
			case x < p:
				xs[lt], xs[i] = xs[i], xs[lt]
				sumLT += x
				lt++
				i++
			case x > p:
				gt--
				xs[gt], xs[i] = xs[i], xs[gt]
			default:
				sumEQ += x
				i++
			}
		}
		if below+sumLT+sumEQ+float64(above+len(xs)-gt)*p <= capacity {
			below += sumLT + sumEQ
			xs = xs[gt:]
		} else {
			above += len(xs) - lt
			xs = xs[:lt]
		}
	}
	if above == 0 {
		return math.Inf(1)
	}
	return math.Max(0, (capacity-below)/float64(above))
}

func median3(a, b, c float64) float64 {
	if a > b {
		a, b = b, a
	}
	if b > c {
		b = c
	}
	return math.Max(a, b)
}
