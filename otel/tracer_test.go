package otel

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/opentracing/opentracing-go"
	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/examples/keyvalue/gen-go/keyvalue"
	tjson "github.com/uber/tchannel-go/json"
	tthrift "github.com/uber/tchannel-go/thrift"
	"go.opentelemetry.io/otel/attribute"
	otbridge "go.opentelemetry.io/otel/bridge/opentracing"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/sluice-rpc/sluice/thrift"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// process is one traced program of a test: its own provider and exporter,
// as separate processes would have.
type process struct {
	tp  *sdktrace.TracerProvider
	exp *tracetest.InMemoryExporter
}

func newProcess(t *testing.T) process {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return process{tp: tp, exp: exp}
}

// spans waits until the process has recorded n spans and returns them.
func (p process) spans(t *testing.T, what string, n int) tracetest.SpanStubs {
	t.Helper()
	var got tracetest.SpanStubs
	testwait.Until(t, strconv.Itoa(n)+" spans of "+what, func() bool {
		got = p.exp.GetSpans()
		return len(got) >= n
	})
	if len(got) != n {
		t.Fatalf("%s recorded %d spans, want %d: %v", what, len(got), n, names(got))
	}
	return got
}

// bridge returns OpenTelemetry's opentracing bridge as a plain tchannel-go
// program would set it up on its own: nothing of this package.
func (p process) bridge(name string) *otbridge.BridgeTracer {
	b := otbridge.NewBridgeTracer()
	b.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	b.SetOpenTelemetryTracer(p.tp.Tracer(name))
	return b
}

// tracer returns this package's Tracer on the process's provider.
func (p process) tracer(t *testing.T) *Tracer {
	t.Helper()
	tr, err := NewTracer(p.tp)
	if err != nil {
		t.Fatalf("NewTracer: %v", err)
	}
	return tr
}

func names(s tracetest.SpanStubs) []string {
	out := make([]string, len(s))
	for i, sp := range s {
		out[i] = sp.Name + "/" + sp.SpanKind.String()
	}
	return out
}

// find returns the one span of kind named name.
func find(t *testing.T, s tracetest.SpanStubs, name string, kind trace.SpanKind) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, sp := range s {
		if sp.Name == name && sp.SpanKind == kind {
			found = append(found, sp)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans %q of kind %v, want 1, among %v", len(found), name, kind, names(s))
	}
	return found[0]
}

// wantAttrs fails the test unless sp has every attribute of want.
func wantAttrs(t *testing.T, sp tracetest.SpanStub, want ...attribute.KeyValue) {
	t.Helper()
	have := map[attribute.Key]attribute.Value{}
	for _, a := range sp.Attributes {
		have[a.Key] = a.Value
	}
	for _, w := range want {
		if got, ok := have[w.Key]; !ok || got != w.Value {
			t.Errorf("span %s (%v): %s = %v (present %v), want %v", sp.Name, sp.SpanKind, w.Key, got.String(), ok, w.Value.String())
		}
	}
}

// wantChild fails the test unless child's parent is parent, in its trace.
func wantChild(t *testing.T, what string, child, parent tracetest.SpanStub) {
	t.Helper()
	if child.Parent.TraceID() != parent.SpanContext.TraceID() || child.Parent.SpanID() != parent.SpanContext.SpanID() {
		t.Errorf("%s: parent %s/%s, want %s/%s", what, child.Parent.TraceID(), child.Parent.SpanID(),
			parent.SpanContext.TraceID(), parent.SpanContext.SpanID())
	}
}

func ctxTimeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func listen(t *testing.T, ch interface{ ListenAndServe(string) error }) {
	t.Helper()
	if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatalf("ListenAndServe: %v", err)
	}
}

// hop is one encoding's three programs: a plain tchannel-go server of
// service "backend", a Sluice server of service "front" whose handler
// calls the backend with its context, and a plain tchannel-go client's
// call of the front.
type hop struct {
	method string
	// backend registers the plain server's handler of method.
	backend func(t *testing.T, ch *tchannel.Channel)
	// front registers the Sluice server's handler of method: it passes its
	// context to seen, then calls method on backend with it.
	front func(t *testing.T, ch *channel.Channel, backend *channel.Client, seen func(context.Context))
	// call calls method on the front at hostPort from ch with ctx.
	call func(ctx context.Context, ch *tchannel.Channel, hostPort string) error
}

type kvReq struct{ Key string }
type kvRes struct{ Value string }

