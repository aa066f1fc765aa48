package hedge

import (
	"fmt"
	"strconv"
	"time"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/config"
	"github.com/sluice-rpc/sluice/retry"
)

// Policy is a hedging policy. It is a plain value; Validate reports whether
// it is usable. The zero value is not (MaxAttempts must be at least 2).
type Policy struct {
	// MaxAttempts is the most attempts a call sends, the original
	// included. It must be >= 2; values above the client-side cap are
	// treated as the cap.
	MaxAttempts int
	// HedgingDelay is the wait between sending one attempt and the next
	// while none has succeeded. 0 sends all MaxAttempts at once. It must be
	// >= 0.
	HedgingDelay time.Duration
	// NonFatalCodes are the codes after which the other attempts may still
	// succeed: such a failure sends the next hedge at once, and counts as a
	// failure in the retry throttle. Any other failure ends the call. It
	// must be non-empty and hold only TChannel error codes (not OK).
	NonFatalCodes codes.Set
	// Adaptive, if set, makes the delay follow the method's recent latency
	// (HedgingDelay then only applies until enough latencies are seen) and
	// can cap the extra attempts. Sluice's extension; nil means a fixed
	// delay, as in gRPC's retry design.
	Adaptive *Adaptive
}

// fieldError is the error Validate returns (the one configuration error
// type of the library, retry.FieldError), naming the Go field, the value
// that broke the rule, and the rule.
func fieldError(field, value, rule string) *retry.FieldError {
	return &retry.FieldError{Package: "hedge", Field: field, Value: value, Rule: rule}
}

// Validate reports the first rule p breaks, as a *retry.FieldError, or nil.
func (p Policy) Validate() error {
	switch {
	case p.MaxAttempts < 2:
		return fieldError("Policy.MaxAttempts", strconv.Itoa(p.MaxAttempts), "must be >= 2")
	case p.HedgingDelay < 0:
		return fieldError("Policy.HedgingDelay", p.HedgingDelay.String(), "must be >= 0")
	case p.NonFatalCodes == 0:
		return fieldError("Policy.NonFatalCodes", "empty", "must name at least one code")
	case p.NonFatalCodes&^codes.Errors != 0: // retry.Policy's rule for RetryableCodes
		return fieldError("Policy.NonFatalCodes", fmt.Sprintf("%#04x", uint16(p.NonFatalCodes)), "must hold only TChannel error codes")
	}
	if p.Adaptive != nil {
		if err := p.Adaptive.Validate(); err != nil {
			return config.Nest(err, "hedge", "Policy.Adaptive")
		}
	}
	return nil
}

// Attempts returns the number of attempts p allows under the client-side
// cap limit: min(p.MaxAttempts, limit). A limit <= 0 means MaxAttemptsCap.
// Retry and hedging policies are capped alike: this is retry.Policy's rule.
func (p Policy) Attempts(limit int) int {
	return retry.Policy{MaxAttempts: p.MaxAttempts}.Attempts(limit)
}
