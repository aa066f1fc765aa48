package thrift

import (
	"maps"
	"strconv"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/retry"
	tthrift "github.com/uber/tchannel-go/thrift"
)

// NewServer returns a tchannel-go Thrift server that registers its handlers
// on ch behind ch's server guard (request counting and load shedding), so
// requests beyond ch's shedding limits are answered Busy before any handler
// runs. Register generated handlers on it as on any tchannel-go Thrift
// server:
//
//	NewServer(ch).Register(keyvalue.NewTChanKeyValueServer(handler))
//
// Register handlers before ch starts listening. Handlers read request
// headers with ctx.Headers() and set response headers with
// ctx.SetResponseHeaders; a handler that returns channel.Busy(...) answers
// Busy, which the calling Sluice clients throttle and may retry elsewhere.
// Unlike on a plain tchannel-go channel, the Thrift meta service (health
// checks) is registered under ch's own service name only.
func NewServer(ch *channel.Channel) *tthrift.Server {
	return tthrift.NewServer(ch.Registrar())
}

// PreviousAttempts returns how many attempts of the call being handled were
// sent before this one: 0 for an original request, 1 for the first retry or
// hedge, and so on. It reads the previous-rpc-attempts request header and
// returns 0 when the header is absent or is not a non-negative number.
func PreviousAttempts(ctx tthrift.Context) int {
	v, ok := ctx.Headers()[channel.AttemptsHeader]
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// SetPushback adds a retry-pushback-ms header to the response of the call
// being handled, telling a retrying client to wait exactly p.Delay before its
// next attempt (retry.PushbackAfter) or not to retry at all
// (retry.PushbackStopped). The response headers set so far are kept; the map
// the handler set is not modified. retry.Pushback{} (PushbackNone) removes
// the header. Use it in handlers of ctx created by the Thrift server, whose
// response headers are settable.
//
// Headers travel only on answers that reach the caller (successes and
// declared exceptions), which Sluice never retries: the header informs
// clients that retry application errors themselves. To make Sluice clients
// wait, answer a TChannel error instead: channel.BusyAfter(d, ...) carries
// the same hint in its message.
func SetPushback(ctx tthrift.Context, p retry.Pushback) {
	h := maps.Clone(ctx.ResponseHeaders())
	v := retry.FormatPushback(p)
	if v == "" {
		if _, ok := h[retry.PushbackHeader]; !ok {
			return
		}
		delete(h, retry.PushbackHeader)
	} else {
		if h == nil {
			h = make(map[string]string, 1)
		}
		h[retry.PushbackHeader] = v
	}
	ctx.SetResponseHeaders(h)
}