var jsonHop = hop{
	method: "get",
	backend: func(t *testing.T, ch *tchannel.Channel) {
		if err := tjson.Register(ch, tjson.Handlers{"get": func(ctx tjson.Context, req *kvReq) (*kvRes, error) {
			return &kvRes{Value: "v-" + req.Key}, nil
		}}, nil); err != nil {
			t.Fatalf("tjson.Register: %v", err)
		}
	},
	front: func(t *testing.T, ch *channel.Channel, backend *channel.Client, seen func(context.Context)) {
		if err := ch.RegisterJSON(map[string]any{"get": func(ctx tjson.Context, req *kvReq) (*kvRes, error) {
			seen(ctx)
			var res kvRes
			err := backend.CallJSON(ctx, "get", req, &res)
			return &res, err
		}}); err != nil {
			t.Fatalf("RegisterJSON: %v", err)
		}
	},
	call: func(ctx context.Context, ch *tchannel.Channel, hostPort string) error {
		var res kvRes
		return tjson.NewClient(ch, "front", &tjson.ClientOptions{HostPort: hostPort}).Call(tjson.Wrap(ctx), "get", &kvReq{Key: "k"}, &res)
	},
}

// kv is a KeyValue handler whose Get answers with get.
type kv struct {
	get func(ctx tthrift.Context, key string) (string, error)
}

func (h kv) Get(ctx tthrift.Context, key string) (string, error) { return h.get(ctx, key) }
func (kv) Set(tthrift.Context, string, string) error             { return nil }
func (kv) HealthCheck(tthrift.Context) (string, error)           { return "OK", nil }

var thriftHop = hop{
	method: "KeyValue::Get",
	backend: func(t *testing.T, ch *tchannel.Channel) {
		tthrift.NewServer(ch).Register(keyvalue.NewTChanKeyValueServer(kv{get: func(ctx tthrift.Context, key string) (string, error) {
			return "v-" + key, nil
		}}))
	},
	front: func(t *testing.T, ch *channel.Channel, backend *channel.Client, seen func(context.Context)) {
		client := keyvalue.NewTChanKeyValueClient(thrift.NewClient(backend))
		thrift.NewServer(ch).Register(keyvalue.NewTChanKeyValueServer(kv{get: func(ctx tthrift.Context, key string) (string, error) {
			seen(ctx)
			return client.Get(ctx, key)
		}}))
	},
	call: func(ctx context.Context, ch *tchannel.Channel, hostPort string) error {
		client := keyvalue.NewTChanKeyValueClient(tthrift.NewClient(ch, "front", &tthrift.ClientOptions{HostPort: hostPort}))
		_, err := client.Get(tthrift.Wrap(ctx), "k")
		return err
	},
}

