package retry

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/sluice-rpc/sluice/backoff"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/config"
)

// MaxAttemptsCap is the default client-side maximum for maxAttempts. A policy
// asking for more attempts gets this many, as gRPC's retry design (gRFC A6,
// "Limits on Retries and Hedges") prescribes;
// channel.RetryConfig.MaxAttemptsCap changes it.
const MaxAttemptsCap = 5

// Policy is a retry policy: how many attempts a call may make and how long
// to wait between them. It is a plain value; Validate reports whether it is
// usable. The zero value is not (MaxAttempts must be at least 2).
type Policy struct {
	// MaxAttempts is the most attempts a call makes, the original included.
	// It must be >= 2. Values above the client-side cap (MaxAttemptsCap
	// unless configured otherwise) are treated as the cap.
	MaxAttempts int
	// InitialBackoff is the ceiling of the first retry's delay. It must be > 0.
	InitialBackoff time.Duration
	// MaxBackoff bounds every delay's ceiling. It must be > 0.
	MaxBackoff time.Duration
	// BackoffMultiplier scales the ceiling after each retry. It must be a
	// finite number > 0.
	BackoffMultiplier float64
	// RetryableCodes are the codes whose failures are retried (and counted
	// as failures by the retry-throttling bucket, ThrottleConfig). It must be non-empty and hold only
	// TChannel error codes (not OK).
	RetryableCodes codes.Set
	// Jitter selects the delay distribution; backoff.FullJitter (gRPC) by
	// default. backoff.ProportionalJitter is for reconnects, not retries.
	Jitter backoff.Jitter
}

// FieldError is the error every configuration check of the library
// returns (busy, shed, peer, leasing, channel and the rest, not only retry):
// it names the package, the Go field from its configuration type
// ("Policy.MaxAttempts"), the value that broke the rule, and the rule.
// Read it with errors.As; serviceconfig re-presents it under the JSON path.
type FieldError = config.FieldError

func fieldError(field, value, rule string) *FieldError {
	return &FieldError{Package: "retry", Field: field, Value: value, Rule: rule}
}

// validCodes reports whether s is non-empty and holds only TChannel error
// codes (not OK): the rule Policy.Validate applies to RetryableCodes.
func validCodes(s codes.Set) bool { return s != 0 && s&^codes.Errors == 0 }

// Validate reports the first rule p breaks, as a *FieldError, or nil.
func (p Policy) Validate() error {
	switch {
	case p.MaxAttempts < 2:
		return fieldError("Policy.MaxAttempts", strconv.Itoa(p.MaxAttempts), "must be >= 2")
	case p.InitialBackoff <= 0:
		return fieldError("Policy.InitialBackoff", p.InitialBackoff.String(), "must be > 0")
	case p.MaxBackoff <= 0:
		return fieldError("Policy.MaxBackoff", p.MaxBackoff.String(), "must be > 0")
	case !(p.BackoffMultiplier > 0) || math.IsInf(p.BackoffMultiplier, 1):
		return fieldError("Policy.BackoffMultiplier", strconv.FormatFloat(p.BackoffMultiplier, 'g', -1, 64), "must be a finite number > 0")
	case p.RetryableCodes == 0:
		return fieldError("Policy.RetryableCodes", "empty", "must name at least one code")
	case !validCodes(p.RetryableCodes):
		return fieldError("Policy.RetryableCodes", fmt.Sprintf("%#04x", uint16(p.RetryableCodes)), "must hold only TChannel error codes")
	case p.Jitter > backoff.EqualJitter:
		return fieldError("Policy.Jitter", p.Jitter.String(), "must be FullJitter or EqualJitter")
	}
	return nil
}

// Attempts returns the number of attempts p allows under the client-side
// cap limit: min(p.MaxAttempts, limit), a limit <= 0 meaning
// MaxAttemptsCap. Retry and hedging policies are capped alike
// (hedge.Policy.Attempts calls this one).
func (p Policy) Attempts(limit int) int {
	if limit <= 0 {
		limit = MaxAttemptsCap
	}
	return min(p.MaxAttempts, limit)
}

// Backoff returns p's backoff parameters as the library's one backoff type:
// the nth retry waits Backoff().Delay(n, r) unless a pushback says otherwise.
func (p Policy) Backoff() backoff.Exponential {
	return backoff.Exponential{Initial: p.InitialBackoff, Max: p.MaxBackoff, Multiplier: p.BackoffMultiplier, Jitter: p.Jitter}
}
