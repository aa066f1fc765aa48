package channel

import (
	"sync/atomic"
	"testing"

	"github.com/opentracing/opentracing-go"
	"github.com/opentracing/opentracing-go/ext"
	"github.com/opentracing/opentracing-go/mocktracer"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/sluice-rpc/sluice/serviceconfig"
	"github.com/uber/tchannel-go"
	tjson "github.com/uber/tchannel-go/json"
)

// clientSpans returns the finished spans of kind client, by whether they
// are call spans (component sluice) or attempt spans (tchannel-go's).
func clientSpans(t *testing.T, tr *mocktracer.MockTracer) (calls, attempts []*mocktracer.MockSpan) {
	t.Helper()
	for _, sp := range tr.FinishedSpans() {
		if sp.Tag(string(ext.SpanKind)) != ext.SpanKindRPCClientEnum {
			continue
		}
		switch sp.Tag(string(ext.Component)) {
		case componentName:
			calls = append(calls, sp)
		case "tchannel-go":
			attempts = append(attempts, sp)
		default:
			t.Errorf("client span %q of component %v", sp.OperationName, sp.Tag(string(ext.Component)))
		}
	}
	return calls, attempts
}

// serverSpan waits for the finished server span named method.
func serverSpan(t *testing.T, tr *mocktracer.MockTracer, method string) *mocktracer.MockSpan {
	t.Helper()
	var found *mocktracer.MockSpan
	testwait.Until(t, "the server's span of "+method, func() bool {
		for _, sp := range tr.FinishedSpans() {
			if sp.OperationName == method && sp.Tag(string(ext.SpanKind)) == ext.SpanKindRPCServerEnum {
				found = sp
				return true
			}
		}
		return false
	})
	return found
}

