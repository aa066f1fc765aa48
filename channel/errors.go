package channel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/sluice-rpc/sluice/internal/decline"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/retryexec"
	"github.com/sluice-rpc/sluice/pacing"
	"github.com/sluice-rpc/sluice/peer"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/sluice-rpc/sluice/stats"
	"github.com/uber/tchannel-go"
)

// Local outcomes: a call that fails with one of these sent nothing.
var (
	// ErrThrottled: every peer's busy limiter refused the call.
	ErrThrottled = peer.ErrThrottled
	// ErrNoPeers: the service has no peers.
	ErrNoPeers = peer.ErrNoPeers
	// ErrUnavailable: every peer is in transient failure (its connection
	// was refused, reset, timed out or found dead) and waits out its
	// connection backoff. Calls fail with it at once unless they wait for
	// a ready peer (WaitForReady, or waitForReady in the service config).
	// Such a call's error also says, and wraps, the cause of the latest
	// connection failure among the service's peers: a
	// refused dial (errors.Is(err, syscall.ECONNREFUSED)), a TChannel
	// handshake that failed or timed out (said in the text only).
	ErrUnavailable = peer.ErrUnavailable
	// ErrRateLimited: the service's Gate (WithLease) refused the call, or
	// its rate-limit pacing admits none before the deadline. Every call
	// error with code RATE_LIMITED matches it with errors.Is, and unwraps
	// to the Gate's or the pacer's own error.
	ErrRateLimited = errors.New("rate limited")
	// ErrClosed: the Channel is closed.
	ErrClosed = errors.New("the channel is closed")
)

// CallError is the error of a call that did not get a response: a TChannel
// system error from the remote side or the transport, or a local outcome.
// Test for local outcomes with errors.Is(err, ErrThrottled) and read remote
// codes with errors.As.
type CallError struct {
	Service, Method string
	// Code is the failure's code, never OK: the TChannel code a server or
	// the transport reported; BAD_REQUEST also for a request that cannot be
	// sent (see Call); or, for a call that failed in this process and sent
	// nothing, a local code: THROTTLED (ErrThrottled), NO_PEERS
	// (ErrNoPeers), UNAVAILABLE (ErrUnavailable), RATE_LIMITED
	// (ErrRateLimited) or CLOSED (ErrClosed). codes.Code.IsLocal tells the
	// two kinds apart.
	Code codes.Code
	// Message is the remote error's message, without TChannel's prefix.
	Message string
	// Attempts is the number of attempts sent on the wire.
	Attempts int
	// Peer is the host:port of the last attempt's peer ("" if none);
	// Peers every peer an attempt was made to, in order.
	Peer  string
	Peers []string
	// Stop says why no further attempt was made (zero when the call had no
	// retry policy to consult).
	Stop retry.StopReason
	// Err is the underlying error.
	Err error
}

func (e *CallError) Error() string {
	if e.Peer == "" { // failed in this process, before any server answered
		s := "sluice: call " + e.Service + "::" + e.Method
		if e.Attempts > 0 {
			s += fmt.Sprintf(" failed after %d attempt(s)", e.Attempts)
		}
		if e.Code != codes.OK {
			s += ": " + e.Code.String()
		}
		if e.Err != nil {
			s += ": " + e.Err.Error()
		} else if e.Message != "" {
			s += ": " + e.Message
		}
		return s
	}
	s := fmt.Sprintf("sluice: call %s::%s failed after %d attempt(s), last on %s: %v: %s",
		e.Service, e.Method, e.Attempts, e.Peer, e.Code, e.Message)
	switch e.Stop {
	case retry.StopThrottled, retry.StopPushback, retry.StopExhausted, retry.StopContext, retry.StopUnbuffered, retry.StopCommitted,
		retry.StopDeadline, retry.StopChained:
		s += " (no more retries: " + e.Stop.String() + ")"
	}
	return s
}

// Unwrap returns the underlying error.
func (e *CallError) Unwrap() error { return e.Err }

