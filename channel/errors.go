package channel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/leasing"
	"github.com/sluice-rpc/sluice/peer"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/sluice-rpc/sluice/retry/pacing"
	"github.com/sluice-rpc/sluice/stats"
	"github.com/uber/tchannel-go"
)

// Local outcomes: a call that fails with one of these sent nothing.
var (
	// ErrThrottled: every peer's busy limiter refused the call.
	ErrThrottled = peer.ErrThrottled
	// ErrNoPeers: the service has no peers.
	ErrNoPeers = peer.ErrNoPeers
	// ErrRateLimited: the service's leased rate admits no call before the
	// deadline.
	ErrRateLimited = leasing.ErrRateLimited
	// ErrClosed: the Channel is closed.
	ErrClosed = errors.New("the channel is closed")
)

// CallError is the error of a call that did not get a response: a TChannel
// system error from the remote side or the transport, or a local outcome.
// Test for local outcomes with errors.Is(err, ErrThrottled) and read remote
// codes with errors.As.
type CallError struct {
	Service, Method string
	// Code is the TChannel code of the failure; codes.OK for a local
	// outcome (then Err says which).
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
	if e.Code == codes.OK {
		if e.Attempts > 0 {
			return fmt.Sprintf("sluice: call %s::%s failed after %d attempt(s): %v", e.Service, e.Method, e.Attempts, e.Err)
		}
		return fmt.Sprintf("sluice: call %s::%s: %v", e.Service, e.Method, e.Err)
	}
	s := fmt.Sprintf("sluice: call %s::%s failed after %d attempt(s), last on %s: %v: %s",
		e.Service, e.Method, e.Attempts, e.Peer, e.Code, e.Message)
	switch e.Stop {
	case retry.StopThrottled, retry.StopPushback, retry.StopExhausted, retry.StopContext, retry.StopUnbuffered, retry.StopCommitted:
		s += " (no more retries: " + e.Stop.String() + ")"
	}
	return s
}

// Unwrap returns the underlying error.
func (e *CallError) Unwrap() error { return e.Err }

// CodeName names the outcome: the TChannel code's name ("BUSY",
// "TIMEOUT", ...) for a call that reached a server, else THROTTLED,
// NO_PEERS, RATE_LIMITED or LOCAL for one that failed in this process. It
// is the code tag the call is counted under in call.errors.
func (e *CallError) CodeName() string {
	switch {
	case e.Code != codes.OK:
		return e.Code.String()
	case errors.Is(e.Err, ErrThrottled):
		return stats.CodeThrottled
	case errors.Is(e.Err, ErrNoPeers):
		return stats.CodeNoPeers
	case errors.Is(e.Err, ErrRateLimited), errors.Is(e.Err, pacing.ErrThrottled):
		return stats.CodeRateLimited
	}
	return stats.CodeLocal
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
	msg := retry.AppendPushback(fmt.Sprintf(format, args...), retry.PushbackAfter(d))
	return tchannel.NewSystemError(tchannel.ErrCodeBusy, "%s", msg)
}

// Declined returns the error a handler returns to decline a request it
// cannot take now (for example while it is draining).
func Declined(format string, args ...any) error {
	return tchannel.NewSystemError(tchannel.ErrCodeDeclined, format, args...)
}

// earlyDeclineHint ends the message of a Declined answer that a Sluice
// server sends before any handler ran (it is closing). A Sluice client
// retries such a decline once, on another peer, without counting it as an
// attempt: no handler ran, so nothing runs twice. Any other Declined is an
// ordinary code for the retry or hedging policy. Other TChannel clients see
// it as part of the message.
const earlyDeclineHint = "(declined before any handler ran)"

// errClosing is a closing Sluice server's answer to a request that reaches
// its guard: declined, marked as before any handler.
var errClosing = tchannel.NewSystemError(tchannel.ErrCodeDeclined, "the server is closing "+earlyDeclineHint)

// closedChannelMessage is the message of tchannel-go's own Declined answer
// to a request arriving on a closing connection, which it sends before
// dispatching to any handler.
var closedChannelMessage = tchannel.ErrChannelClosed.(tchannel.SystemError).Message()

// declinedEarly reports whether the message of a Declined answer (its
// pushback hint removed) says that no handler ran: the decline was marked by
// a Sluice server, or is tchannel-go's decline of a closing connection.
func declinedEarly(msg string) bool {
	return strings.HasSuffix(msg, earlyDeclineHint) || msg == closedChannelMessage
}

// classify returns the TChannel code of an attempt's error and the remote
// message. It reads the error's type, never its text.
func classify(err error) (codes.Code, string) {
	var se tchannel.SystemError
	if errors.As(err, &se) {
		return codes.Code(se.Code()), se.Message()
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