// A JSON call, to a Sluice server and to a plain tchannel-go server: one
// call span named after the method, one attempt span under it (tchannel-go's
// client span, not a second one of Sluice's), tagged as opentracing's
// conventions say, and the server's span joins the trace under the
// attempt's.
func TestTracingOneSpanPerCallAndPerAttempt(t *testing.T) {
	plainServer := func(t *testing.T, tr opentracing.Tracer) string {
		ch, err := tchannel.NewChannel("kv", &tchannel.ChannelOptions{Tracer: tr})
		if err != nil {
			t.Fatalf("tchannel.NewChannel: %v", err)
		}
		t.Cleanup(ch.Close)
		if err := tjson.Register(ch, tjson.Handlers{"get": func(ctx tjson.Context, req *echoReq) (*echoRes, error) {
			return &echoRes{Key: req.Key}, nil
		}}, nil); err != nil {
			t.Fatalf("tjson.Register: %v", err)
		}
		if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
			t.Fatalf("ListenAndServe: %v", err)
		}
		return ch.PeerInfo().HostPort
	}
	for _, kind := range []string{"sluice", "plain"} {
		t.Run(kind, func(t *testing.T) {
			clientTracer, serverTracer := mocktracer.New(), mocktracer.New()
			var hp string
			if kind == "sluice" {
				hp = startServer(t, WithTChannelOptions(tchannel.ChannelOptions{Tracer: serverTracer})).ch.HostPort()
			} else {
				hp = plainServer(t, serverTracer)
			}
			c, err := New("client", WithTChannelOptions(tchannel.ChannelOptions{Tracer: clientTracer}))
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			defer c.Close()
			if err := to(c, "kv").AddPeer(hp); err != nil {
				t.Fatalf("AddPeer: %v", err)
			}

			parent := clientTracer.StartSpan("caller")
			var out echoRes
			if err := to(c, "kv").CallJSON(opentracing.ContextWithSpan(ctxTimeout(t), parent), "get", &echoReq{Key: "k"}, &out); err != nil {
				t.Fatalf("CallJSON: %v", err)
			}
			parent.Finish()

			calls, attempts := clientSpans(t, clientTracer)
			if len(calls) != 1 {
				t.Fatalf("call spans: got length %d, want %d", len(calls), 1)
			}
			if len(attempts) != 1 {
				t.Fatalf("attempt spans: got length %d, want %d", len(attempts), 1)
			}
			call, attempt := calls[0], attempts[0]
			if call.OperationName != "get" {
				t.Errorf("call.OperationName = %q, want %q", call.OperationName, "get")
			}
			if want := parent.Context().(mocktracer.MockSpanContext).SpanID; call.ParentID != want {
				t.Errorf("call.ParentID = %v, want %v", call.ParentID, want)
			}
			if got := call.Tag(string(ext.PeerService)); got != "kv" {
				t.Errorf("call.Tag(string(ext.PeerService)) = %q, want %q", got, "kv")
			}
			if got := call.Tag(string(ext.Error)); got != nil {
				t.Errorf("call.Tag(string(ext.Error)) = %v, want nil", got)
			}

			if attempt.OperationName != "get" {
				t.Errorf("attempt.OperationName = %q, want %q", attempt.OperationName, "get")
			}
			if attempt.ParentID != call.SpanContext.SpanID {
				t.Errorf("the attempt's span is not the call's child: got %v, want %v", attempt.ParentID, call.SpanContext.SpanID)
			}
			if got := attempt.Tag(string(ext.PeerService)); got != "kv" {
				t.Errorf("attempt.Tag(string(ext.PeerService)) = %q, want %q", got, "kv")
			}
			if got := attempt.Tag(string(ext.PeerAddress)); got != hp {
				t.Errorf("attempt.Tag(string(ext.PeerAddress)) = %q, want %q", got, hp)
			}
			if attempt.Tag(string(ext.PeerPort)) == nil {
				t.Errorf("attempt span has no %s tag", ext.PeerPort)
			}
			if got := attempt.Tag(retry.AttemptsHeader); got != 0 {
				t.Errorf("attempt.Tag(retry.AttemptsHeader) = %v, want %v", got, 0)
			}

			served := serverSpan(t, serverTracer, "get")
			if served.SpanContext.TraceID != call.SpanContext.TraceID {
				t.Errorf("the server's span is not in the caller's trace: got %v, want %v", served.SpanContext.TraceID, call.SpanContext.TraceID)
			}
			if served.ParentID != attempt.SpanContext.SpanID {
				t.Errorf("the server's span is not the attempt's child: got %v, want %v", served.ParentID, attempt.SpanContext.SpanID)
			}
		})
	}
}

