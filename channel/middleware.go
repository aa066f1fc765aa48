package channel

import (
	"context"
	"fmt"

	"github.com/uber/tchannel-go"
)

// Invoker runs an outbound call: what a CallMiddleware wraps (the rest of
// the chain, then the pipeline: lease gate, pacing, attempts).
type Invoker func(ctx context.Context, service, method string, req *Request) (*Response, error)

// CallMiddleware wraps every outbound call once, whatever its attempts,
// before the lease gate: logging, metrics of one's own, a deadline policy,
// a header every attempt carries. It calls next to go on, possibly with
// another context or request (never modify req: build another, for
// example with Request.WithHeader), or returns without calling it to fail
// the call; an error it returns that is not a *CallError is reported as a
// *CallError with code UNEXPECTED wrapping it. Middlewares given to
// WithCallMiddleware run in order, the first outermost, as grpc-go's
// chained interceptors do.
type CallMiddleware func(ctx context.Context, service, method string, req *Request, next Invoker) (*Response, error)

// Attempt is one attempt of an outbound call, as an AttemptMiddleware
// sees it.
type Attempt struct {
	Service, Method string
	// Number counts the attempts made before this one: 0 for the first,
	// as the attempt header (retry.AttemptsHeader) says.
	Number int
	// Request is what this attempt sends. A middleware replaces it (never
	// modifies it: it is shared by the call's attempts) to change one
	// attempt, for example with Request.WithHeader.
	Request *Request
}

// AttemptInvoker sends an attempt: what an AttemptMiddleware wraps. It
// chooses the peer, sends a.Request and returns the response, or a
// *CallError (its Peer says where the attempt went).
type AttemptInvoker func(ctx context.Context, a *Attempt) (*Response, error)

// AttemptMiddleware wraps every attempt of an outbound call, retries and
// hedges included, before its peer is chosen: a per-attempt header (a
// signature, a token fresh for each attempt), per-attempt logging. It calls
// next to send the attempt. An error it returns without calling next fails
// the attempt in this process (nothing is sent, and no further attempt is
// made); one it returns after next succeeded fails the attempt after its
// response arrived (no further attempt either). Errors that are not
// *CallError are reported as *CallError with code UNEXPECTED. Middlewares
// given to WithAttemptMiddleware run in order, the first outermost.
type AttemptMiddleware func(ctx context.Context, a *Attempt, next AttemptInvoker) (*Response, error)

// Inbound is an inbound call, as an InboundMiddleware sees it: after the
// server guard admitted it and its arguments were read (for Thrift: its
// headers, and its body whole within the size limit; the body is decoded
// inside next, so a malformed body, or one declaring a length over the
// limit, is refused from within next), before the handler.
type Inbound struct {
	// Caller is the calling service's name (TChannel's transport header
	// "cn"; a Sluice client sets it with channel.WithCallerName). Method is
	// the TChannel method name: "Service::method" for Thrift.
	Caller, Method string
	// ShardKey, RoutingKey and RoutingDelegate are the call's TChannel
	// transport headers "sk", "rk" and "rd" ("" when absent), as
	// tchannel.InboundCall reports them; a Sluice client sets them with
	// WithShardKey, WithRoutingKey and WithRoutingDelegate.
	ShardKey, RoutingKey, RoutingDelegate string
	// Format is the call's arg scheme: raw, json or thrift.
	Format tchannel.Format
	// Headers are a JSON or Thrift call's application headers (nil for a
	// raw call). Do not modify them.
	Headers map[string]string
	// Arg2 is a raw call's arg2 (nil for JSON and Thrift).
	Arg2 []byte
	// TLS is the TLS of the connection the call came on (see
	// WithServerTLS), nil for a plaintext one: the peer's certificate
	// identity, and whether it was verified, worked out once per
	// connection and shared by its calls (do not modify it). A plaintext
	// call pays nothing for it. PeerIdentity reads the same from a
	// handler's context.
	TLS *TLSInfo
}

