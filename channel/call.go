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

// Request is one call's payload, as every attempt of the call sends it.
// Front-ends (CallRaw, CallJSON, package thrift) build one; Call sends it.
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
	// answered.
	Attempts int
	Peer     string
}

// Call sends req to service's method through the pipeline and returns the
// one result: the response, or a *CallError. The raw, JSON and Thrift
// front-ends are built on it; use it directly to add another.
func (c *Channel) Call(ctx context.Context, service, method string, req *Request) (*Response, error) {
	switch req.Format {
	case tchannel.Raw, tchannel.JSON, tchannel.Thrift:
	default:
		return nil, fmt.Errorf("sluice: call %s::%s: format %q is not supported; use raw, json or thrift", service, method, req.Format)
	}
	return c.call(ctx, service, method, req)
}

// CallRaw calls service's method with raw arguments and returns the
// response. A response marked as an application error is returned with a nil
// error and AppError set.
func (c *Channel) CallRaw(ctx context.Context, service, method string, arg2, arg3 []byte) (*RawResponse, error) {
	res, err := c.call(ctx, service, method, &Request{Format: tchannel.Raw, Arg2: arg2, Arg3: arg3})
	if err != nil {
		return nil, err
	}
	return &RawResponse{Arg2: res.Arg2, Arg3: res.Arg3, AppError: res.AppError}, nil
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
	res, err := c.call(ctx, service, method, &Request{Format: tchannel.JSON, Headers: o.headers, Arg3: arg3})
	if err != nil {
		return err
	}
	if o.respHeaders != nil {
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

// call runs the pipeline: peer choice, the attempt, busy accounting, stats
// and spans. It returns one result.
func (c *Channel) call(ctx context.Context, service, method string, req *Request) (*Response, error) {
	m := c.rec.Method(service, method)
	start := c.o.clock.Now()
	if c.closed.Load() {
		return nil, c.fail(m, start, &CallError{Service: service, Method: method, Err: ErrClosed})
	}
	l, _ := c.peerList(service, false)
	if l == nil {
		return nil, c.fail(m, start, &CallError{Service: service, Method: method, Err: ErrNoPeers})
	}
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()

	span := noopSpan
	if c.tracing {
		span = c.o.tracer.StartSpan("sluice.call", opentracing.ChildOf(spanContext(ctx)), ext.SpanKindRPCClient)
		span.SetTag("service", service)
		span.SetTag("method", method)
		defer span.Finish()
		ctx = opentracing.ContextWithSpan(ctx, span)
	}

	a := &attemptSpec{service: service, method: method, req: req}
	res, p, err := c.attempt(ctx, l, m, a, 0, nil)
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
	res.Attempts = 1
	res.Peer = p.HostPort()
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
func (c *Channel) attempt(ctx context.Context, l *peer.List, m *stats.Method, a *attemptSpec, n int, exclude []*peer.Peer) (*Response, *peer.Peer, error) {
	p, err := l.Choose(exclude)
	if err != nil {
		return nil, nil, &CallError{Service: a.service, Method: a.method, Err: err}
	}
	span := noopSpan
	if c.tracing {
		span = c.o.tracer.StartSpan("sluice.attempt", opentracing.ChildOf(spanContext(ctx)))
		defer span.Finish()
		span.SetTag("peer", p.HostPort())
		span.SetTag("attempt", n)
		ctx = opentracing.ContextWithSpan(ctx, span)
	}

	fail := func(err error, sent bool) (*Response, *peer.Peer, error) {
		code, msg := classify(err)
		ext.Error.Set(span, true)
		span.SetTag("code", code.String())
		ce := &CallError{Service: a.service, Method: a.method, Code: code, Message: msg, Peer: p.HostPort(), Err: err}
		if !sent {
			return nil, nil, ce
		}
		return nil, p, ce
	}

	call, err := p.TChannel().BeginCall(ctx, a.service, a.method, &tchannel.CallOptions{Format: a.req.Format})
	if err != nil {
		return fail(err, false) // never left this process
	}
	m.Attempt()
	p.Begin()
	t0 := c.o.clock.Now()
	res, err := exchange(call, a.req)
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

// attemptSpec is what every attempt of one call sends.
type attemptSpec struct {
	service, method string
	req             *Request
}

// exchange writes the request's arguments and reads the response's.
func exchange(call *tchannel.OutboundCall, req *Request) (*Response, error) {
	if req.Format == tchannel.Raw {
		if err := tchannel.NewArgWriter(call.Arg2Writer()).Write(req.Arg2); err != nil {
			return nil, err
		}
	} else {
		h := tchannel.InjectOutboundSpan(call.Response(), req.Headers)
		arg2, err := encodeHeaders(req.Format, h)
		if err != nil {
			return nil, err
		}
		if err := tchannel.NewArgWriter(call.Arg2Writer()).Write(arg2); err != nil {
			return nil, err
		}
	}
	if err := tchannel.NewArgWriter(call.Arg3Writer()).Write(req.Arg3); err != nil {
		return nil, err
	}
	resp := call.Response()
	res := &Response{}
	if err := tchannel.NewArgReader(resp.Arg2Reader()).Read(&res.Arg2); err != nil {
		return nil, err
	}
	res.AppError = resp.ApplicationError()
	if err := tchannel.NewArgReader(resp.Arg3Reader()).Read(&res.Arg3); err != nil {
		return nil, err
	}
	if req.Format != tchannel.Raw {
		h, err := decodeHeaders(req.Format, res.Arg2)
		if err != nil {
			return nil, err
		}
		res.Headers = h
	}
	return res, nil
}