// Retried attempts each get a span numbered by previous-rpc-attempts; the
// failed ones are marked error, the call span is not when the call
// succeeds, and is when it fails.
func TestTracingRetriedAttempts(t *testing.T) {
	s := startServer(t)
	var n atomic.Int64
	s.busyEvery = func() bool { return n.Add(1)%3 != 0 } // BUSY, BUSY, OK, ...
	cfg, err := serviceconfig.Parse([]byte(`{"methodConfig":[{"name":[{"service":"kv"}],
		"retryPolicy":{"maxAttempts":3,"initialBackoff":"0.001s","maxBackoff":"0.001s","backoffMultiplier":1,"retryableStatusCodes":["BUSY"]}}]}`))
	if err != nil {
		t.Fatalf("serviceconfig.Parse: %v", err)
	}
	tracer := mocktracer.New()
	c, err := New("client", WithTChannelOptions(tchannel.ChannelOptions{Tracer: tracer}), WithServiceConfig(cfg))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer c.Close()
	for i := 0; i < 3; i++ { // three peers: the busy limiter of none is spent
		if err := to(c, "kv").AddPeer(s.ch.HostPort()); err != nil {
			t.Fatalf("AddPeer: %v", err)
		}
		s = startServer(t)
		s.busyEvery = func() bool { return n.Add(1)%3 != 0 }
	}
	_, err = to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, []byte("x"))
	if err != nil {
		t.Fatalf("CallRaw: %v", err)
	}
	calls, attempts := clientSpans(t, tracer)
	if len(calls) != 1 {
		t.Fatalf("len(calls) = %d, want %d", len(calls), 1)
	}
	if len(attempts) != 3 {
		t.Fatalf("len(attempts) = %d, want %d", len(attempts), 3)
	}
	for i, a := range attempts {
		if got := a.Tag(retry.AttemptsHeader); got != i {
			t.Errorf("a.Tag(retry.AttemptsHeader) = %v, want %v", got, i)
		}
		if a.ParentID != calls[0].SpanContext.SpanID {
			t.Errorf("a.ParentID = %v, want %v", a.ParentID, calls[0].SpanContext.SpanID)
		}
		if got := a.Tag(string(ext.Error)) == true; got != (i < 2) {
			t.Errorf("attempt %d's error tag: %v: got %v, want %v", i, a.Tag(string(ext.Error)), got, (i < 2))
		}
	}
	if got := calls[0].Tag(string(ext.Error)); got != nil {
		t.Errorf("calls[0].Tag(string(ext.Error)) = %v, want nil", got)
	}

	tracer.Reset()
	down := startServer(t)
	down.busy.Store(true)
	c2, err := New("client", WithTChannelOptions(tchannel.ChannelOptions{Tracer: tracer}))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer c2.Close()
	if err := to(c2, "kv").AddPeer(down.ch.HostPort()); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}
	_, err = to(c2, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil)
	if err == nil {
		t.Fatal("CallRaw succeeded, want an error")
	}
	calls, attempts = clientSpans(t, tracer)
	if len(calls) != 1 {
		t.Fatalf("len(calls) = %d, want %d", len(calls), 1)
	}
	if len(attempts) != 1 {
		t.Fatalf("len(attempts) = %d, want %d", len(attempts), 1)
	}
	if got := calls[0].Tag(string(ext.Error)); got != true {
		t.Errorf("calls[0].Tag(string(ext.Error)) = %v, want %v", got, true)
	}
	if got := attempts[0].Tag(string(ext.Error)); got != true {
		t.Errorf("attempts[0].Tag(string(ext.Error)) = %v, want %v", got, true)
	}
}

// The marked context an attempt gives tchannel-go never reaches the user's
// tracer: injected through the attempt span's tracer, it carries the call
// span's identity, as any code holding that context would propagate it.
func TestAttemptSpanInjectsTheCallSpan(t *testing.T) {
	tr := mocktracer.New()
	call := tr.StartSpan("get")
	as := &attemptSpan{Span: call, tracer: &spanTracer{tr}, n: 1, hostPort: "127.0.0.1:1"}
	carrier := opentracing.TextMapCarrier{}
	if err := as.Tracer().Inject(as.Context(), opentracing.TextMap, carrier); err != nil {
		t.Fatalf("Inject: %v", err)
	}
	sc, err := tr.Extract(opentracing.TextMap, carrier)
	if err != nil {
		t.Fatalf("Extract: %v", err)
	}
	if want, got := call.Context().(mocktracer.MockSpanContext).SpanID, sc.(mocktracer.MockSpanContext).SpanID; got != want {
		t.Errorf("sc.(mocktracer.MockSpanContext).SpanID = %v, want %v", got, want)
	}

	child := as.tracer.StartSpan("get", opentracing.ChildOf(as.Context()))
	child.Finish()
	ms := child.(*mocktracer.MockSpan)
	if want := call.Context().(mocktracer.MockSpanContext).SpanID; ms.ParentID != want {
		t.Errorf("ms.ParentID = %v, want %v", ms.ParentID, want)
	}
	if got := ms.Tag(retry.AttemptsHeader); got != 1 {
		t.Errorf("ms.Tag(retry.AttemptsHeader) = %v, want %v", got, 1)
	}
	if got := ms.Tag(string(ext.PeerAddress)); got != "127.0.0.1:1" {
		t.Errorf("ms.Tag(string(ext.PeerAddress)) = %q, want %q", got, "127.0.0.1:1")
	}
}
