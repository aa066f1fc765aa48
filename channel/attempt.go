package channel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/opentracing/opentracing-go"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/criticality"
	"github.com/sluice-rpc/sluice/internal/peerlist"
	"github.com/sluice-rpc/sluice/internal/retryexec"
	"github.com/sluice-rpc/sluice/peer"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/uber/tchannel-go"
)

// busyHints returns what a Busy answer's message asks of its client: the
// delay its pushback hint asks for (0 for none, or another hint), and the
// class its server says it refuses (0: none), noted before the hint.
func busyHints(msg string) (time.Duration, criticality.Class) {
	pb, rest := retryexec.PushbackFromMessage(msg)
	refusing, _ := refusingOf(rest)
	if pb.Kind == retry.PushbackDelay {
		return pb.Delay, refusing
	}
	return 0, refusing
}

// attempt sends a.req once, to a ready peer this call has not used yet when
// one allows it (st.pick); a peer whose connection turns out to be gone
// before anything was sent is left for another (beginElsewhere). It
// returns the response, whether the request left the client, whether the
// response had reached the application (its arg2 was read) before a
// failure, and a *CallError on failure.
func (c *Channel) attempt(ctx context.Context, st *callState, a *attemptSpec, n int, into *Response) (res *Response, sent, committed bool, err error) {
	if c.closed.Load() || st.pol.cl.closed.Load() {
		return nil, false, false, &CallError{Service: a.service, Method: a.method, Code: codes.Closed, Err: ErrClosed}
	}
	m := st.pol.m
	// One clock read for the choice and the latency (BeginCall included),
	// unless the choice had to wait; none for a first attempt that nothing
	// held up, which starts when its call did: every call pays for each
	// clock read on its path.
	t0 := st.start
	if n != 0 || t0.IsZero() {
		t0 = c.o.clock.Now()
	}
	p, t0, err := st.pick(ctx, t0)
	if err != nil {
		if st.pol.cl.closed.Load() { // its Client closed while it waited: its peers are gone
			return nil, false, false, &CallError{Service: a.service, Method: a.method, Code: codes.Closed, Err: ErrClosed}
		}
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
	call, err := p.TChannel().BeginCall(sctx, a.service, a.method, a.options(st))
	if err != nil {
		if p, call, t0, err = c.beginElsewhere(ctx, sctx, st, a, as, p, t0, err); err != nil {
			if ce, ok := err.(*CallError); ok { // cut off before it began: a cut-off all the same
				c.observeFirst(st, n, ce.Code, t0, time.Time{})
			}
			return nil, false, false, err
		}
	}
	sent = true
	m.Attempt()
	p.Sent()
	res, committed, err = exchange(call, a.req, into, c.o.maxResponse, c.responses, st.argScratch())
	code, msg := codes.OK, ""
	// seen is the outcome as the peer and the hedging estimate see it: a
	// response this Channel cut off for want of budget is a cut-off, which
	// says nothing against the peer (other peers' responses may hold the
	// budget).
	seen := code
	if err != nil {
		code, msg = classify(err)
		seen = code
		if errors.Is(err, ErrResponseBudget) {
			seen = codes.Cancelled
		}
	}
	if code == codes.Busy && isDeadlineRefusal(msg) {
		seen = codes.Timeout // refused for its deadline: says nothing of the server's load (ttl.go)
	}
	// The end, read as the time since t0: on the real clock that is one
	// read of the monotonic clock, where Now reads the wall clock too, and
	// the time it gives has the monotonic reading Now's would (its wall
	// reading is t0's moved on by as much).
	now := t0.Add(c.o.clock.Since(t0))
	if seen == codes.Busy {
		// It throttles the calls of this class and below to the peer, and
		// those of the class it says the server refuses, if any.
		pb, refusing := busyHints(msg)
		p.EndBusy(now, now.Sub(t0), st.class, pb, refusing)
	} else {
		p.End(now, now.Sub(t0), seen)
	}
	c.observeFirst(st, n, seen, t0, now)
	if res != nil {
		res.end = now
		st.hold(res)
	}
	if err != nil {
		m.AttemptFailed(code.String())
		return nil, true, committed, &CallError{Service: a.service, Method: a.method, Code: code, Message: msg, Peer: p.HostPort(), Err: err}
	}
	res.Peer = p.HostPort()
	return res, true, false, nil
}

// observeFirst tells adaptive hedging how attempt n, begun at t0, ended at
// now (read here if zero, and only if needed) with code. It learns from
// first attempts only (hedgeexec.Estimator says why not hedges). One cancelled
// because a hedge won or its caller gave up, or cut off by the deadline,
// is a cut-off, whether or not it was sent: its latency, which counts from
// t0 and includes BeginCall, is known only to exceed its time so far.
//
// The method's expected latency (st.pol.low, for deadline checks) learns
// from the same observations.
func (c *Channel) observeFirst(st *callState, n int, code codes.Code, t0, now time.Time) {
	est, low := st.pol.est, st.pol.low
	if (est == nil && low == nil) || n != 0 {
		return
	}
	if now.IsZero() {
		now = c.o.clock.Now()
	}
	switch code {
	case codes.OK:
		if est != nil {
			est.Observe(now.Sub(t0))
		}
		if low != nil {
			low.Observe(now.Sub(t0))
		}
	case codes.Cancelled, codes.Timeout:
		if est != nil {
			est.ObserveCensored(now.Sub(t0))
		}
		if low != nil {
			low.ObserveCensored(now.Sub(t0))
		}
	}
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
		spec := attemptSpec{service: a.service, method: a.method, req: at.Request, tch: a.tch}
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
// the rare path of attempt. p's claim on the attempt (see
// callState.choose) is given back, as is that of each further peer whose
// BeginCall fails. A connection that closed under the attempt sent
// nothing: the peer is reported lost (it leaves choice until its
// connector has reconnected) and the attempt begins on another peer at
// once, or on the same one once it is Ready again, at most as many times
// as the list has peers, so an attempt never loops on dead connections.
// Up to maxExcused closes do not count: a peer's that had just left the
// list (its connection closing with it), a peer's that is being connected
// again (its server asked the connection to drain, or it closed), and a
// peer's whose server said it is leaving. Any other error (the deadline
// is reached, or tchannel-go refused the call itself) ends the attempt.
// It returns the peer and call that began, or a *CallError.
func (c *Channel) beginElsewhere(ctx, sctx context.Context, st *callState, a *attemptSpec, as *attemptSpan,
	p *peerlist.Peer, t0 time.Time, err error) (*peerlist.Peer, *tchannel.OutboundCall, time.Time, error) {
	excused := 0
	for unsent := 1; ; unsent++ {
		p.Unclaim() // its attempt was not sent
		var se tchannel.SystemError
		if errors.As(err, &se) || ctx.Err() != nil {
			code, msg := classify(err)
			return nil, nil, t0, &CallError{Service: a.service, Method: a.method, Code: code, Message: msg, Err: err}
		}
		// The connection closed under us: nothing left this process.
		st.pol.m.Unsent()
		p.Lost()
		// A peer that left the list (discovery removed it) closed its
		// connection on its way out, one being connected again will be
		// chosen once it is Ready, and one whose server said it is leaving
		// closed its connection for that (the next choice says so, as
		// every call's does once all peers are leaving): none says the
		// call cannot be sent, so up to a few such do not count against
		// the bound.
		if s := p.State(); (st.l.Get(p.HostPort()) != p || s == peer.Idle || s == peer.Connecting || leaving(p, s)) && excused < maxExcused {
			excused++
		}
		if unsent-excused >= len(st.l.Peers()) {
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
		if call, err = p.TChannel().BeginCall(sctx, a.service, a.method, a.options(st)); err == nil {
			return p, call, t0, nil
		}
	}
}

// leaving reports whether p, in state s, is out of choice because its
// server said it is leaving.
func leaving(p *peerlist.Peer, s peer.State) bool {
	if s != peer.TransientFailure {
		return false
	}
	f := p.LastFailure()
	return f != nil && errors.Is(f.Err, peer.ErrPeerLeaving)
}

// maxExcused bounds the unsent attempts of one attempt that beginElsewhere
// does not count (see there).
const maxExcused = 4

// Call options per format, shared by every call that sets no transport
// header (see callOptions.transportFor): tchannel-go only reads them (as
// it does its own defaults), and a fresh one per attempt would cost an
// allocation.
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
	tch             *tchannel.CallOptions // a retry's own, marked (nil: the call's)
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

// exchange writes the request's arguments and reads the response's, at
// most maxResponse bytes of them, taking what they hold past their first
// bytes from budget (nil: none). A response read whole keeps its share in
// res.held, for the call to give back; a failure gives it back at once. A
// response refused budget is committed: the server answered, and another
// attempt would only take budget again. scratch, when not nil, is where
// the arguments are read first (see argReading.read).
func exchange(call *tchannel.OutboundCall, req *Request, res *Response, maxResponse int64, budget *responseBudget, scratch *[firstArgCap]byte) (_ *Response, committed bool, _ error) {
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
	rd := argReading{left: maxResponse, budget: budget, scratch: scratch}
	if err := rd.read(resp.Arg2Reader, &res.Arg2); err != nil {
		rd.release()
		return nil, errors.Is(err, ErrResponseBudget), err
	}
	committed = true // the response has reached us: no retry after this
	res.AppError = resp.ApplicationError()
	if err := rd.read(resp.Arg3Reader, &res.Arg3); err != nil {
		rd.release()
		return nil, committed, err
	}
	if req.Format != tchannel.Raw {
		h, err := decodeHeaders(req.Format, res.Arg2)
		if err != nil {
			rd.release()
			return nil, committed, err
		}
		res.Headers = h
	}
	res.held = rd.held
	return res, false, nil
}

// argReading is the reading of one response's arguments: left is how many
// more bytes they may have (WithMaxResponseSize), held the budget they
// took (WithResponseBudget; none if budget is nil), scratch the buffer
// they are read into first (nil: none).
type argReading struct {
	left    int64
	held    int64
	budget  *responseBudget
	scratch *[firstArgCap]byte
}

// abandon stops reading a response whose argument r, opened by open, has
// more bytes than the Channel will read. Closing r early leaves
// tchannel-go's exchange for the call in place, and the connection's
// reader, which hands each exchange its frames in order through a small
// buffer, would wait for this call to take the rest until its deadline,
// holding up every other response on the connection. Asking for the
// argument again fails on the reader's state, and tchannel-go then shuts
// the exchange down: the rest of the response is dropped as it comes.
func abandon(r tchannel.ArgReader, open func() (tchannel.ArgReader, error)) {
	r.Close()
	if r, err := open(); err == nil { // cannot happen: the reader has moved past it
		r.Close()
	}
}

// release gives back the budget the arguments took.
func (rd *argReading) release() {
	if rd.held != 0 {
		rd.budget.release(rd.held)
		rd.held = 0
	}
}

// read reads an argument of a response into *dst: at most rd.left bytes,
// which it lowers by what it read. A longer argument is an error, found
// once rd.left+1 bytes have come, not after the whole of it: a peer cannot
// make the Channel buffer more than its limit. Past its first firstArgCap
// bytes, the argument's buffer grows only with budget reserved first: a
// growth the budget refuses ends the read with an error wrapping
// ErrResponseBudget. (A request's arguments are read by the server side's
// readArg, which answers.)
func (rd *argReading) read(open func() (tchannel.ArgReader, error), dst *[]byte) error {
	r, err := open()
	if err != nil {
		return err
	}
	// io.ReadAll's loop, asking for one byte past the limit at most (an
	// io.LimitReader would cost an allocation per argument), and growing
	// the buffer itself, so that budget is taken before memory is. The
	// first firstArgCap bytes go to the scratch buffer, if there is one:
	// an argument that fits is then copied into a buffer of its own size,
	// where a fresh one would allocate and clear firstArgCap bytes for the
	// few most arguments have.
	var sc, b []byte
	if rd.scratch != nil {
		sc = rd.scratch[:]
		b = sc[:0]
	} else {
		b = make([]byte, 0, firstArgCap)
	}
	for {
		if int64(len(b)) > rd.left {
			abandon(r, open)
			return errResponseTooLarge
		}
		if len(b) == cap(b) {
			c := int64(cap(b))
			grow := nextArgCap(c, rd.left+1) - c
			if rd.budget != nil {
				if !rd.budget.reserve(grow) {
					abandon(r, open)
					return rd.budget.spent(grow)
				}
				rd.held += grow
			}
			nb := make([]byte, len(b), c+grow)
			copy(nb, b)
			b = nb
		}
		room := min(int64(cap(b)-len(b)), rd.left+1-int64(len(b)))
		n, err := r.Read(b[len(b) : len(b)+int(room)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			r.Close()
			return err
		}
	}
	rd.left -= int64(len(b)) // read to the end: nothing is left
	// The scratch buffer is the call's; the argument is the caller's.
	*dst = ownedArg(b, sc)
	return r.Close()
}
