package channel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/opentracing/opentracing-go"
	"github.com/opentracing/opentracing-go/ext"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/pacing"
	"github.com/sluice-rpc/sluice/peer"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/sluice-rpc/sluice/stats"
	"github.com/uber/tchannel-go"
)

// CallOption configures one call.
type CallOption func(*callOptions)

type callOptions struct {
	headers      map[string]string
	respHeaders  *map[string]string
	info         *CallInfo
	waitForReady bool
}

// WithHeaders sends application headers with a JSON call (TChannel's arg2).
// CallJSON only: Call takes them in Request.Headers.
func WithHeaders(h map[string]string) CallOption {
	return func(o *callOptions) { o.headers = h }
}

// ResponseHeaders stores the JSON response's application headers in *dst.
// CallJSON only: Call returns them in Response.Headers.
func ResponseHeaders(dst *map[string]string) CallOption {
	return func(o *callOptions) { o.respHeaders = dst }
}

// WaitForReady makes the call wait, until its deadline, for a peer to
// become ready when every peer is in transient failure, instead of failing
// at once with UNAVAILABLE (gRPC's waitForReady). Without it a call waits
// only while some peer is connecting. The service config's waitForReady
// sets it for a method's every call.
func WaitForReady() CallOption {
	return func(o *callOptions) { o.waitForReady = true }
}

// CallInfo is how a call went: the attempts it sent and where they went.
type CallInfo struct {
	// Attempts is the number of attempts sent on the wire.
	Attempts int
	// Peer is the host:port that answered, or that the last attempt went
	// to ("" if none was chosen).
	Peer string
	// Peers is every peer an attempt went or tried to go to, in the order
	// they were chosen.
	Peers []string
}

// ReportCallInfo stores in *dst, when the call returns, successful or not,
// its attempts and peers: for CallJSON and CallRaw, whose results do not
// carry them (Call's Response and every *CallError do).
func ReportCallInfo(dst *CallInfo) CallOption {
	return func(o *callOptions) { o.info = dst }
}

// applyOptions returns the options opts set, or nil without any: applying
// them makes the options escape, an allocation the common call need not
// pay.
func applyOptions(opts []CallOption) *callOptions {
	if len(opts) == 0 {
		return nil
	}
	o := new(callOptions)
	for _, opt := range opts {
		opt(o)
	}
	return o
}

// report fills the CallInfo o asks for from the call's result.
func (o *callOptions) report(res *Response, err error) {
	if o == nil || o.info == nil {
		return
	}
	switch {
	case res != nil:
		*o.info = CallInfo{Attempts: res.Attempts, Peer: res.Peer, Peers: res.Peers}
	default:
		var ce *CallError
		if errors.As(err, &ce) {
			*o.info = CallInfo{Attempts: ce.Attempts, Peer: ce.Peer, Peers: ce.Peers}
			if ce.Peer == "" && len(ce.Peers) > 0 {
				o.info.Peer = ce.Peers[len(ce.Peers)-1]
			}
		} else {
			*o.info = CallInfo{}
		}
	}
}

// Request is one call's payload, as every attempt of the call sends it.
// Front-ends (CallRaw, CallJSON, package thrift) build one; Call sends it.
// Call neither modifies a Request nor keeps it, its Headers or its args
// after it returns (every attempt, hedges included, has ended by then), so
// callers may reuse their buffers.
type Request struct {
	// Format is the TChannel arg scheme: tchannel.Raw, tchannel.JSON or
	// tchannel.Thrift.
	Format tchannel.Format
	// Headers are the application headers of a JSON or Thrift call, encoded
	// into arg2 for each attempt (with tracing headers added).
	Headers map[string]string
	// Arg2 is a raw call's arg2, sent as is.
	Arg2 []byte
	// Arg3 is the encoded body.
	Arg3 []byte
}

// TChannel's limits on names, and Thrift's on headers: a call frame carries
// the service as string~1, tchannel-go refuses a method (arg1) over 16 KiB,
// and Thrift headers are nh~2 (k~2 v~2).
const (
	maxServiceName  = 255
	maxMethodName   = 16 << 10
	maxThriftHeader = 1<<16 - 1
)

