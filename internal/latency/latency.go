// Package latency holds a Channel's latency quantiles: the product-limit
// (Kaplan-Meier) quantile of a window of observations, some of them
// cut-offs (Quantile, which hedging's Estimator uses for its delay), and
// Low, a method's expected latency for deadline checks: a retry or hedge
// is not sent, and a server refuses a request at admission, when the time
// left is shorter than it.
package latency

import (
	"math"
	"time"
)

// Pack encodes an observation for Quantile: its latency (at least 0, at
// most math.MaxInt64>>1 ns) shifted left by one, with the low bit set for a
// cut-off (censored: the latency is known only to exceed d). Packed
// observations sort by latency, a finished one before a cut-off of the
// same latency, as the product-limit estimate counts them.
func Pack(d time.Duration, censored bool) int64 {
	v := min(max(int64(d), 0), math.MaxInt64>>1) << 1
	if censored {
		v |= 1
	}
	return v
}

// Quantile returns the q-quantile of the Kaplan-Meier estimate over obs,
// packed observations (Pack) sorted ascending, at least one: the least
// finished latency at which the estimate's survival falls to 1-q or below,
// or, when it never does, the largest observation (Efron's convention).
// Without cut-offs it is the plain sample quantile, the ceil(q*n)-th
// smallest of n.
func Quantile(obs []int64, q float64) time.Duration {
	// The survival is a product of up to len(obs) rounded factors; the
	// tolerance keeps the exact ceil(q*n)-th smallest of uncensored
	// observations (its survival is exactly 1-q when q*n is whole).
	limit := (1 - q) * (1 + 1e-9)
	s, n := 1.0, len(obs)
	for i, v := range obs {
		if v&1 != 0 {
			continue // a cut-off: leaves the risk set, lowers nothing
		}
		at := n - i // observations not below this one
		s *= float64(at-1) / float64(at)
		if s <= limit {
			return time.Duration(v >> 1)
		}
	}
	return time.Duration(obs[n-1] >> 1)
}
