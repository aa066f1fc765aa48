package otel

import (
	"errors"
	"net"
	"strconv"

	"github.com/opentracing/opentracing-go"
	"github.com/opentracing/opentracing-go/ext"
	otbridge "go.opentelemetry.io/otel/bridge/opentracing"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-rpc/sluice/retry"
)

// ScopeName is the instrumentation scope of the spans a Tracer records.
const ScopeName = "github.com/sluice-rpc/sluice/otel"

// System is the rpc.system.name of the spans of TChannel calls.
const System = "tchannel"

// Tracer is an opentracing.Tracer that records spans with OpenTelemetry:
// OpenTelemetry's opentracing bridge, to which it adds OpenTelemetry's RPC
// attributes on the spans of TChannel calls (the package doc says which).
// Give it to a Sluice channel (channel.WithTChannelOptions) or a plain
// tchannel-go one (tchannel.ChannelOptions.Tracer). It is safe for
// concurrent use.
type Tracer struct {
	bridge   *otbridge.BridgeTracer
	provider *otbridge.TracerProvider
}

var _ opentracing.Tracer = (*Tracer)(nil)

// Option configures NewTracer.
type Option func(*options)

type options struct {
	propagator propagation.TextMapPropagator
}

// WithPropagator sets how span contexts (and baggage) are written into and
// read from the application headers of JSON and Thrift calls. Default: W3C
// Trace Context and Baggage (propagation.TraceContext and
// propagation.Baggage), not OpenTelemetry's global propagator, which is a
// no-op unless a program sets one. Every hop of a trace must use the same.
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(o *options) { o.propagator = p }
}

// NewTracer returns a Tracer that records spans to tp, such as the SDK's
// *trace.TracerProvider or otel.GetTracerProvider(), under the scope
// ScopeName. It returns an error if tp or the propagator is nil.
func NewTracer(tp trace.TracerProvider, opts ...Option) (*Tracer, error) {
	if tp == nil {
		return nil, errors.New("otel: NewTracer: the TracerProvider is nil: pass the SDK's or otel.GetTracerProvider()")
	}
	o := options{propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})}
	for _, opt := range opts {
		opt(&o)
	}
	if o.propagator == nil {
		return nil, errors.New("otel: WithPropagator: the propagator is nil: leave the option out for W3C Trace Context and Baggage")
	}
	b := otbridge.NewBridgeTracer()
	b.SetTextMapPropagator(o.propagator)
	// The bridge's OpenTelemetry tracer comes from a provider of the
	// bridge's: its spans are put in contexts for opentracing too, and
	// a span started through opentracing is put in contexts for
	// OpenTelemetry's API when opentracing.ContextWithSpan is called.
	p := otbridge.NewTracerProvider(b, tp)
	b.SetOpenTelemetryTracer(p.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL)))
	return &Tracer{bridge: b, provider: p}, nil
}

// TracerProvider returns tp (NewTracer's) as seen through the bridge: a
// span started with one of its tracers is also put in its context as an
// opentracing span, so a Sluice call (or a tchannel-go one) made with that
// context is its child. Give it to code that traces with OpenTelemetry's
// API, or set it as the global provider (otel.SetTracerProvider).
func (t *Tracer) TracerProvider() trace.TracerProvider { return t.provider }

// StartSpan starts a span, as opentracing.Tracer's StartSpan does, adding
// OpenTelemetry's RPC attributes when it is the span of a TChannel call: a
// server's, a Sluice call's or a Sluice attempt's.
func (t *Tracer) StartSpan(name string, opts ...opentracing.StartSpanOption) opentracing.Span {
	var sso opentracing.StartSpanOptions
	for _, o := range opts {
		o.Apply(&sso)
	}
	if tags := rpcTags(name, sso.Tags); tags != nil {
		opts = append(opts[:len(opts):len(opts)], tags) // never into the caller's array
	}
	return t.bridge.StartSpan(name, opts...)
}

// Inject writes sc into carrier, as the bridge does: the TextMap and
// HTTPHeaders formats, with the propagator (WithPropagator).
func (t *Tracer) Inject(sc opentracing.SpanContext, format, carrier any) error {
	return t.bridge.Inject(sc, format, carrier)
}

// Extract reads a span context from carrier, as the bridge does: the
// TextMap and HTTPHeaders formats, with the propagator (WithPropagator).
func (t *Tracer) Extract(format, carrier any) (opentracing.SpanContext, error) {
	return t.bridge.Extract(format, carrier)
}

// rpcTags returns the OpenTelemetry attributes, as start tags, of the span
// named name with start tags tags if it is the span of a TChannel call, or
// nil. A server span is tchannel-go's (kind server, named after the
// method); a call span is Sluice's (kind client, component sluice); an
// attempt span is tchannel-go's client span as Sluice starts it (kind
// client, with the attempt's number and peer).
func rpcTags(name string, tags map[string]any) opentracing.Tags {
	var out opentracing.Tags
	switch kind(tags[string(ext.SpanKind)]) {
	case ext.SpanKindRPCServerEnum:
		out = opentracing.Tags{string(semconv.RPCSystemNameKey): System}
	case ext.SpanKindRPCClientEnum:
		if _, attempt := tags[retry.AttemptsHeader]; attempt {
			out = opentracing.Tags{string(semconv.RPCSystemNameKey): System}
			if hp, ok := tags[string(ext.PeerAddress)].(string); ok {
				if host, port, err := net.SplitHostPort(hp); err == nil {
					out[string(semconv.ServerAddressKey)] = host
					if n, err := strconv.Atoi(port); err == nil {
						out[string(semconv.ServerPortKey)] = n
					}
				}
			}
		} else if tags[string(ext.Component)] == sluiceComponent {
			out = opentracing.Tags{string(semconv.RPCSystemNameKey): System}
			if s, ok := tags[string(ext.PeerService)].(string); ok {
				out[string(semconv.ServicePeerNameKey)] = s
			}
		}
	}
	if out != nil && name != "" {
		out[string(semconv.RPCMethodKey)] = name
	}
	return out
}

// sluiceComponent is the component tag of Sluice's call spans.
const sluiceComponent = "sluice"

// kind returns a span.kind tag's value as an enum: tracers' callers give
// it typed or as a string.
func kind(v any) ext.SpanKindEnum {
	switch k := v.(type) {
	case ext.SpanKindEnum:
		return k
	case string:
		return ext.SpanKindEnum(k)
	}
	return ""
}
