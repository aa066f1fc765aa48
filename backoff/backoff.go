package backoff

import (
	"math"
	"strconv"
	"time"

	"github.com/sluice-rpc/sluice/internal/config"
)

// Jitter selects how a delay is drawn from its exponential ceiling: below
// it (full, equal) or around it (proportional).
type Jitter uint8

const (
	// FullJitter draws uniformly from [0, ceiling): gRPC's retry backoff.
	// It is the zero value, so an Exponential uses it unless told
	// otherwise.
	FullJitter Jitter = iota
	// EqualJitter waits half the ceiling plus a uniform draw from
	// [0, ceiling/2): Aliyun's EqualJitter. It never retries sooner than
	// half the ceiling.
	EqualJitter
	// ProportionalJitter draws uniformly from
	// [ceiling*(1-Spread), ceiling*(1+Spread)): gRPC's connection backoff
	// (Spread 0.2). It spreads reconnects around the schedule rather than
	// below it.
	ProportionalJitter
)

// String returns "full", "equal" or "proportional".
func (j Jitter) String() string {
	switch j {
	case FullJitter:
		return "full"
	case EqualJitter:
		return "equal"
	case ProportionalJitter:
		return "proportional"
	}
	return "Jitter(" + strconv.Itoa(int(j)) + ")"
}

// Exponential is exponential backoff with jitter, usable by anything that
// waits between tries. Delay is a pure function of the retry number and a
// random draw, so callers inject their own random source.
//
// The ceiling of retry n (n >= 1) is min(Initial * Multiplier^(n-1), Max);
// the delay is drawn below it according to Jitter (around it for
// ProportionalJitter). The zero value waits 0.
type Exponential struct {
	// Initial is the first retry's ceiling.
	Initial time.Duration
	// Max bounds every ceiling.
	Max time.Duration
	// Multiplier scales the ceiling from one retry to the next.
	Multiplier float64
	// Jitter selects the distribution below the ceiling.
	Jitter Jitter
	// Spread is ProportionalJitter's relative spread, in [0, 1): the delay
	// is the ceiling times a uniform factor in [1-Spread, 1+Spread). Other
	// jitters ignore it.
	Spread float64
}

// Validate reports the first rule b breaks, as a *retry.FieldError naming
// "Exponential.<Field>", or nil. The zero value is valid: a configuration
// that holds an Exponential (peer.ConnectConfig.Backoff,
// leasing.ClientConfig.Backoff, ...) takes it to mean its own default
// backoff. Any other value needs 0 < Initial <= Max, a finite Multiplier
// >= 1, a known Jitter and Spread in [0, 1).
func (b Exponential) Validate() error {
	const pkg = "backoff"
	switch {
	case b == Exponential{}:
		return nil
	case b.Initial <= 0:
		return config.Errorf(pkg, "Exponential.Initial", b.Initial, "must be > 0 (or the whole Exponential zero, for the default)")
	case b.Max < b.Initial:
		return config.Errorf(pkg, "Exponential.Max", b.Max, "must be >= Initial (%v)", b.Initial)
	case !(b.Multiplier >= 1) || math.IsInf(b.Multiplier, 1):
		return config.Errorf(pkg, "Exponential.Multiplier", b.Multiplier, "must be a finite number >= 1")
	case b.Jitter > ProportionalJitter:
		return config.Errorf(pkg, "Exponential.Jitter", b.Jitter, "must be FullJitter, EqualJitter or ProportionalJitter")
	case !(b.Spread >= 0 && b.Spread < 1):
		return config.Errorf(pkg, "Exponential.Spread", b.Spread, "must be in [0, 1)")
	}
	return nil
}

// Ceiling returns min(Initial * Multiplier^(n-1), Max) for the nth retry;
// n < 1 is treated as 1. It never overflows: a product beyond Max is Max.
func (b Exponential) Ceiling(n int) time.Duration {
	if n < 1 {
		n = 1
	}
	c := float64(b.Initial) * math.Pow(b.Multiplier, float64(n-1))
	if !(c < float64(b.Max)) { // also catches NaN and +Inf
		return b.Max
	}
	if c < 0 {
		return 0
	}
	return time.Duration(c)
}

// Delay returns the wait before the nth retry given r, a uniform random
// number in [0, 1) (values outside are clamped into it). FullJitter returns
// r*ceiling, in [0, ceiling); EqualJitter returns ceiling/2 + r*ceiling/2,
// in [ceiling/2, ceiling); ProportionalJitter returns
// ceiling*(1 - Spread + 2*Spread*r), in [ceiling*(1-Spread),
// ceiling*(1+Spread)). A zero ceiling gives zero. Delay does not allocate.
func (b Exponential) Delay(n int, r float64) time.Duration {
	c := b.Ceiling(n)
	if !(r > 0) { // also catches NaN
		r = 0
	}
	cf := float64(c)
	if b.Jitter == ProportionalJitter {
		s := min(max(b.Spread, 0), 1) // also catches NaN
		f := cf * (1 - s + 2*s*min(r, 1))
		if !(f < math.MaxInt64) {
			return math.MaxInt64
		}
		return time.Duration(f)
	}
	f := r * cf
	if b.Jitter == EqualJitter {
		f = cf/2 + f/2
	}
	if !(f < cf) { // r >= 1, or rounding at the top of the range
		if c > 0 {
			return c - 1
		}
		return 0
	}
	d := time.Duration(f)
	if d >= c && c > 0 {
		d = c - 1
	}
	return d
}