// A trace a plain tchannel-go client starts with OpenTelemetry's bridge
// continues through a Sluice server traced by this package to a plain
// tchannel-go server with the bridge: one trace, each span the child of the
// one before, of the right kinds, with OpenTelemetry's RPC attributes on
// the spans this package records.
func TestTraceContinuesThroughSluice(t *testing.T) {
	for _, tc := range []struct {
		name string
		hop  hop
	}{{"json", jsonHop}, {"thrift", thriftHop}} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.hop
			caller, front, backend := newProcess(t), newProcess(t), newProcess(t)

			bch, err := tchannel.NewChannel("backend", &tchannel.ChannelOptions{Tracer: backend.bridge("backend")})
			if err != nil {
				t.Fatalf("tchannel.NewChannel: %v", err)
			}
			defer bch.Close()
			h.backend(t, bch)
			listen(t, bch)

			fch, err := channel.New("front", channel.WithTChannelOptions(tchannel.ChannelOptions{Tracer: front.tracer(t)}))
			if err != nil {
				t.Fatalf("channel.New: %v", err)
			}
			defer fch.Close()
			bcl, err := fch.NewClient("backend", channel.WithMethods(h.method))
			if err != nil {
				t.Fatalf("NewClient: %v", err)
			}
			if err := bcl.AddPeer(bch.PeerInfo().HostPort); err != nil {
				t.Fatalf("AddPeer: %v", err)
			}
			var (
				mu      sync.Mutex
				handler trace.SpanContext // what OpenTelemetry's API sees in the handler
			)
			h.front(t, fch, bcl, func(ctx context.Context) {
				mu.Lock()
				handler = trace.SpanContextFromContext(ctx)
				mu.Unlock()
			})
			listen(t, fch)

			cb := caller.bridge("caller")
			cch, err := tchannel.NewChannel("caller", &tchannel.ChannelOptions{Tracer: cb})
			if err != nil {
				t.Fatalf("tchannel.NewChannel: %v", err)
			}
			defer cch.Close()
			root := cb.StartSpan("request")
			if err := h.call(opentracing.ContextWithSpan(ctxTimeout(t), root), cch, fch.HostPort()); err != nil {
				t.Fatalf("call: %v", err)
			}
			root.Finish()

			cs := caller.spans(t, "the plain client", 2)
			fs := front.spans(t, "the Sluice server", 3)
			bs := backend.spans(t, "the plain server", 1)

			request := find(t, cs, "request", trace.SpanKindInternal)
			out := find(t, cs, h.method, trace.SpanKindInternal) // tchannel-go's client span (see the package doc)
			served := find(t, fs, h.method, trace.SpanKindServer)
			// Two client spans: the call's, under the server's, and the
			// attempt's, under the call's.
			var call, attempt tracetest.SpanStub
			for _, sp := range fs {
				if sp.SpanKind != trace.SpanKindClient || sp.Name != h.method {
					continue
				}
				if sp.Parent.SpanID() == served.SpanContext.SpanID() {
					call = sp
				} else {
					attempt = sp
				}
			}
			if !call.SpanContext.IsValid() || !attempt.SpanContext.IsValid() {
				t.Fatalf("want a call span under the server's and an attempt span, among %v", names(fs))
			}
			last := find(t, bs, h.method, trace.SpanKindServer)

			id := request.SpanContext.TraceID()
			for _, sp := range append(append(append(tracetest.SpanStubs{}, cs...), fs...), bs...) {
				if sp.SpanContext.TraceID() != id {
					t.Errorf("span %s (%v) is in trace %s, want %s", sp.Name, sp.SpanKind, sp.SpanContext.TraceID(), id)
				}
			}
			wantChild(t, "the plain client's span of the call", out, request)
			wantChild(t, "the Sluice server's span", served, out)
			if !served.Parent.IsRemote() {
				t.Errorf("the Sluice server's span's parent is not remote")
			}
			wantChild(t, "the Sluice call's span", call, served)
			wantChild(t, "the attempt's span", attempt, call)
			wantChild(t, "the plain server's span", last, attempt)
			mu.Lock()
			if handler.SpanID() != served.SpanContext.SpanID() || handler.TraceID() != id {
				t.Errorf("OpenTelemetry's API sees span %s/%s in the handler, want the server's %s/%s",
					handler.TraceID(), handler.SpanID(), id, served.SpanContext.SpanID())
			}
			mu.Unlock()

			for _, sp := range fs {
				if sp.InstrumentationScope.Name != ScopeName {
					t.Errorf("span %s (%v) has scope %q, want %q", sp.Name, sp.SpanKind, sp.InstrumentationScope.Name, ScopeName)
				}
				if sp.Status.Code != codes.Unset {
					t.Errorf("span %s (%v) has status %v, want unset", sp.Name, sp.SpanKind, sp.Status.Code)
				}
			}
			system := attribute.String("rpc.system.name", "tchannel")
			method := attribute.String("rpc.method", h.method)
			wantAttrs(t, served, system, method)
			wantAttrs(t, call, system, method, attribute.String("service.peer.name", "backend"),
				attribute.String("peer.service", "backend"), attribute.String("component", "sluice"))
			host, port, _ := net.SplitHostPort(bch.PeerInfo().HostPort)
			portN, _ := strconv.Atoi(port)
			wantAttrs(t, attempt, system, method, attribute.String("server.address", host), attribute.Int("server.port", portN),
				attribute.Int(retry.AttemptsHeader, 0), attribute.String("peer.address", bch.PeerInfo().HostPort),
				attribute.String("peer.service", "backend"))
		})
	}
}

// A raw call carries no trace context: it is traced on the client, a call
// span and an attempt span, and the server's handler starts with no span,
// for opentracing and for OpenTelemetry's API alike.
func TestRawCallsCarryNoTraceContext(t *testing.T) {
	client, server := newProcess(t), newProcess(t)
	sch, err := channel.New("raw", channel.WithTChannelOptions(tchannel.ChannelOptions{Tracer: server.tracer(t)}))
	if err != nil {
		t.Fatalf("channel.New: %v", err)
	}
	defer sch.Close()
	seen := make(chan [2]bool, 1)
	if err := sch.RegisterRaw("echo", func(ctx context.Context, req *channel.RawRequest) (*channel.RawResponse, error) {
		seen <- [2]bool{opentracing.SpanFromContext(ctx) != nil, trace.SpanContextFromContext(ctx).IsValid()}
		return &channel.RawResponse{Arg3: req.Arg3}, nil
	}); err != nil {
		t.Fatalf("RegisterRaw: %v", err)
	}
	listen(t, sch)

	tr := client.tracer(t)
	cch, err := channel.New("client", channel.WithTChannelOptions(tchannel.ChannelOptions{Tracer: tr}))
	if err != nil {
		t.Fatalf("channel.New: %v", err)
	}
	defer cch.Close()
	cl, err := cch.NewClient("raw", channel.WithMethods("echo"))
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	if err := cl.AddPeer(sch.HostPort()); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}
	ctx, parent := tr.TracerProvider().Tracer("app").Start(ctxTimeout(t), "request")
	if _, err := cl.CallRaw(ctx, "echo", nil, []byte("hi")); err != nil {
		t.Fatalf("CallRaw: %v", err)
	}
	parent.End()

	if got := testwait.Recv(t, seen, "the raw handler's call"); got != [2]bool{} {
		t.Errorf("the raw handler's context has a span (opentracing's, OpenTelemetry's): %v, want none", got)
	}
	cs := client.spans(t, "the client", 3)
	request := find(t, cs, "request", trace.SpanKindInternal)
	for _, sp := range cs {
		if sp.SpanContext.TraceID() != request.SpanContext.TraceID() {
			t.Errorf("span %s (%v) is not in the request's trace", sp.Name, sp.SpanKind)
		}
		if sp.SpanKind == trace.SpanKindClient {
			wantAttrs(t, sp, attribute.String("rpc.system.name", "tchannel"), attribute.String("rpc.method", "echo"))
		}
	}
	if got := server.exp.GetSpans(); len(got) != 0 {
		t.Errorf("the raw server recorded spans %v, want none", names(got))
	}
}

