package retryexec

import (
	"math"
	"sync/atomic"

	"github.com/sluice-rpc/sluice/criticality"
	"github.com/sluice-rpc/sluice/retry"
)

// milli is the fixed-point scale of the Throttle: one token is 1000 units,
// which carries the three decimal places the gRPC design allows exactly
// (retry.ThrottleConfig.Validate refuses more).
const milli = 1000

// Throttle is the retry-throttling token bucket of one service, as in
// gRPC's retry design, gRFC A6 ("Throttling Retry Attempts and Hedged
// RPCs"), configured by a retry.ThrottleConfig (whose doc states the
// rules).
//
// The bucket starts full at MaxTokens and always holds between 0 and
// MaxTokens. Every counted failure (a retryable or non-fatal code, or a
// pushback saying not to retry) takes one token; every success adds
// TokenRatio. Retries and hedges beyond the first attempt are allowed only
// while the bucket holds more than MaxTokens/2; a refused retry is not
// delayed, the caller returns its failure at once. The first attempt of a
// call is never throttled.
//
// Calls of the lower criticality classes stop retrying first (AllowFor):
// a sheddable call's retries need more than 3/4 of MaxTokens, a
// sheddable_plus call's more than 5/8, a critical or critical_plus call's
// more than 1/2, gRPC's threshold, so that the default class behaves as
// gRPC says. As failures drain the bucket, the sheddable retries stop
// after a quarter of it is gone, the sheddable_plus ones an eighth later:
// the lower classes' retries cannot spend the band between 3/4 (or 5/8)
// and 1/2, which stays the reserve of the critical classes' retries. The
// steps are eighths so that the check stays one multiplication.
//
// Tokens are kept as integers in thousandths, so a long run of successes
// and failures never drifts. All methods are safe for concurrent use,
// lock-free and allocation-free. A nil *Throttle allows everything and
// records nothing, which is how "no throttling configured" is spelled.
type Throttle struct {
	tokens atomic.Int64 // thousandths of a token, in [0, max]
	max    int64        // thousandths
	ratio  int64        // thousandths, at most max
}

// NewThrottle returns a full bucket configured by c, or c's validation error.
func NewThrottle(c retry.ThrottleConfig) (*Throttle, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	t := &Throttle{max: int64(math.Round(c.MaxTokens * milli))}
	// A success never adds more than a full bucket, so a ratio above
	// MaxTokens behaves exactly like MaxTokens; storing the smaller keeps
	// the integer arithmetic from overflowing.
	if r := math.Round(c.TokenRatio * milli); r < float64(t.max) {
		t.ratio = int64(r)
	} else {
		t.ratio = t.max
	}
	t.tokens.Store(t.max)
	return t, nil
}

// Allow reports whether a retry or hedge may be sent now: whether the
// bucket holds more than MaxTokens/2. It does not take a token. It is
// AllowFor(criticality.Critical).
func (t *Throttle) Allow() bool {
	if t == nil {
		return true
	}
	return 2*t.tokens.Load() > t.max
}

// AllowFor reports whether a retry or hedge of a call of class c may be
// sent now: whether the bucket holds more than c's share of MaxTokens
// (see Throttle; a class that is not valid counts as Critical). It does
// not take a token.
func (t *Throttle) AllowFor(c criticality.Class) bool {
	if t == nil {
		return true
	}
	return eighths*t.tokens.Load() > reserveEighths(c)*t.max
}

// eighths is the scale of reserveEighths.
const eighths = 8

// reserveEighths returns the eighths of MaxTokens a call of class c
// leaves in the bucket: its retries are allowed only above them.
func reserveEighths(c criticality.Class) int64 {
	switch c {
	case criticality.Sheddable:
		return 6
	case criticality.SheddablePlus:
		return 5
	}
	return 4 // gRPC's half, for Critical, CriticalPlus and unset
}

// RecordFailure takes one token (not below zero) for a counted failure.
func (t *Throttle) RecordFailure() {
	if t == nil {
		return
	}
	for {
		old := t.tokens.Load()
		n := max(old-milli, 0)
		if n == old || t.tokens.CompareAndSwap(old, n) {
			return
		}
	}
}

// RecordSuccess adds TokenRatio (not above MaxTokens) for a success.
func (t *Throttle) RecordSuccess() {
	if t == nil {
		return
	}
	for {
		old := t.tokens.Load()
		n := min(old+t.ratio, t.max)
		if n == old || t.tokens.CompareAndSwap(old, n) {
			return
		}
	}
}

// Tokens returns the tokens in the bucket now, for stats. A nil Throttle
// reports 0.
func (t *Throttle) Tokens() float64 {
	if t == nil {
		return 0
	}
	return float64(t.tokens.Load()) / milli
}

// MaxTokens returns the bucket's size. A nil Throttle reports 0.
func (t *Throttle) MaxTokens() float64 {
	if t == nil {
		return 0
	}
	return float64(t.max) / milli
}