// checkNames returns why no request to service's method can be sent, or
// nil: what no attempt and no peer could change. It runs before anything
// else, so that a name that is not one makes no metrics of its own.
func checkNames(service, method string) error {
	switch {
	case service == "":
		return errors.New("the service name is empty")
	case len(service) > maxServiceName:
		return fmt.Errorf("the service name is %d bytes; TChannel allows at most %d", len(service), maxServiceName)
	case len(method) > maxMethodName:
		return fmt.Errorf("the method name is %d bytes; TChannel allows at most %d", len(method), maxMethodName)
	}
	return nil
}

// checkRequest returns why req cannot be sent, or nil: what no attempt and
// no peer could change.
func (c *Channel) checkRequest(req *Request) error {
	if req == nil {
		return errors.New("the request is nil; pass a *Request with a Format and its arguments")
	}
	size := int64(len(req.Arg2) + len(req.Arg3))
	switch req.Format {
	case tchannel.Raw:
	case tchannel.JSON, tchannel.Thrift:
		if req.Format == tchannel.Thrift && len(req.Headers) > maxThriftHeader {
			return fmt.Errorf("the request has %d headers; Thrift allows at most %d", len(req.Headers), maxThriftHeader)
		}
		for k, v := range req.Headers {
			if req.Format == tchannel.Thrift && max(len(k), len(v)) > maxThriftHeader {
				return fmt.Errorf("header %.40q is %d bytes long with its value; Thrift allows at most %d for each", k, len(k)+len(v), maxThriftHeader)
			}
			size += int64(len(k) + len(v))
		}
	default:
		return fmt.Errorf("format %q is not supported; use raw, json or thrift", req.Format)
	}
	if size > c.o.maxRequest {
		return fmt.Errorf("the request's arguments are %d bytes, over the limit of %d (WithMaxRequestSize)", size, c.o.maxRequest)
	}
	return nil
}

// withHeader returns a copy of r with one more application header; r and
// its Headers are left as they are (the caller's, shared by attempts).
func (r *Request) withHeader(k, v string) *Request {
	c := *r
	c.Headers = make(map[string]string, len(r.Headers)+1)
	for hk, hv := range r.Headers {
		c.Headers[hk] = hv
	}
	c.Headers[k] = v
	return &c
}

// Response is what the successful attempt read.
type Response struct {
	// Headers are the decoded application headers of a JSON or Thrift
	// response.
	Headers map[string]string
	// Arg2 is the response's arg2 as received.
	Arg2 []byte
	// Arg3 is the encoded body.
	Arg3 []byte
	// AppError marks an application error: the handler answered, with an
	// error of its own. Never retried.
	AppError bool
	// Attempts is the number of attempts sent; Peer the host:port that
	// answered; Peers every peer an attempt went or tried to go to, in the
	// order they were chosen (a peer that could not be reached is listed
	// although nothing was sent to it).
	Attempts int
	Peer     string
	Peers    []string

	end time.Time // when the attempt that read it ended
}

// Call sends req to service's method through the pipeline and returns the
// one result: the response, or a *CallError. The raw, JSON and Thrift
// front-ends are built on it; use it directly to add another.
//
// A request that cannot be sent fails at once with BAD_REQUEST, and is never
// retried: a nil req, an unsupported format, a service name over 255 bytes
// or a method name over 16 KiB (TChannel's limits), a Thrift header over
// 64 KiB, or arguments over the Channel's maximum request size
// (WithMaxRequestSize).
func (c *Channel) Call(ctx context.Context, service, method string, req *Request, opts ...CallOption) (*Response, error) {
	return c.invoke(ctx, nil, service, method, req, applyOptions(opts))
}

// invoke runs a call through the call middlewares, if any, then the
// pipeline, and reports its CallInfo if o asks for it. st is the state the
// pipeline runs the call in, when the front-end made it (nil: the pipeline
// makes one); behind middlewares the pipeline always makes its own.
func (c *Channel) invoke(ctx context.Context, st *callState, service, method string, req *Request, o *callOptions) (*Response, error) {
	var (
		res *Response
		err error
	)
	if c.invoker == nil {
		res, err = c.call(ctx, st, service, method, req, o != nil && o.waitForReady)
	} else {
		if o != nil {
			ctx = context.WithValue(ctx, callOptionsKey{}, o)
		}
		res, err = c.invoker(ctx, service, method, req)
		if err != nil {
			err = asCallError(service, method, err)
		}
	}
	o.report(res, err)
	return res, err
}

// callOptionsKey carries a call's options through call middlewares, to the
// pipeline behind them.
type callOptionsKey struct{}

