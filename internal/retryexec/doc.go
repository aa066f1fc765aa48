// Package retryexec runs retry policies (package retry) for a Channel: the
// sequential retry loop (Executor), the retry-throttling token bucket
// (Throttle), the bytes held for retries (Buffer) and the pushback hint of
// TChannel error messages. They are the Channel's machinery, not a
// service's API: a service writes a retry.Policy and a
// retry.ThrottleConfig, and reads a call's retry.StopReason.
//
// The package is pure: it knows nothing of TChannel or the network. Time
// comes from an injected clock and randomness from an injected source, so
// tests and simulators drive the very code production runs. Its
// configuration errors are *retry.FieldError values of package "retry".
//
// The pieces, one file each:
//
//   - Executor (executor.go): the sequential retry loop, including the one
//     transparent retry of an attempt a server declined before any handler
//     ran. Package hedgeexec's executor shares its Attempt and Outcome.
//   - Throttle (throttle.go): the token bucket of a retry.ThrottleConfig,
//     shared by all calls to one service. Retries and hedges are refused,
//     never delayed, while the tokens are at or below half of maxTokens,
//     or, for the lower criticality classes, a higher share, so that
//     they stop retrying first: 3/4 for sheddable calls, 5/8 for
//     sheddable_plus (Throttle.AllowFor).
//   - Buffer (buffer.go): the bytes held for possible retries; a call whose
//     request does not fit is sent once and never retried.
//   - ParsePushback, AppendPushback, PushbackFromMessage (pushback.go): the
//     pushback of the retry-pushback-ms header and of the hint at the end
//     of a TChannel error message.
package retryexec

import "github.com/sluice-rpc/sluice/internal/config"

// fieldError is a configuration error of the retry machinery; it names
// package retry, whose policy the machinery runs.
func fieldError(field, value, rule string) *config.FieldError {
	return &config.FieldError{Package: "retry", Field: field, Value: value, Rule: rule}
}
