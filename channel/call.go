package channel

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/opentracing/opentracing-go"
	"github.com/opentracing/opentracing-go/ext"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/peer"
	"github.com/sluice-rpc/sluice/stats"
	"github.com/uber/tchannel-go"
)

// CallOption configures one call.
type CallOption func(*callOptions)

type callOptions struct {
	headers     map[string]string
	respHeaders *map[string]string
}

// WithHeaders sends application headers with a JSON call (TChannel's arg2).
func WithHeaders(h map[string]string) CallOption {
	return func(o *callOptions) { o.headers = h }
}

// ResponseHeaders stores the JSON response's application headers in *dst.
func ResponseHeaders(dst *map[string]string) CallOption {
	return func(o *callOptions) { o.respHeaders = dst }
}

// request is one call as every attempt sends it.
type request struct {
	service, method string
	format          tchannel.Format
	arg2            []byte            // raw calls
	headers         map[string]string // JSON calls: encoded per attempt, with tracing headers
	arg3            []byte
}

// response is what the successful attempt read.
type response struct {
	arg2, arg3 []byte
	appErr     bool
}

// CallRaw calls service's method with raw arguments and returns the
// response. A response marked as an application error is returned with a nil
// error and AppError set.
func (c *Channel) CallRaw(ctx context.Context, service, method string, arg2, arg3 []byte) (*RawResponse, error) {
	res, err := c.call(ctx, &request{service: service, method: method, format: tchannel.Raw, arg2: arg2, arg3: arg3})
	if err != nil {
		return nil, err
	}
	return &RawResponse{Arg2: res.arg2, Arg3: res.arg3, AppError: res.appErr}, nil
}

// CallJSON calls service's method with req encoded as JSON and decodes the
// response into resp. An application error the handler returned comes back
// as *ApplicationError; a failed call as *CallError.
func (c *Channel) CallJSON(ctx context.Context, service, method string, req, resp any, opts ...CallOption) error {
	var o callOptions
	for _, opt := range opts {
		opt(&o)
	}
	arg3, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("sluice: call %s::%s: cannot encode the request as JSON: %w", service, method, err)
	}
	headers := o.headers
	if headers == nil {
		headers = map[string]string{}
	}
	res, err := c.call(ctx, &request{service: service, method: method, format: tchannel.JSON, headers: headers, arg3: arg3})
	if err != nil {
		return err
	}
	if o.respHeaders != nil {
		var h map[string]string
		if len(res.arg2) > 0 {
			if err := json.Unmarshal(res.arg2, &h); err != nil {
				return fmt.Errorf("sluice: call %s::%s: response headers are not a JSON object: %w", service, method, err)
			}
		}
		*o.respHeaders = h
	}
	if res.appErr {
		ae := &ApplicationError{}
		if err := json.Unmarshal(res.arg3, ae); err != nil {
			return fmt.Errorf("sluice: call %s::%s: application error response is not JSON: %w", service, method, err)
		}
		return ae
	}
	if resp != nil {
		if err := json.Unmarshal(res.arg3, resp); err != nil {
			return fmt.Errorf("sluice: call %s::%s: cannot decode the JSON response: %w", service, method, err)
		}
	}
	return nil
}

// call runs the pipeline: peer choice, the attempt, busy accounting, stats
// and spans. It returns one result.
func (c *Channel) call(ctx context.Context, req *request) (*response, error) {
	m := c.rec.Method(req.service, req.method)
	start := c.o.clock.Now()
	if c.closed.Load() {
		return nil, c.fail(m, start, &CallError{Service: req.service, Method: req.method, Err: ErrClosed})
	}
	l, _ := c.peerList(req.service, false)
	if l == nil {
		return nil, c.fail(m, start, &CallError{Service: req.service, Method: req.method, Err: ErrNoPeers})
	}
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()

	span := noopSpan
	if c.tracing {
		span = c.o.tracer.StartSpan("sluice.call", opentracing.ChildOf(spanContext(ctx)), ext.SpanKindRPCClient)
		span.SetTag("service", req.service)
		span.SetTag("method", req.method)
		defer span.Finish()
		ctx = opentracing.ContextWithSpan(ctx, span)
	}

	res, p, err := c.attempt(ctx, l, m, req, 0, nil)
	if err != nil {
		ce := err.(*CallError)
		if p != nil {
			ce.Attempts = 1
		}
		ext.Error.Set(span, true)
		span.SetTag("code", ce.statsCode())
		return nil, c.fail(m, start, ce)
	}
	m.Call(c.o.clock.Now().Sub(start), "")
	return res, nil
}

func (c *Channel) fail(m *stats.Method, start time.Time, ce *CallError) error {
	m.Call(c.o.clock.Now().Sub(start), ce.statsCode())
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

// attempt sends req once, to a peer chosen outside exclude. It returns the
// peer it sent to (nil if it sent nothing) and a *CallError on failure.
func (c *Channel) attempt(ctx context.Context, l *peer.List, m *stats.Method, req *request, n int, exclude []*peer.Peer) (*response, *peer.Peer, error) {
	p, err := l.Choose(exclude)
	if err != nil {
		return nil, nil, &CallError{Service: req.service, Method: req.method, Err: err}
	}
	span := noopSpan
	if c.tracing {
		span = c.o.tracer.StartSpan("sluice.attempt", opentracing.ChildOf(spanContext(ctx)))
		defer span.Finish()
		span.SetTag("peer", p.HostPort())
		span.SetTag("attempt", n)
		ctx = opentracing.ContextWithSpan(ctx, span)
	}

	fail := func(err error, sent bool) (*response, *peer.Peer, error) {
		code, msg := classify(err)
		ext.Error.Set(span, true)
		span.SetTag("code", code.String())
		ce := &CallError{Service: req.service, Method: req.method, Code: code, Message: msg, Peer: p.HostPort(), Err: err}
		if !sent {
			return nil, nil, ce
		}
		return nil, p, ce
	}

	call, err := p.TChannel().BeginCall(ctx, req.service, req.method, &tchannel.CallOptions{Format: req.format})
	if err != nil {
		return fail(err, false) // never left this process
	}
	m.Attempt()
	p.Begin()
	t0 := c.o.clock.Now()
	res, err := exchange(call, req)
	code := codes.OK
	if err != nil {
		code, _ = classify(err)
	}
	now := c.o.clock.Now()
	p.End(now, now.Sub(t0), code == codes.Busy)
	if err != nil {
		return fail(err, true)
	}
	span.SetTag("code", codes.OK.String())
	return res, p, nil
}

// exchange writes the request's arguments and reads the response's.
func exchange(call *tchannel.OutboundCall, req *request) (*response, error) {
	if req.format == tchannel.JSON {
		h := tchannel.InjectOutboundSpan(call.Response(), req.headers)
		if err := tchannel.NewArgWriter(call.Arg2Writer()).WriteJSON(h); err != nil {
			return nil, err
		}
	} else if err := tchannel.NewArgWriter(call.Arg2Writer()).Write(req.arg2); err != nil {
		return nil, err
	}
	if err := tchannel.NewArgWriter(call.Arg3Writer()).Write(req.arg3); err != nil {
		return nil, err
	}
	resp := call.Response()
	res := &response{}
	if err := tchannel.NewArgReader(resp.Arg2Reader()).Read(&res.arg2); err != nil {
		return nil, err
	}
	res.appErr = resp.ApplicationError()
	if err := tchannel.NewArgReader(resp.Arg3Reader()).Read(&res.arg3); err != nil {
		return nil, err
	}
	return res, nil
}
