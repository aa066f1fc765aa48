// Package decline holds the one rule for Declined answers that no handler
// ran for, shared by package channel's servers and clients and package
// thrift's server: a Sluice server marks them, a Sluice client retries
// them once elsewhere, and a handler's own Declined error, which may be a
// downstream call's early decline, is reworded so that its caller does not
// take it for one.
package decline

import (
	"errors"
	"strings"

	"github.com/sluice-rpc/sluice/internal/retryexec"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/uber/tchannel-go"
)

// EarlyHint ends the message of a Declined answer that a Sluice server
// sends before any handler ran (it is closing). A Sluice client retries
// such a decline once, on another peer, without counting it as an
// attempt: no handler ran, so nothing runs twice. Any other Declined is an
// ordinary code for the retry or hedging policy. Other TChannel clients see
// it as part of the message.
const EarlyHint = "(declined before any handler ran)"

// closedChannelMessage is the message of tchannel-go's own Declined answer
// to a request arriving on a closing connection, which it sends before
// dispatching to any handler.
var closedChannelMessage = tchannel.ErrChannelClosed.(tchannel.SystemError).Message()

// Early reports whether the message of a Declined answer (its pushback
// hint removed) says that no handler ran: the decline was marked by a
// Sluice server, or is tchannel-go's decline of a closing connection.
func Early(msg string) bool {
	return strings.HasSuffix(msg, EarlyHint) || msg == closedChannelMessage
}

// HandlerError returns err as the answer of a handler that ran. A
// downstream call's failure for overload (an error with an Overloaded
// method that says so: package channel's *CallError, wrapped or not) is
// answered Busy with the pushback hint that tells Sluice clients not to
// retry, so that only the layer just above the overloaded one retries. A
// Declined
// error saying that no handler ran (a closing server's mark, or
// tchannel-go's "closed channel", typically the error of a call the
// handler made downstream) is reworded, so that the caller does not retry
// it transparently and run the handler twice. Any other error is returned
// as is.
func HandlerError(err error) error {
	var ov interface{ Overloaded() bool }
	if errors.As(err, &ov) && ov.Overloaded() {
		return tchannel.NewSystemError(tchannel.ErrCodeBusy, "%s",
			retryexec.AppendPushback("downstream overloaded, not retried here: "+err.Error(), retry.PushbackAfter(-1)))
	}
	var se tchannel.SystemError
	if !errors.As(err, &se) || se.Code() != tchannel.ErrCodeDeclined {
		return err
	}
	msg := se.Message()
	p, rest := retryexec.PushbackFromMessage(msg)
	if !Early(rest) {
		return err
	}
	rest = strings.TrimSpace(strings.TrimSuffix(rest, EarlyHint))
	return tchannel.NewSystemError(tchannel.ErrCodeDeclined, "%s",
		retryexec.AppendPushback("declined downstream, after this server's handler ran: "+rest, p))
}
