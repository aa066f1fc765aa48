package channel

import (
	"context"

	"github.com/opentracing/opentracing-go"
	"github.com/opentracing/opentracing-go/ext"
	"github.com/sluice-rpc/sluice/retry"
)

// Spans follow opentracing's semantic conventions. A call has one span,
// named after the method, of kind client, tagged with peer.service, and
// error when it fails. Each attempt sent on the wire has one child span:
// tchannel-go's own client span of the outbound call (named after the
// method, with span.kind, peer.service, peer.ipv4 or peer.hostname,
// peer.port, component and error, as tchannel-go tags it), to which Sluice
// adds peer.address and previous-rpc-attempts (the attempt's number, 0 for
// the first). So an attempt is traced once, and the servers' spans, plain
// tchannel-go's and Sluice's alike, are children of the attempt's. The
// span.kind of both, and the tags Sluice adds, are given when the span
// starts: a tracer that reads the kind only then (OpenTelemetry's
// opentracing bridge, which package github.com/sluice-rpc/sluice/otel
// builds on) records the right one.

// componentName is the component tag of call spans.
const componentName = "sluice"

// spanTracer is the tracer tchannel-go is given: the user's, except that
// the span tchannel-go starts for an attempt's outbound call, whose parent
// is an attemptSpan, becomes the attempt's span, tagged as such.
type spanTracer struct{ opentracing.Tracer }

func (t *spanTracer) StartSpan(name string, opts ...opentracing.StartSpanOption) opentracing.Span {
	var a *attemptSpan
	for i, o := range opts {
		r, ok := o.(opentracing.SpanReference)
		if !ok {
			continue
		}
		if ac, ok := r.ReferencedContext.(attemptContext); ok {
			if a == nil { // copy before the first change: the slice is the caller's
				opts = append(make([]opentracing.StartSpanOption, 0, len(opts)+1), opts...)
			}
			a = ac.a
			r.ReferencedContext = a.Span.Context()
			opts[i] = r
		}
	}
	if a != nil {
		// The attempt's tags go in at the start, its kind among them
		// (tchannel-go tags the kind only later): some tracers, such as
		// OpenTelemetry's opentracing bridge, take a span's kind, and
		// samplers its tags, from its start alone.
		opts = append(opts, opentracing.Tags{
			string(ext.SpanKind):    ext.SpanKindRPCClientEnum,
			retry.AttemptsHeader:    a.n, // the tag is named as the header is
			string(ext.PeerAddress): a.hostPort,
		})
	}
	return t.Tracer.StartSpan(name, opts...)
}

func (t *spanTracer) Inject(sc opentracing.SpanContext, format, carrier any) error {
	if ac, ok := sc.(attemptContext); ok {
		sc = ac.a.Span.Context()
	}
	return t.Tracer.Inject(sc, format, carrier)
}

// startCallSpan starts the span of a call to service's method, a child of
// the span in ctx if any, its tags given at the start (see StartSpan).
func (c *Channel) startCallSpan(ctx context.Context, service, method string) opentracing.Span {
	return c.o.tracer.StartSpan(method, opentracing.ChildOf(spanContext(ctx)), opentracing.Tags{
		string(ext.SpanKind):    ext.SpanKindRPCClientEnum,
		string(ext.PeerService): service,
		string(ext.Component):   componentName,
	})
}

// attemptSpan is what an attempt puts in the context it gives tchannel-go:
// the call's span, marked with the attempt's number and peer, so that
// spanTracer tags the span tchannel-go starts under it. It is never
// finished: the call's span is, by the call.
type attemptSpan struct {
	opentracing.Span // the call's
	tracer           *spanTracer
	n                int
	hostPort         string
}

func (a *attemptSpan) Context() opentracing.SpanContext { return attemptContext{a} }
func (a *attemptSpan) Tracer() opentracing.Tracer       { return a.tracer }

// attemptContext is an attemptSpan's SpanContext: the call span's, marked.
type attemptContext struct{ a *attemptSpan }

func (c attemptContext) ForeachBaggageItem(h func(k, v string) bool) {
	c.a.Span.Context().ForeachBaggageItem(h)
}
