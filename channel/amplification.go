package channel

import (
	"errors"
	"fmt"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/uber/tchannel-go"
)

// Amplification across a call graph: retries at every layer multiply a
// failing service's load (three layers of three attempts, 27 times). A
// Channel bounds it three ways, each on by default:
//
//   - A call made for an inbound request that is itself a retry or hedge
//     does not retry or hedge again (Kitex's ChainStop): it makes one
//     attempt (a first attempt declined before any handler ran is still
//     sent again once), marked for its server as serving a retry, so
//     that no layer below retries either. A Sluice client marks its
//     retries and hedges in the call's routing delegate, on connections
//     to Sluice servers only (see markClass); calls from other clients
//     are first attempts. RetryConfig.Chained turns this off.
//   - "Overloaded, don't retry" passes upward: a handler that returns the
//     *CallError of a downstream call that failed for overload (see
//     CallError.Overloaded) is answered Busy with the pushback hint that
//     tells Sluice clients not to retry: the layer just above the
//     overloaded one retries, and no other.
//   - Each Client's retries and hedges stay within a ratio of its recent
//     first attempts (RetryConfig.Budget), besides the service config's
//     retry-throttling bucket.

// errRetryBudget is the local outcome of a retry or hedge the Client's
// retry budget refused; the call returns its last failure.
var errRetryBudget = fmt.Errorf("%w: the Client's retry budget refused a retry (RetryConfig.Budget)", ErrThrottled)

// Overloaded reports whether the call failed because its service is
// overloaded and this client gave up on it: it answered Busy (a shed, or
// a Busy the call's policy did not retry, or retried until its attempts,
// its budget or the answer's pushback stopped it), or every peer's busy
// limiter refused it (THROTTLED). A Sluice server answers a handler that
// returns such an error Busy, telling its own callers not to retry. The
// retry budget's refusal of a call serving a retry is not overload (the
// service failed, it did not refuse): its Busy would close the busy
// limiters above, for every call, long after the service is well again.
func (e *CallError) Overloaded() bool {
	return e.Code == codes.Busy || (e.Code == codes.Throttled && !errors.Is(e.Err, errRetryBudget))
}

// options returns the tchannel-go call options of an attempt of spec a
// in st: a's own when it has them (a retry's, marked), else the call's.
func (a *attemptSpec) options(st *callState) *tchannel.CallOptions {
	t := a.tch
	switch {
	case t == nil:
		return st.tchannelOptions(a.req.Format)
	case t.Format != a.req.Format: // an attempt middleware sends another format
		c := *t
		c.Format = a.req.Format
		return &c
	}
	return t
}