// A span started with OpenTelemetry's API, from the Tracer's provider, is
// the parent of the Sluice calls made with its context; a call that fails
// has status Error, and so has its attempt.
func TestOpenTelemetrySpanIsTheCallsParent(t *testing.T) {
	p := newProcess(t)
	tr := p.tracer(t)
	sch, err := channel.New("svc", channel.WithTChannelOptions(tchannel.ChannelOptions{Tracer: tr}))
	if err != nil {
		t.Fatalf("channel.New: %v", err)
	}
	defer sch.Close()
	if err := sch.RegisterJSON(map[string]any{"get": func(ctx tjson.Context, req *kvReq) (*kvRes, error) {
		return &kvRes{Value: req.Key}, nil
	}}); err != nil {
		t.Fatalf("RegisterJSON: %v", err)
	}
	listen(t, sch)
	cch, err := channel.New("client", channel.WithTChannelOptions(tchannel.ChannelOptions{Tracer: tr}))
	if err != nil {
		t.Fatalf("channel.New: %v", err)
	}
	defer cch.Close()
	cl, err := cch.NewClient("svc", channel.WithMethods("get", "missing"))
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	if err := cl.AddPeer(sch.HostPort()); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}

	ctx, parent := tr.TracerProvider().Tracer("app").Start(ctxTimeout(t), "request")
	var res kvRes
	if err := cl.CallJSON(ctx, "get", &kvReq{Key: "k"}, &res); err != nil {
		t.Fatalf("CallJSON get: %v", err)
	}
	if err := cl.CallJSON(ctx, "missing", &kvReq{Key: "k"}, &res); err == nil {
		t.Fatalf("CallJSON missing: no error, want one")
	}
	parent.End()

	// request; get: call, attempt, server; missing: call, attempt (the
	// server answers BAD_REQUEST before any handler or span).
	s := p.spans(t, "the process", 6)
	request := find(t, s, "request", trace.SpanKindInternal)
	var calls int
	for _, sp := range s {
		if sp.SpanKind != trace.SpanKindClient || sp.Parent.SpanID() != request.SpanContext.SpanID() {
			continue
		}
		calls++
		wantChild(t, "the call's span", sp, request)
		wantAttrs(t, sp, attribute.String("service.peer.name", "svc"))
		if want := map[string]codes.Code{"get": codes.Unset, "missing": codes.Error}[sp.Name]; sp.Status.Code != want {
			t.Errorf("call span %s has status %v, want %v", sp.Name, sp.Status.Code, want)
		}
	}
	if calls != 2 {
		t.Errorf("%d client spans under the request's, want 2 (one per call), among %v", calls, names(s))
	}
	var failed int
	for _, sp := range s {
		if sp.Name == "missing" {
			failed++
			if sp.Status.Code != codes.Error {
				t.Errorf("span missing (%v) has status %v, want %v", sp.SpanKind, sp.Status.Code, codes.Error)
			}
		}
	}
	if failed != 2 {
		t.Errorf("%d spans of the failed call, want 2 (the call's and its attempt's), among %v", failed, names(s))
	}
}

func TestNewTracerRejectsNil(t *testing.T) {
	if _, err := NewTracer(nil); err == nil {
		t.Errorf("NewTracer(nil): no error, want one naming the TracerProvider")
	}
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	if _, err := NewTracer(tp, WithPropagator(nil)); err == nil {
		t.Errorf("NewTracer(tp, WithPropagator(nil)): no error, want one naming the propagator")
	}
}
