package hedge

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Adaptive configures a hedging delay that follows the method's recent
// latency, and a budget on the extra attempts hedging may add. It goes
// beyond gRPC's retry design, whose hedgingDelay is fixed: a fixed delay tuned
// to today's p95 sends too many hedges when the service slows down and too
// few when it speeds up.
type Adaptive struct {
	// Quantile of recent first-attempt latencies used as the delay, in
	// (0, 1); 0.95 hedges the slowest 5% of calls.
	Quantile float64
	// Window is how many recent latencies the quantile is taken over;
	// 10 to MaxWindow. Until Window/10 latencies are seen the policy's
	// HedgingDelay (or Cap, if that is 0) applies.
	Window int
	// Floor and Cap bound the delay: Floor > 0, Cap >= Floor.
	Floor, Cap time.Duration
	// Budget caps hedging at this many extra attempts per call on average
	// (0.1: at most 10% more requests); 0 means no budget. At most 1.
	Budget float64
}

// MaxWindow bounds Adaptive.Window: the Estimator keeps (and sorts) that
// many latencies.
const MaxWindow = 1_000_000

// Validate reports the first rule a breaks.
func (a Adaptive) Validate() error {
	switch {
	case !(a.Quantile > 0 && a.Quantile < 1):
		return fieldError("quantile", strconv.FormatFloat(a.Quantile, 'g', -1, 64), "must be in (0, 1)")
	case a.Window < 10 || a.Window > MaxWindow:
		return fieldError("window", strconv.Itoa(a.Window), "must be in [10, "+strconv.Itoa(MaxWindow)+"]")
	case a.Floor <= 0:
		return fieldError("floor", a.Floor.String(), "must be > 0")
	case a.Cap < a.Floor:
		return fieldError("cap", a.Cap.String(), fmt.Sprintf("must be >= floor (%v)", a.Floor))
	case !(a.Budget >= 0 && a.Budget <= 1):
		return fieldError("budget", strconv.FormatFloat(a.Budget, 'g', -1, 64), "must be in [0, 1]")
	}
	return nil
}

// Estimator keeps a method's recent first-attempt latencies and turns them
// into a hedging delay. Observe and Delay are safe for concurrent use; the
// quantile is recomputed once per Window/10 observations, so Delay is one
// atomic load.
type Estimator struct {
	cfg      Adaptive
	fallback time.Duration
	delay    atomic.Int64 // nanoseconds; 0 until enough samples

	mu      sync.Mutex
	ring    []time.Duration
	next    int // ring position of the next sample
	seen    int // samples ever observed
	pending int // samples since the last recomputation
	scratch []time.Duration
}

// NewEstimator returns an Estimator for cfg; fallback is the delay used
// until enough latencies are seen (clamped to [Floor, Cap]; 0 means Cap, so
// that a cold start hedges as little as the configuration allows).
func NewEstimator(cfg Adaptive, fallback time.Duration) (*Estimator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if fallback <= 0 {
		fallback = cfg.Cap
	}
	return &Estimator{cfg: cfg, fallback: clamp(fallback, cfg.Floor, cfg.Cap), ring: make([]time.Duration, cfg.Window),
		scratch: make([]time.Duration, 0, cfg.Window)}, nil
}

// Observe records one first-attempt latency. A first attempt cancelled
// because a hedge won, or cut off by the deadline, should be observed too,
// with its time so far: it is a lower bound of its latency, and leaving it
// out would let hedging shrink its own delay just as the service slows.
func (e *Estimator) Observe(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ring[e.next] = d
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
	i := int(math.Ceil(e.cfg.Quantile*float64(n))) - 1
	e.delay.Store(int64(clamp(e.scratch[max(0, i)], e.cfg.Floor, e.cfg.Cap)))
}

// Delay returns the hedging delay now.
func (e *Estimator) Delay() time.Duration {
	if d := e.delay.Load(); d > 0 {
		return time.Duration(d)
	}
	return e.fallback
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
