package hedge

import (
	"fmt"
	"strconv"
	"time"
)

// Adaptive configures a hedging delay that follows the method's recent
// latency, and a budget on the extra attempts hedging may add. It goes
// beyond gRPC's retry design, whose hedgingDelay is fixed: a fixed delay tuned
// to today's p95 sends too many hedges when the service slows down and too
// few when it speeds up.
type Adaptive struct {
	// Quantile of the recent first attempts' latency used as the delay, in
	// (0, 1); 0.95 hedges the slowest 5% of calls. First attempts cut off
	// before they finished (their hedge won, or the deadline came) count
	// as lasting at least until then: the quantile is that of the
	// Kaplan-Meier (product-limit) estimate over the window, which reads
	// such cut-offs as right-censored latencies. Hedges' own latencies are
	// not observed: they sample the calls that were already slow.
	Quantile float64
	// Window is how many recent first attempts the quantile is taken over;
	// 10 to MaxWindow. Until Window/10 are seen the policy's HedgingDelay
	// (or Cap, if that is 0) applies.
	Window int
	// Floor and Cap bound the delay: Floor > 0, Cap >= Floor.
	Floor, Cap time.Duration
	// Budget caps hedging at this many extra attempts per call on average
	// (0.1: at most 10% more requests); 0 means no budget. At most 1. A
	// budget starts with 10 hedges saved up, and a quiet spell saves up at
	// most 10: after it, that many may go out before the budget holds
	// hedging to its fraction of calls.
	Budget float64
}

// MaxWindow bounds Adaptive.Window: a Channel keeps (and sorts) that many
// latencies per method.
const MaxWindow = 1_000_000

// Validate reports the first rule a breaks.
func (a Adaptive) Validate() error {
	switch {
	case !(a.Quantile > 0 && a.Quantile < 1):
		return fieldError("Adaptive.Quantile", strconv.FormatFloat(a.Quantile, 'g', -1, 64), "must be in (0, 1)")
	case a.Window < 10 || a.Window > MaxWindow:
		return fieldError("Adaptive.Window", strconv.Itoa(a.Window), "must be in [10, "+strconv.Itoa(MaxWindow)+"]")
	case a.Floor <= 0:
		return fieldError("Adaptive.Floor", a.Floor.String(), "must be > 0")
	case a.Cap < a.Floor:
		return fieldError("Adaptive.Cap", a.Cap.String(), fmt.Sprintf("must be >= Floor (%v)", a.Floor))
	case !(a.Budget >= 0 && a.Budget <= 1):
		return fieldError("Adaptive.Budget", strconv.FormatFloat(a.Budget, 'g', -1, 64), "must be in [0, 1]")
	}
	return nil
}
