package pacing

import (
	"errors"
	"time"
)

// ErrRateLimited is the sentinel every *WindowError matches with errors.Is: a
// call was not sent, or not retried, because the server's throttling window
// runs longer than the call may wait.
var ErrRateLimited = errors.New("pacing: rate limited: the server's throttling window outlasts the call's wait")

// WindowError reports a call refused locally because the server's
// throttling window for Key still runs for Remaining, longer than the call
// could wait (Limit: its maximum delay, or what was left of its deadline).
type WindowError struct {
	// Key is the throttled dimension's key ("service" or "service::method").
	Key string
	// Remaining is how long the window still runs.
	Remaining time.Duration
	// Limit is the longest the call could have waited.
	Limit time.Duration
	// Deadline is true when Limit came from the context's deadline, false
	// when it is the maximum delay.
	Deadline bool
}

// Error says what was throttled, for how long, and what to do.
func (e *WindowError) Error() string {
	bound := "the maximum delay"
	if e.Deadline {
		bound = "the time left before the deadline"
	}
	return "pacing: " + e.Key + " is throttled by the server for another " + e.Remaining.String() +
		", longer than " + bound + " (" + e.Limit.String() + "); retry after the window ends"
}

// Is makes errors.Is(err, ErrRateLimited) true.
func (e *WindowError) Is(target error) bool { return target == ErrRateLimited }
