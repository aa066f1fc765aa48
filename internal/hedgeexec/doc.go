// Package hedgeexec runs hedging policies (package hedge) for a Channel:
// the Executor that sends a call's attempts overlapping, the Estimator
// that turns a method's recent latency into an adaptive hedging delay
// (hedge.Adaptive), and the Budget that caps hedges at a fraction of
// calls. They are the Channel's machinery, not a service's API: a service
// writes a hedge.Policy and reads a call's retry.StopReason.
//
// Attempts and their outcomes are package retryexec's, as is the
// retry-throttling bucket that every hedge beyond the first attempt needs.
// Like retryexec this package is pure: no TChannel, no network; time comes
// from an injected clock. Its configuration errors are *retry.FieldError
// values of package "hedge".
package hedgeexec

import "github.com/sluice-rpc/sluice/internal/config"

// fieldError is a configuration error of the hedging machinery; it names
// package hedge, whose policy the machinery runs.
func fieldError(field, value, rule string) *config.FieldError {
	return &config.FieldError{Package: "hedge", Field: field, Value: value, Rule: rule}
}
