package latency

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The expected latency's parameters.
const (
	// LowQuantile is the quantile Low estimates: a time shorter than it
	// is one in which at most 1 in 20 of the method's recent calls
	// finished, so work given less time is doomed 19 times in 20 (and the
	// caller's deadline, which set the time, ends it anyway).
	LowQuantile = 0.05
	// LowWindow is how many recent observations Low keeps: 64, of which
	// the 5% quantile is the 4th smallest (without cut-offs).
	LowWindow = 64
	// MinSamples is the cold-start rule: Low estimates nothing (Expected
	// says not ok, and nothing is refused) before this many observations.
	// The estimate from n observations is their ceil(LowQuantile*n)-th
	// smallest, k; the share of the method's latencies below it is then k/(n+1)
	// in expectation. With 32 it is the 2nd smallest (2/33, 6%, near
	// LowQuantile), not the smallest of a few, and one fast outlier (a
	// cache hit) cannot set it; with fewer than 1/LowQuantile = 20 it
	// would be the minimum of a handful, whose expected share (1/(n+1))
	// is far from the quantile asked.
	MinSamples = 32
	// lowEvery is how often Low recomputes: every lowEvery-th observation
	// sorts the window (64 numbers) under a lock taken with TryLock; the
	// others write one slot.
	lowEvery = 16
)

// Low estimates a method's expected latency: the LowQuantile (5%)
// quantile of its last LowWindow latencies, cut-offs counted as in
// Quantile (a cut-off below the estimate says the latency exceeded it,
// and lowers nothing). It is for deadline checks: work given less time
// than a low quantile of what the method takes is very likely doomed, and
// a low quantile (not the median) keeps refusals to that case. Until
// MinSamples observations it estimates nothing.
//
// Observe is cheap and lock-free: one atomic add and one atomic store, and
// every lowEvery-th a sort of the window under a lock no observer waits
// for (a second recomputation at once is skipped). Expected is one atomic
// load. The zero Low is ready to use; it is safe for concurrent use.
type Low struct {
	seen atomic.Uint64
	est  atomic.Int64 // nanoseconds; 0 until MinSamples observations
	ring [LowWindow]atomic.Int64

	mu      sync.Mutex // the recomputation's, with scratch
	scratch [LowWindow]int64
}

// Observe records a latency d: the work finished after d.
func (l *Low) Observe(d time.Duration) { l.observe(Pack(d, false)) }

// ObserveCensored records work cut off after d, before it finished (by
// its deadline, or cancelled): its latency is known only to exceed d.
func (l *Low) ObserveCensored(d time.Duration) { l.observe(Pack(d, true)) }

func (l *Low) observe(v int64) {
	n := l.seen.Add(1)
	l.ring[(n-1)%LowWindow].Store(v)
	if n < MinSamples || n%lowEvery != 0 || !l.mu.TryLock() {
		return
	}
	defer l.mu.Unlock()
	obs := l.scratch[:min(n, LowWindow)]
	for i := range obs {
		obs[i] = l.ring[i].Load()
	}
	slices.Sort(obs)
	l.est.Store(max(int64(Quantile(obs, LowQuantile)), 1))
}

// Expected returns the method's expected latency, and whether there is
// one: not before MinSamples observations.
func (l *Low) Expected() (time.Duration, bool) {
	d := l.est.Load()
	return time.Duration(d), d > 0
}

// Ready reports whether Expected has an estimate: one atomic load, for a
// caller that reads the clock only when there is something to compare.
func (l *Low) Ready() bool { return l.est.Load() > 0 }

// Doomed reports whether work given left, the time until its deadline,
// is shorter than the expected latency: false before MinSamples
// observations (the cold start) and for a nil Low.
func (l *Low) Doomed(left time.Duration) bool {
	if l == nil {
		return false
	}
	d := l.est.Load()
	return d > 0 && int64(left) < d
}

// Samples returns the number of observations so far.
func (l *Low) Samples() int { return int(l.seen.Load()) }
