// Package otel traces Sluice and tchannel-go channels with OpenTelemetry.
//
// It lives in a module of its own, github.com/sluice-rpc/sluice/otel, so
// that a service which does not import it does not depend on OpenTelemetry.
//
// NewTracer returns a Tracer: an opentracing.Tracer, built on
// OpenTelemetry's opentracing bridge (go.opentelemetry.io/otel/bridge/opentracing),
// that records spans to an OpenTelemetry TracerProvider. A channel takes it
// where it takes any tracer, Sluice's through channel.WithTChannelOptions
// and a plain tchannel-go one through tchannel.ChannelOptions:
//
//	tr, err := otel.NewTracer(tp) // tp: the SDK's *trace.TracerProvider
//	ch, err := channel.New("svc", channel.WithTChannelOptions(tchannel.ChannelOptions{Tracer: tr}))
//
// So tracing works as it does with any opentracing tracer (package channel
// says which spans a call makes) and the trace context travels as
// tchannel-go carries it: a trace continues through Sluice and plain
// tchannel-go hops alike, and through plain tchannel-go services that use
// OpenTelemetry's bridge with the same propagator.
//
// # Spans
//
// A Sluice call has a span of kind CLIENT named after the method, and each
// attempt sent a child span of kind CLIENT (tchannel-go's span of the
// outbound call), whose context travels to the server; a server, Sluice or
// plain tchannel-go, starts a SERVER span under it. The Tracer adds
// OpenTelemetry's RPC attributes (semantic conventions v1.43.0, the RPC
// conventions' release candidate) when each of these spans starts:
// rpc.system.name "tchannel" and rpc.method, the TChannel method (the span's
// name, "Service::method" for Thrift); on a call span service.peer.name,
// the TChannel service called; on an attempt span server.address and
// server.port, the peer it was sent to. The opentracing tags Sluice and
// tchannel-go set stay, as attributes of the same names (peer.service,
// component, previous-rpc-attempts, peer.address, peer.port, peer.ipv4 or
// peer.hostname, as); a failed call's or attempt's span has status Error
// and an event with its error. Spans that a plain tchannel-go client
// starts have kind INTERNAL: tchannel-go gives a client span its kind after
// it starts, and the bridge reads the kind only at the start.
//
// # On the wire
//
// JSON and Thrift calls carry the span context in their application
// headers (arg2), as tchannel-go puts it there: each header the
// propagator writes, prefixed "$tracing$" ("$tracing$traceparent",
// "$tracing$tracestate", "$tracing$baggage" with the default propagator,
// W3C Trace Context and Baggage). Raw calls carry no trace context: they
// have no application headers, and the bridge cannot fill the call frame's
// tracing field (64-bit IDs, too short for OpenTelemetry's 128-bit trace
// IDs), so tchannel-go puts random IDs there. A raw call is traced on the
// client; the server's handler starts with no span.
//
// # OpenTelemetry's API beside opentracing's
//
// A handler's context holds the server's span for OpenTelemetry's API
// too (trace.SpanFromContext). For the other way round, a span started
// with OpenTelemetry's API to be the parent of a Sluice call, take the
// tracer from Tracer.TracerProvider (or set it as the global provider):
// its spans are put in the context for opentracing as well, where Sluice
// looks for a call's parent.
package otel
