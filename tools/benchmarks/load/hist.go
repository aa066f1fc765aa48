package load

import (
	"math"
	"math/bits"
	"time"
)

// hist is a log-linear histogram of durations, what an unbounded run
// records its latencies in: a call costs one increment, and memory stays
// bounded however many calls a run makes.
//
// Durations below 2^histSubBits ns (128 ns) have a bucket each. Above,
// every power of two [2^k, 2^(k+1)) is cut into 2^histSubBits buckets of
// equal width, so a bucket is at most 1/128 of its values wide: a quantile
// read from it (the bucket's midpoint) is within 0.4% of the exact one. A
// group of buckets is allocated the first time a duration falls in it
// (latencies cluster in a few powers of two, so a histogram holds a few
// KiB). The count, sum, minimum and maximum are exact. Not safe for
// concurrent use: each worker keeps its own, and merge adds them up.
type hist struct {
	groups   [histGroups]*[histSub]uint64
	n        int64
	sum      time.Duration
	min, max time.Duration
}

const (
	histSubBits = 7
	histSub     = 1 << histSubBits
	// histGroups covers durations up to 2^(histGroups+histSubBits-1) ns:
	// every time.Duration.
	histGroups = 64 - histSubBits
)

// histIndex returns the group and bucket of d (>= 0).
func histIndex(d time.Duration) (group, sub int) {
	v := uint64(d)
	if v < histSub {
		return 0, int(v)
	}
	shift := bits.Len64(v) - histSubBits - 1 // >= 0
	if shift+1 >= histGroups {
		return histGroups - 1, histSub - 1
	}
	return shift + 1, int(v>>shift) - histSub
}

// histBucket returns the smallest duration of a bucket and its width.
func histBucket(group, sub int) (lo, width time.Duration) {
	if group == 0 {
		return time.Duration(sub), 1
	}
	shift := group - 1
	return time.Duration(uint64(histSub+sub) << shift), time.Duration(uint64(1) << shift)
}

// group returns group g's buckets, allocating them the first time.
func (h *hist) group(g int) *[histSub]uint64 {
	if h.groups[g] == nil {
		h.groups[g] = new([histSub]uint64)
	}
	return h.groups[g]
}

// add records d; a negative d counts as 0.
func (h *hist) add(d time.Duration) {
	d = max(d, 0)
	g, s := histIndex(d)
	h.group(g)[s]++
	if h.n == 0 || d < h.min {
		h.min = d
	}
	h.max = max(h.max, d)
	h.n++
	h.sum += d
}

// merge adds o's durations to h.
func (h *hist) merge(o *hist) {
	if o.n == 0 {
		return
	}
	for g, ob := range o.groups {
		if ob != nil {
			b := h.group(g)
			for i, c := range ob {
				b[i] += c
			}
		}
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

// quantile returns the q-quantile (nearest rank, as Quantile) to within
// the bucket's width: the midpoint of the bucket holding that rank,
// within [min, max]; 0 when h is empty.
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	if rank == h.n {
		return h.max
	}
	var seen int64
	for g, b := range h.groups {
		if b == nil {
			continue
		}
		for s, c := range b {
			if seen += int64(c); seen >= rank {
				lo, w := histBucket(g, s)
				return min(max(lo+w/2, h.min), h.max)
			}
		}
	}
	return h.max
}

// quantiles returns h's Quantiles.
func (h *hist) quantiles() Quantiles { return newQuantiles(int(h.n), h.sum, h.quantile) }
