package channel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-rpc/sluice/criticality"

	"github.com/opentracing/opentracing-go"
	"github.com/opentracing/opentracing-go/ext"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/peerlist"
	"github.com/sluice-rpc/sluice/internal/ratelimit"
	"github.com/sluice-rpc/sluice/internal/recorder"
	"github.com/sluice-rpc/sluice/internal/retryexec"
	"github.com/sluice-rpc/sluice/pacing"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/uber/tchannel-go"
)

// Call sends req to the method of the Client's service through the
// pipeline and returns the one result: the response, or a *CallError. The raw, JSON and Thrift
// front-ends are built on it; use it directly to add another. Every
// CallOption applies (WithHeaders adds to req's Headers).
//
// The pipeline looks up the method's policy (WithServiceConfig), waits on
// the Client's lease gate (WithLease) and pacing (WithPacing), then runs
// the attempts: one, or retries or hedges as the policy says. Each attempt
// picks one of the Client's peers, skipping peers whose busy limiter
// refuses the call's criticality class (package busy, one limiter per
// class: a Busy to a lower class never holds back a higher one) or that
// lately answered Busy refusing its class, sends the request with
// tchannel-go, classifies the outcome from the call itself (never from
// error strings), feeds a busy answer back to that peer's limiter for the
// call's class, and records metrics
// (package stats) and opentracing spans for the call and the attempt. When
// no peer may take the request the call fails locally with ErrThrottled and
// nothing is sent.
//
// Failures stay bounded. Calls never dial: each peer's connector (package
// peer) connects in the background with gRPC's connection backoff, and
// only peers with an established connection are chosen. A call with no
// ready peer waits while some peer is connecting, and fails at once with
// ErrUnavailable (code UNAVAILABLE) when every peer's connection has
// failed, unless it waits for ready (WaitForReady). An attempt whose
// connection closed before it was sent moves to another peer, each peer at
// most once; a decline sent before any handler ran (by a closing server)
// is retried once on another peer; any other failure is retried only as
// the call's retry or hedging policy says, so a handler runs once unless a
// policy names the code it answered. A call returns by its deadline
// whatever the transport does.
//
// A request that cannot be sent fails at once with BAD_REQUEST, and is never
// retried: a nil req, an unsupported format, a service name over 255 bytes
// or a method name over 16 KiB (TChannel's limits), a transport header
// over 255 bytes (WithShardKey, WithRoutingKey, WithRoutingDelegate,
// WithCallerName, or the same set through tchannel-go's ContextBuilder on
// ctx), a Thrift header over 64 KiB, or arguments over the
// Channel's maximum request size (WithMaxRequestSize).
func (cl *Client) Call(ctx context.Context, method string, req *Request, opts ...CallOption) (*Response, error) {
	o := applyOptions(opts)
	return cl.ch.invoke(ctx, nil, cl, method, o.withHeaders(req), o)
}

// invoke runs a call through the call middlewares, if any, then the
// pipeline, and reports its CallInfo if o asks for it. st is the state the
// pipeline runs the call in, when the front-end made it (nil: the pipeline
// makes one); behind middlewares the pipeline always makes its own.
func (c *Channel) invoke(ctx context.Context, st *callState, cl *Client, method string, req *Request, o *callOptions) (*Response, error) {
	var (
		res *Response
		err error
	)
	if c.invoker == nil {
		res, err = c.call(ctx, st, cl, method, req, o)
	} else {
		ctx = context.WithValue(ctx, behindKey{}, &behind{cl, o})
		res, err = c.invoker(ctx, cl.service, method, req)
		if err != nil {
			err = asCallError(cl.service, method, err)
		}
	}
	o.report(res, err)
	return res, err
}

// behindKey carries what the pipeline behind the call middlewares needs
// of a call (a *behind) through them.
type behindKey struct{}

// behind is a call's Client and options, for the pipeline behind the call
// middlewares.
type behind struct {
	cl *Client
	o  *callOptions
}

// callBehindMiddleware is the Invoker the call middlewares wrap. It runs
// the call on the Client it was made on, or, when a middleware changed
// the service, on the Channel's Client for that service: without one the
// call fails NO_PEERS.
func (c *Channel) callBehindMiddleware(ctx context.Context, service, method string, req *Request) (*Response, error) {
	var cl *Client
	var o *callOptions
	if b, _ := ctx.Value(behindKey{}).(*behind); b != nil {
		cl, o = b.cl, b.o
	}
	if cl == nil || cl.service != service {
		if cl = c.client(service); cl == nil {
			err := fmt.Errorf("%w: the Channel has no Client for service %q (NewClient)", ErrNoPeers, service)
			return nil, &CallError{Service: service, Method: method, Code: codes.NoPeers, Message: err.Error(), Err: err}
		}
	}
	return c.call(ctx, nil, cl, method, req, o)
}

