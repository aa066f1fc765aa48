package otel_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/uber/tchannel-go"
	tjson "github.com/uber/tchannel-go/json"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/otel"
)

type greeting struct{ Name string }

// A Sluice channel traced with OpenTelemetry: a span started with
// OpenTelemetry's API is the parent of a call, which has a span of its own
// and one per attempt, with OpenTelemetry's RPC attributes. A program
// would give the SDK an OTLP exporter; this one keeps its spans in memory.
func Example() {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	tr, err := otel.NewTracer(tp)
	if err != nil {
		panic(err)
	}

	server, err := channel.New("greeter")
	if err != nil {
		panic(err)
	}
	defer server.Close()
	if err := server.RegisterJSON(map[string]any{"hello": func(ctx tjson.Context, g *greeting) (*greeting, error) {
		return &greeting{Name: "hello, " + g.Name}, nil
	}}); err != nil {
		panic(err)
	}
	if err := server.ListenAndServe("127.0.0.1:0"); err != nil {
		panic(err)
	}

	ch, err := channel.New("client", channel.WithTChannelOptions(tchannel.ChannelOptions{Tracer: tr}))
	if err != nil {
		panic(err)
	}
	defer ch.Close()
	greeter, err := ch.NewClient("greeter", channel.WithMethods("hello"))
	if err != nil {
		panic(err)
	}
	if err := greeter.AddPeer(server.HostPort()); err != nil {
		panic(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ctx, span := tr.TracerProvider().Tracer("example").Start(ctx, "request")
	var out greeting
	if err := greeter.CallJSON(ctx, "hello", &greeting{Name: "world"}, &out); err != nil {
		panic(err)
	}
	span.End()
	fmt.Println(out.Name)

	var lines []string
	for _, s := range exp.GetSpans() {
		var attrs []string
		for _, a := range s.Attributes {
			switch a.Key {
			case "rpc.system.name", "service.peer.name", "previous-rpc-attempts":
				attrs = append(attrs, fmt.Sprintf(" %s=%s", a.Key, a.Value.String()))
			}
		}
		sort.Strings(attrs)
		lines = append(lines, fmt.Sprint(s.Name, " ", s.SpanKind, strings.Join(attrs, "")))
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// hello, world
	// hello client previous-rpc-attempts=0 rpc.system.name=tchannel
	// hello client rpc.system.name=tchannel service.peer.name=greeter
	// request internal
}