// InboundMiddleware wraps every handler of the Channel's server side
// registered with RegisterRaw, RegisterJSON or package thrift's NewServer:
// authentication, logging, metrics of one's own. It runs after the server
// guard (shedding, size limits, declining while closing) and before the
// handler, which next runs with the context next is given (so a middleware
// can add values for the handler; for JSON and Thrift the handler's context
// shares the request and response headers of the middleware's when it
// derives from it). next may be called more than once: each call runs the
// handler again, and the last result is answered.
//
// The error the chain returns is answered as if the handler had returned
// it: an error made with Busy, Declined or tchannel.NewSystemError
// (wrapped or not) answers with its code; any other is an application
// error for JSON handlers and UNEXPECTED for raw and Thrift ones (as an
// undeclared error of a Thrift handler: only the handler answers a declared
// exception). A middleware that returns nil without calling next answers
// an empty response: empty arg2 and arg3 for a raw call, the empty object
// {} for a JSON call; a Thrift call cannot be answered without the
// handler's result and gets UNEXPECTED.
//
// Middlewares given to WithInboundMiddleware run in order, the first
// outermost. The Thrift meta service (health checks) is not wrapped.
// (*Channel).InboundMiddleware returns the chain, for handlers registered
// through Registrar.
type InboundMiddleware func(ctx context.Context, in *Inbound, next func(ctx context.Context) error) error

// WithCallMiddleware adds middlewares that wrap every outbound call (see
// CallMiddleware). Without any, a call pays nothing for the feature.
func WithCallMiddleware(mw ...CallMiddleware) Option {
	return func(o *options) { o.callMW = append(o.callMW, mw...) }
}

// WithAttemptMiddleware adds middlewares that wrap every attempt of every
// outbound call (see AttemptMiddleware).
func WithAttemptMiddleware(mw ...AttemptMiddleware) Option {
	return func(o *options) { o.attemptMW = append(o.attemptMW, mw...) }
}

// WithInboundMiddleware adds middlewares that wrap every handler of the
// Channel's server side (see InboundMiddleware).
func WithInboundMiddleware(mw ...InboundMiddleware) Option {
	return func(o *options) { o.inboundMW = append(o.inboundMW, mw...) }
}

// validateMiddleware reports a nil middleware, by its position.
func validateMiddleware(o *options) error {
	for i, mw := range o.callMW {
		if mw == nil {
			return fmt.Errorf("channel: WithCallMiddleware: middleware %d is nil", i)
		}
	}
	for i, mw := range o.attemptMW {
		if mw == nil {
			return fmt.Errorf("channel: WithAttemptMiddleware: middleware %d is nil", i)
		}
	}
	for i, mw := range o.inboundMW {
		if mw == nil {
			return fmt.Errorf("channel: WithInboundMiddleware: middleware %d is nil", i)
		}
	}
	return nil
}

// chainCalls returns the invoker that runs mws around last, the first
// outermost.
func chainCalls(mws []CallMiddleware, last Invoker) Invoker {
	next := last
	for i := len(mws) - 1; i >= 0; i-- {
		mw, inner := mws[i], next
		next = func(ctx context.Context, service, method string, req *Request) (*Response, error) {
			return mw(ctx, service, method, req, inner)
		}
	}
	return next
}

// chainAttempts returns the attempt invoker that runs mws around last, the
// first outermost.
func chainAttempts(mws []AttemptMiddleware, last AttemptInvoker) AttemptInvoker {
	next := last
	for i := len(mws) - 1; i >= 0; i-- {
		mw, inner := mws[i], next
		next = func(ctx context.Context, a *Attempt) (*Response, error) { return mw(ctx, a, inner) }
	}
	return next
}

// inboundOf returns the Inbound of call, a request of format f with the
// application headers h, as the Channel's inbound middleware sees it: for
// servers that run the middleware themselves (package thrift's).
func inboundOf(call *tchannel.InboundCall, f tchannel.Format, h map[string]string) *Inbound {
	return &Inbound{Caller: call.CallerName(), Method: call.MethodString(), Format: f, Headers: h,
		ShardKey: call.ShardKey(), RoutingKey: call.RoutingKey(), RoutingDelegate: routingDelegateOf(call),
		TLS: tlsInfoOf(call.Connection())}
}

// chainInbound returns a function that runs mws around handler, the first
// outermost, for the call in.
func chainInbound(mws []InboundMiddleware, in *Inbound, handler func(ctx context.Context) error) func(ctx context.Context) error {
	next := handler
	for i := len(mws) - 1; i >= 0; i-- {
		mw, inner := mws[i], next
		next = func(ctx context.Context) error { return mw(ctx, in, inner) }
	}
	return next
}
