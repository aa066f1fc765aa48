package channel

import (
	"context"
	"errors"
	"time"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/recorder"
	"github.com/uber/tchannel-go"
)

// Server metrics. With a scope (WithScope), the guard counts every
// request to a registered method in stats.ServerCalls as it arrives, and
// records it once answered in stats.ServerCallLatency and, by how it was answered,
// stats.ServerCallErrors (tag code) or stats.ServerCallAppErrors, tagged
// service, method and caller (the first stats.MaxCallerSeries callers of
// each method by name; the rest under stats.CallerOther); the requests
// load shedding refuses in stats.ServerShed too (tag reason). Recording
// costs two clock reads, a map lookup and a few atomic adds, and allocates
// nothing for raw and JSON handlers; with no scope it costs nothing.
//
// How a request was answered: the guard knows its own refusals; raw and
// JSON handlers, the Channel's own, say how they answered; a Thrift
// server of package thrift says it through the context (one small
// allocation per request); a handler registered with RegisterHandler
// otherwise cannot be seen answering, and its requests count in
// stats.ServerCalls and the latency only.

// WithTChannelMetrics makes the Channel's server side also report its
// metrics under tchannel-go's names and tags, beside Sluice's: the
// counters inbound.calls.recvd, inbound.calls.success,
// inbound.calls.app-errors and inbound.calls.system-errors (tag type:
// "busy", "timeout", ...) and the timer inbound.calls.latency, tagged
// service, calling-service and endpoint (stats.TChannelInboundRecvd, ...).
// Dashboards and alerts written against a tchannel-go server keep working
// through a migration. Unlike tchannel-go's, their tags are bounded as
// Sluice's are: endpoint takes registered methods only, calling-service
// the first stats.MaxCallerSeries callers of each method, and the rest
// share stats.CallerOther. tchannel-go's own reporter is not involved
// (it may be set too, through WithTChannelOptions, with its unbounded
// tags). Off, it costs nothing; it needs a scope (WithScope).
func WithTChannelMetrics() Option { return func(o *options) { o.tchannelMetrics = true } }

// answerer is a handler of the Channel's own (raw, JSON): it says how it
// answered each call it served.
type answerer interface {
	serve(ctx context.Context, call *tchannel.InboundCall) answer
}

// answer is how a request was answered: the code of the system error
// answered (codes.OK: none; codes.Cancelled: no answer could be sent) and
// whether the answer was an application error. known is false when the
// Channel could not see the answer (a handler of RegisterHandler's).
type answer struct {
	c     codes.Code
	app   bool
	known bool
}

// answered returns a known answer.
func answered(c codes.Code, app bool) answer { return answer{c: c, app: app, known: true} }

// code returns the answer's code for a request served with ctx: one that
// could not be answered because its deadline passed is a TIMEOUT.
func (a answer) code(ctx context.Context) codes.Code {
	if a.c == codes.Cancelled && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return codes.Timeout
	}
	return a.c
}

// serveOther passes the request to a handler that is not the Channel's
// own (RegisterHandler's, tchannel-go's) and returns how it was answered,
// as the context saw it when metrics are on (unknown when they are off).
func (g *guarded) serveOther(ctx context.Context, call *tchannel.InboundCall, metrics bool) answer {
	if !metrics {
		g.h.Handle(ctx, call)
		return answer{}
	}
	ac := &answerCtx{Context: ctx}
	g.h.Handle(ac, call)
	return ac.a
}

// done records a request received at t0 and answered (ans) with ctx at
// now.
func done(ms *recorder.ServerSeries, ctx context.Context, t0, now time.Time, ans answer) {
	if !ans.known {
		ms.Unclassified(now.Sub(t0))
		return
	}
	ms.Done(now.Sub(t0), ans.code(ctx), ans.app)
}

// refused records a request received at t0 that the guard refused with
// code, unless metrics are off (ms nil).
func (g *guarded) refused(ms *recorder.ServerSeries, t0 time.Time, code codes.Code) {
	if ms != nil {
		ms.Done(g.c.o.clock.Now().Sub(t0), code, false)
	}
}

// answerCtx is the context a handler that is not the Channel's own is
// given when metrics are on: a Thrift server of package thrift tells it
// how it answered (chanhook.Server.Answered).
type answerCtx struct {
	context.Context
	a answer
}

// answerKey is answerCtx's key: Value(answerKey{}) is the answerCtx.
type answerKey struct{}

func (c *answerCtx) Value(k any) any {
	if _, ok := k.(answerKey); ok {
		return c
	}
	return c.Context.Value(k)
}

// answeredVia notes, in the answerCtx that ctx derives from (if any), that
// its request is answered with err (nil: no system error; a non-system
// error answers UNEXPECTED, as tchannel-go sends it), and with an
// application error if appError and err is nil.
func answeredVia(ctx context.Context, err error, appError bool) {
	ac, ok := ctx.Value(answerKey{}).(*answerCtx)
	if !ok {
		return
	}
	if err != nil {
		ac.a = answered(codes.Code(tchannel.GetSystemErrorCode(err)), false)
		return
	}
	ac.a = answered(codes.OK, appError)
}
