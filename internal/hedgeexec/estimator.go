package hedgeexec

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/hedge"
	"github.com/sluice-rpc/sluice/internal/latency"
)

// Estimator keeps a method's last Window first-attempt latencies and turns
// them into a hedging delay: their Quantile, within [Floor, Cap].
//
// A first attempt either finished (Observe: its latency is known) or was
// cut off after d, cancelled because a hedge won or by the deadline
// (ObserveCensored: its latency is known only to exceed d). The cut-offs
// are right-censored observations, and the quantile is that of the
// Kaplan-Meier (product-limit) estimate over the window: S(t), the share
// of attempts lasting longer than t, is the product over finished
// latencies u <= t of (1 - 1/r(u)), r(u) being the observations in the
// window not below u; the delay is the least finished latency t with
// S(t) <= 1-Quantile. A finished attempt and a cut-off of the same
// duration count the finish first. Without cut-offs this is the plain
// sample quantile, the ceil(Quantile*n)-th smallest of n. When the cut-offs
// leave more than 1-Quantile of the estimate beyond every finished
// latency, the quantile lies beyond what the window measured: the delay is
// then the largest observation, a cut-off (Efron's convention, the largest
// observation counted as finished), never less than what the window has
// shown the quantile to exceed.
//
// Cut-offs must not be observed as finished latencies: a cancelled first
// attempt's cut-off is the hedging delay plus the hedge's latency, so
// counting it as finished pulls the quantile down toward the delay in
// force. A delay below the true quantile then climbs by less than a
// hedge's latency per recomputation, and where it settles depends on where
// it started (TestCutOffsObservedAsFinishedStayLow).
//
// Hedges' latencies are not observed: a hedge is sent only for calls whose
// first attempt was already slow, so when the slowness of one call's
// attempts is correlated (an expensive request, a slow spell) they sample
// the slow calls, not the method; the first attempts, one per call, do.
// Where attempts are independent, hedges would add only a few percent
// more observations.
//
// Observe, ObserveCensored and Delay are safe for concurrent use, and none
// allocates. Every Window/10-th observation recomputes the quantile under
// the lock (a sort of the window and one pass over it); the others write
// one slot. Delay is one atomic load.
type Estimator struct {
	cfg      hedge.Adaptive
	fallback time.Duration
	delay    atomic.Int64 // nanoseconds; 0 until enough samples

	mu      sync.Mutex
	ring    []int64 // observations, packed (latency.Pack)
	next    int     // ring position of the next observation
	seen    int     // observations ever
	pending int     // observations since the last recomputation
	scratch []int64
}

// NewEstimator returns an Estimator for cfg; fallback is the delay used
// until enough latencies are seen (clamped to [Floor, Cap]; 0 means Cap, so
// that a cold start hedges as little as the configuration allows).
func NewEstimator(cfg hedge.Adaptive, fallback time.Duration) (*Estimator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if fallback <= 0 {
		fallback = cfg.Cap
	}
	return &Estimator{cfg: cfg, fallback: clamp(fallback, cfg.Floor, cfg.Cap), ring: make([]int64, cfg.Window),
		scratch: make([]int64, 0, cfg.Window)}, nil
}

// Observe records a first attempt that finished after d: its latency is d.
func (e *Estimator) Observe(d time.Duration) { e.observe(latency.Pack(d, false)) }

// ObserveCensored records a first attempt cut off after d, before it
// finished: cancelled because a hedge won or the caller gave up, or ended
// by the deadline. Its latency is known only to exceed d.
func (e *Estimator) ObserveCensored(d time.Duration) { e.observe(latency.Pack(d, true)) }

func (e *Estimator) observe(v int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ring[e.next] = v
	e.next = (e.next + 1) % len(e.ring)
	e.seen++
	e.pending++
	if e.pending < max(1, len(e.ring)/10) {
		return
	}
	e.pending = 0
	n := min(e.seen, len(e.ring))
	e.scratch = append(e.scratch[:0], e.ring[:n]...)
	slices.Sort(e.scratch)
	e.delay.Store(int64(clamp(latency.Quantile(e.scratch, e.cfg.Quantile), e.cfg.Floor, e.cfg.Cap)))
}

// Delay returns the hedging delay now.
func (e *Estimator) Delay() time.Duration {
	if d := e.delay.Load(); d > 0 {
		return time.Duration(d)
	}
	return e.fallback
}

// Samples returns the number of first attempts observed so far, finished
// or cut off. Until Window/10 have been, Delay is the fallback delay;
// after, the quantile over the last min(Samples, Window). It takes the
// Estimator's lock briefly.
func (e *Estimator) Samples() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.seen
}

func clamp(d, lo, hi time.Duration) time.Duration { return max(lo, min(hi, d)) }

// budgetScale is the fixed-point scale of Budget: thousandths of an attempt.
const budgetScale = 1000

// Budget limits hedges to a fraction of calls: every call deposits the
// fraction, every hedge withdraws one whole attempt, and a hedge is refused
// while less than one is saved. The balance is capped so that a quiet spell
// cannot save up a burst of more than burst hedges. Safe for concurrent use;
// a nil *Budget allows everything.
type Budget struct {
	perCall int64 // thousandths deposited per call
	cap     int64
	balance atomic.Int64
}

// NewBudget returns a budget of fraction extra attempts per call, allowing
// bursts of up to burst hedges (at least 1). It starts full.
func NewBudget(fraction float64, burst int) *Budget {
	b := &Budget{perCall: int64(math.Round(fraction * budgetScale)), cap: int64(max(1, burst)) * budgetScale}
	b.balance.Store(b.cap)
	return b
}

// Deposit credits one call.
func (b *Budget) Deposit() {
	if b == nil {
		return
	}
	for {
		v := b.balance.Load()
		n := min(b.cap, v+b.perCall)
		if n == v || b.balance.CompareAndSwap(v, n) {
			return
		}
	}
}

// Withdraw takes one hedge from the budget, reporting false (and taking
// nothing) when less than one is saved.
func (b *Budget) Withdraw() bool {
	if b == nil {
		return true
	}
	for {
		v := b.balance.Load()
		if v < budgetScale {
			return false
		}
		if b.balance.CompareAndSwap(v, v-budgetScale) {
			return true
		}
	}
}