// callBehindMiddleware is the Invoker the call middlewares wrap.
func (c *Channel) callBehindMiddleware(ctx context.Context, service, method string, req *Request) (*Response, error) {
	o, _ := ctx.Value(callOptionsKey{}).(*callOptions)
	return c.call(ctx, nil, service, method, req, o != nil && o.waitForReady)
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

// CallRaw calls service's method with raw arguments and returns the
// response. A response marked as an application error is returned with a nil
// error and AppError set.
func (c *Channel) CallRaw(ctx context.Context, service, method string, arg2, arg3 []byte, opts ...CallOption) (*RawResponse, error) {
	o := applyOptions(opts)
	// The call runs in a recycled state that holds its request too: the
	// RawResponse is all it allocates.
	st := c.frontState()
	st.frontReq = Request{Format: tchannel.Raw, Arg2: arg2, Arg3: arg3}
	res, err := c.invoke(ctx, st, service, method, &st.frontReq, o)
	if err != nil {
		c.frontDone(st, o, err)
		return nil, err
	}
	raw := &RawResponse{Arg2: res.Arg2, Arg3: res.Arg3, AppError: res.AppError}
	c.frontDone(st, o, nil)
	return raw, nil
}

// frontState returns a zero callState for a front-end that keeps nothing
// of it once the call has returned (CallRaw, CallJSON): one that such a
// call has released (frontDone), or a new one.
func (c *Channel) frontState() *callState {
	if st, ok := c.states.Get().(*callState); ok {
		return st
	}
	return new(callState)
}

// frontDone releases the state st of a front-end call that has returned
// err, with options o, once the front-end is done with its response. It
// is recycled only when nothing outside the call can still reach it: not
// when a middleware saw it (one may keep the request, or an attempt's
// context), nor when the call's error or CallInfo lists its peers (their
// Peers slice is the state's). Such a state is left to the collector,
// without the caller's buffers if no middleware saw them.
func (c *Channel) frontDone(st *callState, o *callOptions, err error) {
	switch {
	case c.invoker != nil || c.sendAttempt != nil:
	case err != nil || (o != nil && o.info != nil):
		st.frontReq = Request{}
	default:
		*st = callState{} // keeps no peer, Channel or buffer alive
		c.states.Put(st)
	}
}

// CallJSON calls service's method with req encoded as JSON and decodes the
// response into resp. An application error the handler returned comes back
// as *ApplicationError; a failed call as *CallError.
func (c *Channel) CallJSON(ctx context.Context, service, method string, req, resp any, opts ...CallOption) error {
	o := applyOptions(opts)
	arg3, err := json.Marshal(req)
	if err != nil {
		err = fmt.Errorf("cannot encode the request as JSON: %w", err)
		err = &CallError{Service: service, Method: method, Code: codes.BadRequest, Message: err.Error(), Err: err}
		o.report(nil, err)
		return err
	}
	var headers map[string]string
	if o != nil {
		headers = o.headers
	}
	st := c.frontState() // recycled, and holds the request (see CallRaw)
	st.frontReq = Request{Format: tchannel.JSON, Headers: headers, Arg3: arg3}
	res, err := c.invoke(ctx, st, service, method, &st.frontReq, o)
	if err != nil {
		c.frontDone(st, o, err)
		return err
	}
	err = decodeJSONResponse(service, method, res, resp, o)
	c.frontDone(st, o, nil) // res may be in st: used up above
	return err
}

// decodeJSONResponse decodes a JSON call's response res into resp, or
// returns the application error it carries, and gives o the response
// headers it asks for.
func decodeJSONResponse(service, method string, res *Response, resp any, o *callOptions) error {
	if o != nil && o.respHeaders != nil {
		*o.respHeaders = res.Headers
	}
	if res.AppError {
		ae := &ApplicationError{}
		if err := json.Unmarshal(res.Arg3, ae); err != nil {
			return fmt.Errorf("sluice: call %s::%s: application error response is not JSON: %w", service, method, err)
		}
		return ae
	}
	if resp != nil {
		if err := json.Unmarshal(res.Arg3, resp); err != nil {
			return fmt.Errorf("sluice: call %s::%s: cannot decode the JSON response: %w", service, method, err)
		}
	}
	return nil
}

// call runs the pipeline: policy lookup, then the retry or hedge executor,
// each attempt choosing a peer, sending, and feeding back busy responses,
// stats and spans. It returns one result. It runs the call in st, a zero
// callState but for the front-end's request (frontReq), or in one of its
// own if st is nil.
func (c *Channel) call(ctx context.Context, st *callState, service, method string, req *Request, waitForReady bool) (*Response, error) {
	if err := checkNames(service, method); err != nil {
		return nil, &CallError{Service: service, Method: method, Code: codes.BadRequest, Message: err.Error(), Err: err}
	}
	start := c.o.clock.Now()
	pol, err := c.policyFor(service, method)
	if err != nil {
		return nil, c.fail(c.methodStats(service, method), start, &CallError{Service: service, Method: method, Code: codes.BadRequest, Message: err.Error(), Err: err})
	}
	m := pol.m
	if err := c.checkRequest(req); err != nil {
		return nil, c.fail(m, start, &CallError{Service: service, Method: method, Code: codes.BadRequest, Message: err.Error(), Err: err})
	}
	if c.closed.Load() {
		return nil, c.fail(m, start, &CallError{Service: service, Method: method, Code: codes.Closed, Err: ErrClosed})
	}
	l := pol.peers(c, service)
	if l == nil {
		return nil, c.fail(m, start, &CallError{Service: service, Method: method, Code: codes.NoPeers, Err: ErrNoPeers})
	}
	// The rest runs in a function of its own, so that both functions'
	// defers are open-coded (the compiler gives up on them in a function
	// with many returns): a deferred call costs tens of nanoseconds more.
	ctx, cancel := c.deadline(ctx, pol)
	if cancel == nil { // ctx has its deadline already
		return c.run(ctx, st, service, method, req, waitForReady, pol, l, start)
	}
	defer cancel()
	return c.run(ctx, st, service, method, req, waitForReady, pol, l, start)
}

// run is the pipeline of call after its checks: the lease gate and pacer,
// the call's span, then the retry or hedge executor, and the result. ctx
// has the call's deadline; start is when the call started.
func (c *Channel) run(ctx context.Context, st *callState, service, method string, req *Request, waitForReady bool,
	pol *methodPolicy, l *peer.List, start time.Time) (*Response, error) {
	m := pol.m
	if g := pol.gate; g != nil {
		if err := g.Admit(ctx); err != nil {
			return nil, c.fail(m, start, gateError(service, method, ctx, err))
		}
	}

	pc := pol.pacer
	if pc != nil {
		if err := pc.before(ctx, c, pol.paceKeys); err != nil {
			ce := &CallError{Service: service, Method: method, Code: codes.RateLimited, Err: err}
			if !errors.Is(err, pacing.ErrRateLimited) { // the caller's context ended while waiting
				ce.Code, ce.Message = classify(err)
			}
			return nil, c.fail(m, start, ce)
		}
		if pc.cfg.Debug && req.Format != tchannel.Raw {
			req = req.withHeader(pacing.HeaderMode, pacing.ModeDebug)
		}
	}

	span := noopSpan
	if c.tracing {
		span = c.o.tracer.StartSpan(method, opentracing.ChildOf(spanContext(ctx)), ext.SpanKindRPCClient)
		ext.PeerService.Set(span, service)
		ext.Component.Set(span, componentName)
		defer span.Finish()
		ctx = opentracing.ContextWithSpan(ctx, span)
	}

	if st == nil {
		st = new(callState)
	}
	st.c, st.l, st.pol = c, l, pol
	st.waitForReady = waitForReady || pol.waitForReady
	st.spec = attemptSpec{service: service, method: method, req: req}
	st.used, st.wins = st.usedBuf[:0], st.winsBuf[:0]
	if pol.gate == nil && pc == nil {
		st.start = start
	}
	var (
		outcome retry.Outcome
		stop    retry.StopReason
		winner  int
	)
	size := int64(len(req.Arg2) + len(req.Arg3))
	switch {
	case pol.hedge != nil:
		// Hedges hold the request for every attempt: it must fit the retry
		// buffer, or it is sent once, unhedged.
		if r, ok := c.buffer.Reserve(size); ok {
			st.concurrent = true
			hr := pol.hedge.Do(ctx, st.try)
			r.Release()
			outcome, stop, winner = hr.Outcome, hr.Stop, hr.Winner
			m.Hedged(hr.Sent-1, hr.Outcome.Err == nil && hr.Winner > 0, hr.Cancelled)
		} else {
			outcome, stop = st.try(ctx, retry.Attempt{}), retry.StopUnbuffered
		}
	case pol.retry != nil:
		rr := pol.retry.DoSized(ctx, size, st.try)
		outcome, stop, winner = rr.Outcome, rr.Stop, st.last
	default: // retries disabled
		outcome, stop = st.try(ctx, retry.Attempt{}), retry.StopNotRetryable
	}
	if pol.bucket != nil {
		pol.tokens.Update(pol.bucket.Tokens())
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

func (c *Channel) fail(m *stats.Method, start time.Time, ce *CallError) error {
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

// callState is one call's memory across its attempts: the peers chosen
// (each attempt avoids them, hedges in flight included) and the successful
// responses by attempt number. It also holds the response the first
// successful attempt reads, and the request of the front-ends that build
// one (CallRaw, CallJSON, which recycle it: see frontState). Hedged
// attempts run concurrently, and lock it (see lock).
type callState struct {
	c    *Channel
	l    *peer.List
	pol  *methodPolicy // the method's: stats, pacer, estimator, backoff
	spec attemptSpec

	waitForReady bool // wait for a ready peer even when none is connecting
	concurrent   bool // attempts may run at once (hedging): lock takes mu
	resUsed      bool // resBuf is taken
	// start is when the call started, when nothing (a gate, a pacer) held
	// it up before its first attempt; else zero.
	start time.Time

	mu   sync.Mutex
	used []*peer.Peer // in the order chosen, each once
	sent int          // attempts sent on the wire
	last int          // Number of the latest attempt (sequential retries)
	wins []win        // successful attempts (more than one only when hedging)

	// Inline backing for used and wins: most calls need one of each, and
	// the callState is allocated anyway.
	usedBuf  [2]*peer.Peer
	winsBuf  [1]win
	peersBuf [2]string // backs Response.Peers / CallError.Peers
	resBuf   Response  // the first successful attempt's response

	frontReq Request // CallRaw's and CallJSON's request
}

// lock locks st.mu when attempts may run at once (hedging). Without
// hedging a call's attempts run one after another on the caller's
// goroutine (the retry executor's, or the single one), nothing else
// reaches st meanwhile, and lock does nothing: an uncontended mutex still
// costs atomic operations, three times per attempt.
func (st *callState) lock() {
	if st.concurrent {
		st.mu.Lock()
	}
}

func (st *callState) unlock() {
	if st.concurrent {
		st.mu.Unlock()
	}
}

type win struct {
	n   int
	res *Response
}

// response returns the response of successful attempt n; st is locked.
func (st *callState) response(n int) *Response {
	for _, w := range st.wins {
		if w.n == n {
			return w.res
		}
	}
	return nil
}

// newResponseLocked returns the Response an attempt reads into: the one
// inside the call state for the first attempt to ask (most calls make one),
// a new one for the others (hedges may read concurrently). st is locked.
func (st *callState) newResponseLocked() *Response {
	if !st.resUsed {
		st.resUsed = true
		return &st.resBuf
	}
	return &Response{}
}

// pick chooses the peer for one attempt at time now (see choose). While no
// peer is ready but some are connecting (or, waiting for ready, while none
// is ready at all) it waits for a peer's state to change, or for ctx to
// end. It returns the peer and the time of the choice.
func (st *callState) pick(ctx context.Context, now time.Time) (*peer.Peer, time.Time, error) {
	for {
		p, err := st.choose(now)
		if err != nil && st.c.closed.Load() {
			return nil, now, ErrClosed // its peers are shut down: nothing to wait for
		}
		if !st.mayWait(err) {
			return p, now, err
		}
		// Choose again after taking the change signal, so that a change
		// between the two is not missed; the first choice kept the
		// common case free of it.
		changed := st.l.Changed()
		if p, err = st.choose(now); !st.mayWait(err) {
			return p, now, err
		}
		if st.c.o.onWait != nil {
			st.c.o.onWait()
		}
		select {
		case <-changed:
			now = st.c.o.clock.Now()
		case <-ctx.Done():
			return nil, now, fmt.Errorf("no peer became ready (%v): %w", err, ctx.Err())
		}
	}
}

// mayWait reports whether a choice that failed with err may wait for a
// peer's state to change.
func (st *callState) mayWait(err error) bool {
	return err == peer.ErrConnecting || (err == peer.ErrUnavailable && st.waitForReady)
}

// choose picks the peer for one attempt, avoiding the peers this call has
// used, and records it, all under the call's lock: concurrent hedges of one
// call must not both pick a peer before either has recorded it. It never
// waits (pick does, without the lock).
func (st *callState) choose(now time.Time) (*peer.Peer, error) {
	st.lock()
	defer st.unlock()
	p, err := st.l.ChooseAt(st.used, now)
	if err != nil {
		return nil, err
	}
	for _, q := range st.used {
		if q == p {
			return p, nil
		}
	}
	st.used = append(st.used, p)
	return p, nil
}

// try is the retry.AttemptFunc of a call: one attempt, classified into the
// executor's terms.
func (st *callState) try(ctx context.Context, a retry.Attempt) retry.Outcome {
	st.lock()
	into := st.newResponseLocked()
	st.unlock()

	// Attempts share the call's spec (they only read it), but for a
	// retried JSON or Thrift attempt, whose headers count the attempts
	// before it.
	spec := &st.spec
	if a.Number > 0 && spec.req.Format != tchannel.Raw {
		retried := *spec
		retried.req = spec.req.withHeader(AttemptsHeader, strconv.Itoa(a.Number))
		spec = &retried
	}
	var (
		res             *Response
		sent, committed bool
		err             error
	)
	if st.c.sendAttempt == nil {
		res, sent, committed, err = st.c.attempt(ctx, st, spec, a.Number, into)
	} else {
		res, sent, committed, err = st.c.attemptVia(ctx, st, spec, a.Number, into)
	}
	st.lock()
	st.last = a.Number
	if sent {
		st.sent++
	}
	if err == nil {
		st.wins = append(st.wins, win{a.Number, res})
	}
	st.unlock()
	if sent && a.Number > 0 {
		st.pol.m.Retry(a.Number)
		if err != nil {
			st.pol.m.RetryFailed()
		}
	}
	if err == nil {
		o := retry.Outcome{}
		st.paceOutcome(res, &o, a.Number)
		return o
	}
	ce := err.(*CallError)
	o := retry.Outcome{Err: ce, Code: ce.Code, Committed: committed}
	if !sent && !committed {
		// Nothing could take it: no ready peer, every peer throttled, no
		// peers, the channel closed, or the deadline came first.
		o.Local = true
		return o
	}
	if ce.Code == codes.Busy || ce.Code == codes.Declined {
		o.Pushback, ce.Message = retry.PushbackFromMessage(ce.Message)
		o.DeclinedEarly = ce.Code == codes.Declined && declinedEarly(ce.Message)
	}
	st.paceOutcome(nil, &o, a.Number)
	return o
}

// busyPushback returns the delay a Busy answer's pushback hint asks for, 0
// for any other answer or hint.
func busyPushback(code codes.Code, msg string) time.Duration {
	if code != codes.Busy {
		return 0
	}
	if pb, _ := retry.PushbackFromMessage(msg); pb.Kind == retry.PushbackDelay {
		return pb.Delay
	}
	return 0
}

// AttemptsHeader is the application header carrying, on a retried or hedged
// attempt of a JSON or Thrift call, the number of attempts made before it.
// Handlers can read it; it is absent on the first attempt.
const AttemptsHeader = "previous-rpc-attempts"

// attempt sends a.req once, to a ready peer this call has not used yet when
// one allows it (st.pick); a peer whose connection turns out to be gone
// before anything was sent is left for another (beginElsewhere). It
// returns the response, whether the request left the client, whether the
// response had reached the application (its arg2 was read) before a
// failure, and a *CallError on failure.
func (c *Channel) attempt(ctx context.Context, st *callState, a *attemptSpec, n int, into *Response) (res *Response, sent, committed bool, err error) {
	if c.closed.Load() {
		return nil, false, false, &CallError{Service: a.service, Method: a.method, Code: codes.Closed, Err: ErrClosed}
	}
	m := st.pol.m
	// One clock read for the choice and the latency (BeginCall included),
	// unless the choice had to wait; none for a first attempt that nothing
	// held up, which starts when its call did (a clock read costs about
	// 0.2% of a loopback call).
	t0 := st.start
	if n != 0 || t0.IsZero() {
		t0 = c.o.clock.Now()
	}
	p, t0, err := st.pick(ctx, t0)
	if err != nil {
		return nil, false, false, a.pickError(err)
	}
	// sctx marks the call's span for the span tchannel-go starts for the
	// attempt (see spanTracer).
	sctx, as := ctx, (*attemptSpan)(nil)
	if c.tracing {
		if cs := opentracing.SpanFromContext(ctx); cs != nil {
			as = &attemptSpan{Span: cs, tracer: c.spans, n: n, hostPort: p.HostPort()}
			sctx = opentracing.ContextWithSpan(ctx, as)
		}
	}
	call, err := p.TChannel().BeginCall(sctx, a.service, a.method, callOptionsFor(a.req.Format))
	if err != nil {
		if p, call, t0, err = c.beginElsewhere(ctx, sctx, st, a, as, p, t0, err); err != nil {
			return nil, false, false, err
		}
	}
	sent = true
	m.Attempt()
	p.Begin()
	res, committed, err = exchange(call, a.req, into)
	code, msg := codes.OK, ""
	if err != nil {
		code, msg = classify(err)
	}
	now := c.o.clock.Now()
	if pb := busyPushback(code, msg); pb > 0 {
		p.EndPushedBack(now, now.Sub(t0), pb)
	} else {
		p.End(now, now.Sub(t0), code)
	}
	if est := st.pol.est; est != nil && n == 0 && (code == codes.OK || code == codes.Cancelled || code == codes.Timeout) {
		// Adaptive hedging learns from first attempts. One cancelled
		// because a hedge won, or cut off by the deadline, is observed
		// too: its time so far bounds its latency from below.
		est.Observe(now.Sub(t0))
	}
	if res != nil {
		res.end = now
	}
	if err != nil {
		m.AttemptFailed(code.String())
		return nil, true, committed, &CallError{Service: a.service, Method: a.method, Code: code, Message: msg, Peer: p.HostPort(), Err: err}
	}
	res.Peer = p.HostPort()
	return res, true, false, nil
}

// attemptVia is attempt behind the attempt middlewares: they see the
// attempt before its peer is chosen, and may replace its request.
func (c *Channel) attemptVia(ctx context.Context, st *callState, a *attemptSpec, n int, into *Response) (_ *Response, sent, committed bool, _ error) {
	var (
		called   bool
		innerErr error
	)
	at := &Attempt{Service: a.service, Method: a.method, Number: n, Request: a.req}
	ctx = context.WithValue(ctx, attemptKey{}, AttemptInvoker(func(ctx context.Context, at *Attempt) (*Response, error) {
		called = true
		spec := attemptSpec{service: a.service, method: a.method, req: at.Request}
		if spec.req != a.req {
			if err := c.checkRequest(spec.req); err != nil {
				innerErr = &CallError{Service: a.service, Method: a.method, Code: codes.BadRequest,
					Message: "an attempt middleware's request: " + err.Error(), Err: err}
				return nil, innerErr
			}
		}
		var res *Response
		res, sent, committed, innerErr = c.attempt(ctx, st, &spec, n, into)
		if innerErr != nil {
			return nil, innerErr
		}
		return res, nil
	}))
	res, err := c.sendAttempt(ctx, at)
	if err == nil && res == nil {
		err = errors.New("an attempt middleware returned neither a response nor an error")
	}
	if err != nil && (!called || innerErr == nil) {
		// Refused before it was sent, or failed after its response
		// arrived: either way the call ends with this error, no further
		// attempt (a refusal is not a local outcome such as throttling,
		// which would keep an earlier attempt's error).
		committed = true
	}
	if err != nil {
		ce := asCallError(a.service, a.method, err).(*CallError)
		if ce.Peer == "" && res != nil {
			ce.Peer = res.Peer
		}
		return nil, sent, committed, ce
	}
	return res, sent, false, nil
}

// attemptKey carries, through the attempt middlewares, the function that
// sends the attempt they wrap.
type attemptKey struct{}

// sendBehindMiddleware is the AttemptInvoker the attempt middlewares wrap.
func sendBehindMiddleware(ctx context.Context, a *Attempt) (*Response, error) {
	return ctx.Value(attemptKey{}).(AttemptInvoker)(ctx, a)
}

// beginElsewhere handles an attempt whose BeginCall on p failed with err,
// the rare path of attempt. A connection that closed under the attempt sent
// nothing: the peer is reported lost (it leaves choice until its connector
// has reconnected) and the attempt begins on another peer at once, at most
// as many times as the list has peers, so an attempt never loops on dead
// connections. Any other error (the deadline is reached, or tchannel-go
// refused the call itself) ends the attempt. It returns the peer and call
// that began, or a *CallError.
func (c *Channel) beginElsewhere(ctx, sctx context.Context, st *callState, a *attemptSpec, as *attemptSpan,
	p *peer.Peer, t0 time.Time, err error) (*peer.Peer, *tchannel.OutboundCall, time.Time, error) {
	for unsent := 1; ; unsent++ {
		var se tchannel.SystemError
		if errors.As(err, &se) || ctx.Err() != nil {
			code, msg := classify(err)
			return nil, nil, t0, &CallError{Service: a.service, Method: a.method, Code: code, Message: msg, Err: err}
		}
		// The connection closed under us: nothing left this process.
		st.pol.m.Unsent()
		p.Lost()
		if unsent >= len(st.l.Peers()) {
			return nil, nil, t0, &CallError{Service: a.service, Method: a.method, Code: codes.Unavailable,
				Err: fmt.Errorf("%w (the connections of the peers this attempt chose closed before it could be sent; the last, %s: %v)", ErrUnavailable, p.HostPort(), err)}
		}
		if p, t0, err = st.pick(ctx, t0); err != nil {
			return nil, nil, t0, a.pickError(err)
		}
		if as != nil {
			as.hostPort = p.HostPort()
		}
		var call *tchannel.OutboundCall
		if call, err = p.TChannel().BeginCall(sctx, a.service, a.method, callOptionsFor(a.req.Format)); err == nil {
			return p, call, t0, nil
		}
	}
}

// Call options per format, shared: tchannel-go only reads them (as it does
// its own defaults), and a fresh one per attempt would cost an allocation.
var (
	rawCallOptions    = &tchannel.CallOptions{Format: tchannel.Raw}
	jsonCallOptions   = &tchannel.CallOptions{Format: tchannel.JSON}
	thriftCallOptions = &tchannel.CallOptions{Format: tchannel.Thrift}
)

func callOptionsFor(f tchannel.Format) *tchannel.CallOptions {
	switch f {
	case tchannel.JSON:
		return jsonCallOptions
	case tchannel.Thrift:
		return thriftCallOptions
	}
	return rawCallOptions
}

// attemptSpec is what every attempt of one call sends.
type attemptSpec struct {
	service, method string
	req             *Request
}

// pickError is the error of an attempt for which st.pick found no peer:
// a local outcome (throttled, no peers, unavailable, closed), or the
// context's end while it waited for a peer.
func (a *attemptSpec) pickError(err error) *CallError {
	ce := &CallError{Service: a.service, Method: a.method, Code: localCode(err), Err: err}
	if ce.Code == codes.OK {
		ce.Code, ce.Message = classify(err)
	}
	return ce
}

// exchange writes the request's arguments and reads the response's.
func exchange(call *tchannel.OutboundCall, req *Request, res *Response) (_ *Response, committed bool, err error) {
	if req.Format == tchannel.Raw {
		if err := tchannel.NewArgWriter(call.Arg2Writer()).Write(req.Arg2); err != nil {
			return nil, committed, err
		}
	} else {
		h := tchannel.InjectOutboundSpan(call.Response(), req.Headers)
		arg2, err := encodeHeaders(req.Format, h)
		if err != nil {
			return nil, committed, err
		}
		if err := tchannel.NewArgWriter(call.Arg2Writer()).Write(arg2); err != nil {
			return nil, committed, err
		}
	}
	if err := tchannel.NewArgWriter(call.Arg3Writer()).Write(req.Arg3); err != nil {
		return nil, committed, err
	}
	resp := call.Response()
	if err := tchannel.NewArgReader(resp.Arg2Reader()).Read(&res.Arg2); err != nil {
		return nil, committed, err
	}
	committed = true // the response has reached us: no retry after this
	res.AppError = resp.ApplicationError()
	if err := tchannel.NewArgReader(resp.Arg3Reader()).Read(&res.Arg3); err != nil {
		return nil, committed, err
	}
	if req.Format != tchannel.Raw {
		h, err := decodeHeaders(req.Format, res.Arg2)
		if err != nil {
			return nil, committed, err
		}
		res.Headers = h
	}
	return res, false, nil
}
