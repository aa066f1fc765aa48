package retry

import "strconv"

// StopReason says why a call made no further attempt: a retried or hedged
// call's error (channel.CallError's Stop) carries it, and its String is
// how the error's message says it.
type StopReason uint8

const (
	// StopSucceeded: an attempt succeeded.
	StopSucceeded StopReason = iota + 1
	// StopNotRetryable: the failure's code is not retryable (or no policy),
	// or, for a hedged call, not non-fatal.
	StopNotRetryable
	// StopCommitted: the failure came after the response reached the
	// application.
	StopCommitted
	// StopExhausted: MaxAttempts (after the client-side cap) were made.
	StopExhausted
	// StopThrottled: the retry-throttling bucket (or a hedging budget)
	// refused the next attempt, or no peer could take it.
	StopThrottled
	// StopPushback: the server's pushback said not to retry.
	StopPushback
	// StopContext: the context ended while waiting to retry.
	StopContext
	// StopUnbuffered: the request did not fit in the retry buffer
	// (channel.RetryConfig.BufferTotal and BufferPerCall), so the call
	// was sent once.
	StopUnbuffered
	// StopDeadline: the time left before the call's deadline was shorter
	// than the method's expected latency (a low quantile of what its
	// attempts have taken), so the next attempt, which could not finish in
	// time, was not sent. The call's error is the last attempt's.
	StopDeadline
	// StopChained: the call was made for an inbound request that is
	// itself a retry or hedge, so it made one attempt (see
	// channel.RetryConfig.Chained).
	StopChained
)

// String returns a lower-case description ("attempts exhausted").
func (r StopReason) String() string {
	switch r {
	case StopSucceeded:
		return "succeeded"
	case StopNotRetryable:
		return "not retryable"
	case StopCommitted:
		return "committed"
	case StopExhausted:
		return "attempts exhausted"
	case StopThrottled:
		return "throttled"
	case StopPushback:
		return "pushback"
	case StopContext:
		return "context done"
	case StopUnbuffered:
		return "not buffered"
	case StopDeadline:
		return "deadline too short"
	case StopChained:
		return "serving a retry"
	}
	return "StopReason(" + strconv.Itoa(int(r)) + ")"
}
