package retry

import (
	"math"
	"time"
)

// Defaults of BudgetConfig: Linkerd's retry budget.
const (
	DefaultBudgetRatio        = 0.2
	DefaultBudgetMinPerSecond = 10
	DefaultBudgetWindow       = 10 * time.Second
)

// BudgetConfig is a channel.Client's retry budget
// (channel.RetryConfig.Budget): its retries and hedges stay within a ratio
// of its recent first attempts, besides the retry-throttling bucket
// (ThrottleConfig), so that a failing service never sees more than
// (1 + Ratio) times its callers' load, at any layer of a call graph. The
// zero BudgetConfig is the default, on.
//
// The rule, over the last Window: a retry or hedge is sent only if the
// Client's retries and hedges in the window, with it, are at most Ratio
// times its first attempts in the window, or at most MinPerSecond for
// each second of the window (the floor, for low traffic: whichever is
// more). A refused retry is not sent; the call returns its last failure
// (StopThrottled). Only calls whose policy may retry or hedge count. The
// one attempt of a call made for a request that is itself a retry (whose
// retries stop there, see channel.RetryConfig.Chained) is retry traffic:
// it needs the budget as a retry does, and a refusal fails the call at
// once with THROTTLED (which its handler's server passes up as Busy,
// don't retry). So a Client's downstream sees at most 1 + Ratio times the
// Client's first attempts (or the floor), whichever layers above retried.
// A first attempt declined before any handler ran is sent again without
// the budget.
type BudgetConfig struct {
	// Ratio is the most retries and hedges per first attempt. Default
	// (0) DefaultBudgetRatio, 0.2; it must be in [0, 10].
	Ratio float64
	// MinPerSecond is the floor: the retries and hedges per second of the
	// window allowed whatever the ratio. Default (0) DefaultBudgetMinPerSecond,
	// 10; it must be >= 0 and finite.
	MinPerSecond float64
	// Window is how far back first attempts and retries count. Default
	// (0) DefaultBudgetWindow, 10s; else it must be in [100ms, 10m].
	Window time.Duration
	// Disabled turns the budget off: retries and hedges are bounded by
	// their policies and the throttling bucket alone (Sluice before the
	// budget).
	Disabled bool
}

// Validate reports the first field that breaks its rule, as a
// *FieldError, or nil.
func (c BudgetConfig) Validate() error {
	switch {
	case !(c.Ratio >= 0 && c.Ratio <= 10):
		return fieldError("BudgetConfig.Ratio", fmtFloat(c.Ratio), "must be in [0, 10] (0 means 0.2)")
	case !(c.MinPerSecond >= 0) || math.IsInf(c.MinPerSecond, 1):
		return fieldError("BudgetConfig.MinPerSecond", fmtFloat(c.MinPerSecond), "must be a finite number >= 0 (0 means 10)")
	case c.Window != 0 && (c.Window < 100*time.Millisecond || c.Window > 10*time.Minute):
		return fieldError("BudgetConfig.Window", c.Window.String(), "must be 0 (10s) or in [100ms, 10m]")
	}
	return nil
}