// Is reports whether target is ErrRateLimited and e's code RATE_LIMITED: a
// Gate's or a pacer's refusal matches ErrRateLimited whatever its own error.
func (e *CallError) Is(target error) bool {
	return target == ErrRateLimited && e.Code == codes.RateLimited
}

// CodeName names the outcome: the code's name ("BUSY", "TIMEOUT",
// "UNAVAILABLE", ...), or LOCAL for a local failure no code names. It is
// the code tag the call is counted under in call.errors.
func (e *CallError) CodeName() string {
	if e.Code != codes.OK {
		return e.Code.String()
	}
	return stats.CodeLocal
}

// localCode returns the local code of a failure in this process.
func localCode(err error) codes.Code {
	switch {
	case errors.Is(err, ErrThrottled):
		return codes.Throttled
	case errors.Is(err, ErrNoPeers):
		return codes.NoPeers
	case errors.Is(err, ErrUnavailable):
		return codes.Unavailable
	case errors.Is(err, ErrRateLimited), errors.Is(err, pacing.ErrRateLimited):
		return codes.RateLimited
	case errors.Is(err, ErrClosed):
		return codes.Closed
	}
	return codes.OK
}

// gateError is the error of a call its Gate did not admit: the caller's
// context ended while waiting (classified as such), or the Gate refused
// (RATE_LIMITED, wrapping ErrRateLimited and the Gate's error).
func gateError(service, method string, ctx context.Context, err error) *CallError {
	ce := &CallError{Service: service, Method: method, Code: codes.RateLimited, Err: err}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		ce.Code, ce.Message = classify(err)
	}
	return ce
}

// ApplicationError is an application-level error a JSON handler returned.
// The transport succeeded: such calls are never retried and never count as
// failures for throttling.
type ApplicationError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

func (e *ApplicationError) Error() string {
	return fmt.Sprintf("application error (%s): %s", e.Type, e.Message)
}

// Busy returns the error a handler returns to answer Busy: the server is
// overloaded and the caller should throttle.
func Busy(format string, args ...any) error {
	return tchannel.NewSystemError(tchannel.ErrCodeBusy, format, args...)
}

// BusyAfter returns the error a handler returns to answer Busy with a
// pushback hint: Sluice clients wait exactly d before retrying (a negative d
// tells them not to retry). Other TChannel clients see it as part of the
// message and ignore it.
func BusyAfter(d time.Duration, format string, args ...any) error {
	msg := retryexec.AppendPushback(fmt.Sprintf(format, args...), retry.PushbackAfter(d))
	return tchannel.NewSystemError(tchannel.ErrCodeBusy, "%s", msg)
}

// Declined returns the error a handler returns to decline a request it
// cannot take now (for example while it is draining).
func Declined(format string, args ...any) error {
	return tchannel.NewSystemError(tchannel.ErrCodeDeclined, format, args...)
}

// errClosing is a closing Sluice server's answer to a request that reaches
// its guard: declined, marked as before any handler.
var errClosing = tchannel.NewSystemError(tchannel.ErrCodeDeclined, "the server is closing "+decline.EarlyHint)

// classify returns the TChannel code of an attempt's error and the remote
// message. It reads the error's type, never its text.
func classify(err error) (codes.Code, string) {
	var se tchannel.SystemError
	if errors.As(err, &se) {
		c := codes.Code(se.Code())
		if c.IsLocal() { // not a TChannel code: no server can claim a local outcome
			c = codes.Unexpected
		}
		return c, se.Message()
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return codes.Timeout, err.Error()
	case errors.Is(err, context.Canceled):
		return codes.Cancelled, err.Error()
	}
	var ne net.Error
	if errors.As(err, &ne) {
		if ne.Timeout() {
			return codes.Timeout, err.Error()
		}
		return codes.Network, err.Error()
	}
	return codes.Unexpected, err.Error()
}

// errResponseTooLarge is an attempt's error when the response's arguments
// pass WithMaxResponseSize.
var errResponseTooLarge = errors.New("the response's arguments are larger than the Channel's limit (WithMaxResponseSize)")
