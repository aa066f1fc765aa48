package balancing

import (
	"math"
	"sort"
	"time"
)

// Load reports: a Sluice server reports its utilisation u (0 idle, 1 at
// its capacity) and the calls it answers a second q, and a client weighs
// it by its capacity, q / u (gRPC's weighted round robin, A58, does the
// same with ORCA's reports): servers run at the same utilisation when
// their shares of the calls are in proportion to their capacities, which
// is where these weights put them, whatever their sizes, with no weights
// configured. The capacity multiplies the peer's weight as a load
// factor, within bounds, so that a server's reports move its share only
// so far: one that lies (reports no load at all) draws at most
// MaxLoadFactor times a neutral peer's share.

// MinLoadFactor and MaxLoadFactor bound a peer's load factor: a server's
// reports can shrink its share to a quarter of a neutral peer's, or grow
// it fourfold, no further.
const (
	MinLoadFactor = 0.25
	MaxLoadFactor = 4
)

// minUtilisation is the least utilisation a capacity is worked out from:
// an idle server's figure says little, and none would make it infinite.
const minUtilisation = 0.01

// LoadTTL is how long a peer's load report counts: a server that stopped
// reporting (or a client that stopped calling it) is neutral again.
const LoadTTL = 5 * time.Second

// LoadCapacity returns the capacity, calls a second, of a server that
// answers qps calls a second at utilisation u, and whether the report says
// anything: a server that answered no calls does not. Below 1%
// utilisation the figure is only a lower bound (atLeast): the server could
// take at least qps / 1% calls a second, maybe far more. Taken as an
// estimate, it would pull a lightly loaded server's down, its share with
// it, and its utilisation further down: a spiral under light load.
func LoadCapacity(qps, u float64) (capacity float64, atLeast, ok bool) {
	if !(qps > 0) || math.IsNaN(u) || math.IsInf(qps, 0) {
		return 0, false, false
	}
	return qps / max(u, minUtilisation), u < minUtilisation, true
}

// LoadSmoothing is the weight of a new capacity in a peer's estimate
// (an exponentially weighted moving average over its reports): reports
// come every 100 ms or so (a Sluice server's report interval), and one
// window's count of calls is noisy.
const LoadSmoothing = 0.2

// LoadFactors sets out[i] to the load factor of the peer whose capacity
// estimate is caps[i] (0: no report, neutral, factor 1): each reporting
// peer's capacity relative to the reporting peers' median, clamped to
// [MinLoadFactor, MaxLoadFactor], then divided by the mean of the
// reporting peers' clamped factors so that they average 1 as a list's
// relative weights do, and clamped again. The median makes the reference
// one liar cannot move far; the mean keeps the reporting peers' weights
// on the scale of the others' (the lottery's discount for pending calls
// depends on it). It returns the number of reporting peers.
func LoadFactors(caps, out []float64) int {
	var known []float64
	for _, c := range caps {
		if c > 0 {
			known = append(known, c)
		}
	}
	for i := range out {
		out[i] = 1
	}
	if len(known) == 0 {
		return 0
	}
	// sort.Sort, not slices.Sort (nor sort.Float64s, which calls it):
	// every program on channel links sort.Sort already (tchannel-go does),
	// and slices.Sort on float64 would add its own instantiation, 13 KB, to
	// them (channel's TestBinarySize). The lists are short; none holds a
	// NaN.
	//lint:ignore S1032 sort.Float64s is slices.Sort, see above
	sort.Sort(sort.Float64Slice(known))
	med := known[len(known)/2]
	if len(known)%2 == 0 {
		med = (known[len(known)/2-1] + med) / 2
	}
	sum := 0.0
	for i, c := range caps {
		if c > 0 {
			out[i] = clampFactor(c / med)
			sum += out[i]
		}
	}
	mean := sum / float64(len(known))
	for i, c := range caps {
		if c > 0 {
			out[i] = clampFactor(out[i] / mean)
		}
	}
	return len(known)
}

func clampFactor(f float64) float64 { return min(max(f, MinLoadFactor), MaxLoadFactor) }