// asCallError returns err as a *CallError: itself if it is one, else a
// CallError with code UNEXPECTED wrapping it (an error of a middleware's
// own).
func asCallError(service, method string, err error) error {
	var ce *CallError
	if errors.As(err, &ce) {
		return err
	}
	return &CallError{Service: service, Method: method, Code: codes.Unexpected, Message: err.Error(), Err: err}
}

// call runs the pipeline: policy lookup, then the retry or hedge executor,
// each attempt choosing a peer, sending, and feeding back busy responses,
// stats and spans. It returns one result. It runs the call in st, a zero
// callState but for the front-end's request (frontReq), or in one of its
// own if st is nil. o are the call's options (nil: none); call only reads
// them, as a call middleware may run the pipeline more than once, at once.
func (c *Channel) call(ctx context.Context, st *callState, cl *Client, method string, req *Request, o *callOptions) (*Response, error) {
	service := cl.service
	if err := checkMethod(method); err != nil { // the service was checked by NewClient
		return nil, &CallError{Service: service, Method: method, Code: codes.BadRequest, Message: err.Error(), Err: err}
	}
	start := c.o.clock.Now()
	pol, err := cl.policyFor(method)
	if err != nil {
		return nil, c.fail(c.rec.Method(service, cl.namedSeries(method)), start, &CallError{Service: service, Method: method, Code: codes.BadRequest, Message: err.Error(), Err: err})
	}
	m := pol.m
	if err := c.checkRequest(req); err != nil {
		return nil, c.fail(m, start, &CallError{Service: service, Method: method, Code: codes.BadRequest, Message: err.Error(), Err: err})
	}
	tch, hide, err := o.transportFor(ctx, req.Format)
	if err != nil {
		return nil, c.fail(m, start, &CallError{Service: service, Method: method, Code: codes.BadRequest, Message: err.Error(), Err: err})
	}
	if c.closed.Load() || cl.closed.Load() {
		return nil, c.fail(m, start, &CallError{Service: service, Method: method, Code: codes.Closed, Err: ErrClosed})
	}
	l := pol.list
	// The rest runs in a function of its own, so that both functions'
	// defers are open-coded (the compiler gives up on them in a function
	// with many returns): a defer that is not costs every call more.
	ctx, cancel := c.deadline(ctx, pol)
	if hide != hideNothing { // BeginCall would send ctx's call options over tch
		ctx = tchCtx().hide(ctx, hide)
	}
	if cancel == nil { // ctx has its deadline already
		return c.run(ctx, st, service, method, req, o, tch, pol, l, start)
	}
	defer cancel()
	return c.run(ctx, st, service, method, req, o, tch, pol, l, start)
}

