package retry

import (
	"math"
	"strconv"
)

// milli is the scale of the bucket's fixed-point tokens: one token is 1000
// units, which carries the three decimal places the gRPC design allows
// exactly.
const milli = 1000

// ThrottleConfig is gRPC's retryThrottling (gRFC A6, "Throttling Retry
// Attempts and Hedged RPCs"): the token bucket that each channel.Client
// keeps when the Channel's service config has one.
//
// The bucket starts full at MaxTokens and always holds between 0 and
// MaxTokens. Every counted failure (a retryable or non-fatal code, or a
// pushback saying not to retry) takes one token; every success adds
// TokenRatio. Retries and hedges beyond the first attempt are allowed only
// while the bucket holds more than MaxTokens/2; a refused retry is not
// delayed, the call returns its failure at once (StopThrottled). The first
// attempt of a call is never throttled. Tokens are counted in thousandths,
// so a long run of successes and failures never drifts.
//
// Calls of the lower criticality classes (package criticality) stop
// retrying and hedging first, leaving the rest of the bucket to the
// higher classes: a sheddable call's retries need more than 3/4 of
// MaxTokens, a sheddable_plus call's more than 5/8; critical and
// critical_plus calls keep gRPC's 1/2. A sheddable call never hedges.
type ThrottleConfig struct {
	// MaxTokens is the bucket's size and its initial fill. It must be in
	// (0, 1000] with at most three decimal places.
	MaxTokens float64
	// TokenRatio is what each success adds. It must be > 0 with at most
	// three decimal places (0.1 is typical).
	TokenRatio float64
}

// Validate reports the first rule c breaks, as a *FieldError, or nil.
func (c ThrottleConfig) Validate() error {
	switch {
	case !(c.MaxTokens > 0 && c.MaxTokens <= 1000):
		return fieldError("ThrottleConfig.MaxTokens", fmtFloat(c.MaxTokens), "must be in (0, 1000]")
	case !thousandths(c.MaxTokens):
		return fieldError("ThrottleConfig.MaxTokens", fmtFloat(c.MaxTokens), "must have at most 3 decimal places")
	case !(c.TokenRatio > 0) || math.IsInf(c.TokenRatio, 1):
		return fieldError("ThrottleConfig.TokenRatio", fmtFloat(c.TokenRatio), "must be a finite number > 0")
	case !thousandths(c.TokenRatio):
		return fieldError("ThrottleConfig.TokenRatio", fmtFloat(c.TokenRatio), "must have at most 3 decimal places")
	}
	return nil
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// thousandths reports whether x (finite, > 0) is a whole number of
// thousandths, allowing for the rounding of x*1000 in binary floating point.
func thousandths(x float64) bool {
	m := x * milli
	if m >= 1<<52 { // every float this large is a whole number
		return true
	}
	r := math.Round(m)
	return math.Abs(m-r) <= 1e-6+4*(math.Nextafter(m, math.Inf(1))-m)
}