// run is the pipeline of call after its checks: the lease gate and pacer,
// the call's span, then the retry or hedge executor, and the result. ctx
// has the call's deadline; o are its options, tch the tchannel-go call
// options of its attempts (o.transportFor); start is when the call
// started.
func (c *Channel) run(ctx context.Context, st *callState, service, method string, req *Request, o *callOptions,
	tch *tchannel.CallOptions, pol *methodPolicy, l *peerlist.List, start time.Time) (*Response, error) {
	m := pol.m
	if g := pol.gate; g != nil {
		if err := g.Admit(ctx); err != nil {
			return nil, c.fail(m, start, gateError(service, method, ctx, err))
		}
	}

	pc := pol.pacer
	if pc != nil {
		keys := pol.paceKeys
		if pol.shared { // the method's own window, which its answers set
			keys[1] = ratelimit.MethodKey(service, method)
		}
		if err := pc.before(ctx, c, keys); err != nil {
			ce := &CallError{Service: service, Method: method, Code: codes.RateLimited, Err: err}
			if !errors.Is(err, pacing.ErrRateLimited) { // the caller's context ended while waiting
				ce.Code, ce.Message = classify(err)
			}
			return nil, c.fail(m, start, ce)
		}
		if pc.debugMode() && req.Format != tchannel.Raw {
			req = req.WithHeader(pacing.HeaderMode, pacing.ModeDebug)
		}
	}

	span := noopSpan
	if c.tracing {
		span = c.startCallSpan(ctx, service, method)
		defer span.Finish()
		ctx = opentracing.ContextWithSpan(ctx, span)
	}

	if st == nil {
		st = new(callState)
	}
	st.c, st.l, st.pol = c, l, pol
	st.waitForReady = (o != nil && o.waitForReady) || pol.waitForReady
	st.tch, st.plain = tch, tch
	var inRetry bool
	if st.class, inRetry = callClass(ctx, pol); st.class != criticality.Critical || inRetry {
		// Every attempt of a call made for a retry is marked as one: no
		// layer below retries it either.
		st.tch = markClass(st.tch, req.Format, st.class, inRetry)
		st.retried = inRetry
	}
	st.spec = attemptSpec{service: service, method: method, req: req}
	st.used, st.wins = st.usedBuf[:0], st.winsBuf[:0]
	if pol.gate == nil && pc == nil {
		st.start = start
	}
	var (
		outcome retryexec.Outcome
		stop    retry.StopReason
		winner  int
	)
	size := int64(len(req.Arg2) + len(req.Arg3))
	if pol.mayRetry && !(inRetry && !c.o.retries.Chained) {
		pol.cl.budget.First(start)
	}
	switch {
	case inRetry && pol.once != nil && !c.o.retries.Chained:
		// It serves a request that is itself a retry or hedge: one attempt,
		// and retry traffic, which the Client's budget bounds as its own
		// retries (RetryConfig.Chained).
		if !pol.cl.budget.Allow(start) {
			outcome = retryexec.Outcome{Err: &CallError{Service: service, Method: method, Code: codes.Throttled, Err: errRetryBudget}}
			stop = retry.StopChained
			m.SkippedBudget()
			break
		}
		rr := pol.once.DoSizedFor(ctx, size, st.class, st.try)
		outcome, stop, winner = rr.Outcome, rr.Stop, st.last
		if outcome.Err != nil && stop == retry.StopNotRetryable && pol.wouldRetry(outcome, st.class) {
			stop = retry.StopChained
			m.SkippedChained()
		}
	case pol.hedge != nil && st.class == criticality.Sheddable:
		// A sheddable call never hedges: hedges add load, and a sheddable
		// call's would be the first to go under overload, so none is sent
		// (its error says throttled). It is sent once, as a request the
		// retry buffer cannot hold is.
		outcome, stop = st.try(ctx, retryexec.Attempt{}), retry.StopThrottled
	case pol.hedge != nil:
		// Hedges hold the request for every attempt: it must fit the retry
		// buffer, or it is sent once, unhedged.
		if r, ok := c.buffer.Reserve(size); ok {
			st.concurrent = true
			hr := pol.hedge.DoFor(ctx, st.class, st.try)
			r.Release()
			outcome, stop, winner = hr.Outcome, hr.Stop, hr.Winner
			m.Hedged(hr.Sent-1, hr.Outcome.Err == nil && hr.Winner > 0, hr.Cancelled)
		} else {
			outcome, stop = st.try(ctx, retryexec.Attempt{}), retry.StopUnbuffered
		}
	case pol.retry != nil:
		rr := pol.retry.DoSizedFor(ctx, size, st.class, st.try)
		outcome, stop, winner = rr.Outcome, rr.Stop, st.last
	default: // retries disabled
		outcome, stop = st.try(ctx, retryexec.Attempt{}), retry.StopNotRetryable
	}
	if pol.bucket != nil {
		pol.tokens.Update(pol.bucket.Tokens())
	}
	if stop == retry.StopDeadline {
		m.SkippedDeadline()
	}

	st.lock()
	sent := st.sent
	peers := st.peersBuf[:0]
	for _, p := range st.used {
		peers = append(peers, p.HostPort())
	}
	var res *Response
	if outcome.Err == nil {
		res = st.response(winner)
	}
	st.unlock()
	// Every attempt has ended: the response, if any, is the caller's.
	st.releaseResponses()
	if outcome.Err != nil || res == nil {
		ce, ok := outcome.Err.(*CallError)
		if !ok { // the context ended before any attempt reported
			err := outcome.Err
			if err == nil {
				err = ctx.Err()
			}
			if err == nil { // cannot happen: an executor reported success without a response
				err = errors.New("sluice: no attempt reported a result")
			}
			code, msg := classify(err)
			ce = &CallError{Service: service, Method: method, Code: code, Message: msg, Err: err}
		}
		ce.Attempts, ce.Stop, ce.Peers = sent, stop, peers
		if c.tracing {
			ext.Error.Set(span, true)
			span.LogKV("event", "error", "error.kind", ce.CodeName(), "message", ce.Error())
		}
		return nil, c.fail(m, start, ce)
	}
	m.Call(res.end.Sub(start), "") // the winning attempt's end is the call's
	m.CallAttempts(sent)
	res.Attempts, res.Peers = sent, peers
	return res, nil
}

func (c *Channel) fail(m *recorder.Method, start time.Time, ce *CallError) error {
	m.Call(c.o.clock.Now().Sub(start), ce.CodeName())
	m.CallAttempts(ce.Attempts)
	return ce
}

// noopSpan stands in when no tracer is set, so the hot path skips span and
// context allocations (tchannel-go does the same).
var noopSpan = opentracing.NoopTracer{}.StartSpan("")

func spanContext(ctx context.Context) opentracing.SpanContext {
	if s := opentracing.SpanFromContext(ctx); s != nil {
		return s.Context()
	}
	return nil
}
