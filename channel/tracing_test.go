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
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		require.NoError(t, err)
		t.Cleanup(ch.Close)
		require.NoError(t, tjson.Register(ch, tjson.Handlers{"get": func(ctx tjson.Context, req *echoReq) (*echoRes, error) {
			return &echoRes{Key: req.Key}, nil
		}}, nil))
		require.NoError(t, ch.ListenAndServe("127.0.0.1:0"))
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
			require.NoError(t, err)
			defer c.Close()
			require.NoError(t, c.AddPeer("kv", hp))

			parent := clientTracer.StartSpan("caller")
			var out echoRes
			require.NoError(t, c.CallJSON(opentracing.ContextWithSpan(ctxTimeout(t), parent), "kv", "get", &echoReq{Key: "k"}, &out))
			parent.Finish()

			calls, attempts := clientSpans(t, clientTracer)
			require.Len(t, calls, 1, "call spans")
			require.Len(t, attempts, 1, "attempt spans")
			call, attempt := calls[0], attempts[0]
			assert.Equal(t, "get", call.OperationName)
			assert.Equal(t, parent.Context().(mocktracer.MockSpanContext).SpanID, call.ParentID)
			assert.Equal(t, "kv", call.Tag(string(ext.PeerService)))
			assert.Nil(t, call.Tag(string(ext.Error)))

			assert.Equal(t, "get", attempt.OperationName)
			assert.Equal(t, call.SpanContext.SpanID, attempt.ParentID, "the attempt's span is not the call's child")
			assert.Equal(t, "kv", attempt.Tag(string(ext.PeerService)))
			assert.Equal(t, hp, attempt.Tag(string(ext.PeerAddress)))
			assert.NotNil(t, attempt.Tag(string(ext.PeerPort)))
			assert.Equal(t, 0, attempt.Tag(retry.AttemptsHeader))

			served := serverSpan(t, serverTracer, "get")
			assert.Equal(t, call.SpanContext.TraceID, served.SpanContext.TraceID, "the server's span is not in the caller's trace")
			assert.Equal(t, attempt.SpanContext.SpanID, served.ParentID, "the server's span is not the attempt's child")
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
	require.NoError(t, err)
	tracer := mocktracer.New()
	c, err := New("client", WithTChannelOptions(tchannel.ChannelOptions{Tracer: tracer}), WithServiceConfig(cfg))
	require.NoError(t, err)
	defer c.Close()
	for i := 0; i < 3; i++ { // three peers: the busy limiter of none is spent
		require.NoError(t, c.AddPeer("kv", s.ch.HostPort()))
		s = startServer(t)
		s.busyEvery = func() bool { return n.Add(1)%3 != 0 }
	}
	_, err = c.CallRaw(ctxTimeout(t), "kv", "echo", nil, []byte("x"))
	require.NoError(t, err)
	calls, attempts := clientSpans(t, tracer)
	require.Len(t, calls, 1)
	require.Len(t, attempts, 3)
	for i, a := range attempts {
		assert.Equal(t, i, a.Tag(retry.AttemptsHeader))
		assert.Equal(t, calls[0].SpanContext.SpanID, a.ParentID)
		assert.Equal(t, i < 2, a.Tag(string(ext.Error)) == true, "attempt %d's error tag: %v", i, a.Tag(string(ext.Error)))
	}
	assert.Nil(t, calls[0].Tag(string(ext.Error)))

	tracer.Reset()
	down := startServer(t)
	down.busy.Store(true)
	c2, err := New("client", WithTChannelOptions(tchannel.ChannelOptions{Tracer: tracer}))
	require.NoError(t, err)
	defer c2.Close()
	require.NoError(t, c2.AddPeer("kv", down.ch.HostPort()))
	_, err = c2.CallRaw(ctxTimeout(t), "kv", "echo", nil, nil)
	require.Error(t, err)
	calls, attempts = clientSpans(t, tracer)
	require.Len(t, calls, 1)
	require.Len(t, attempts, 1)
	assert.Equal(t, true, calls[0].Tag(string(ext.Error)))
	assert.Equal(t, true, attempts[0].Tag(string(ext.Error)))
}

// The marked context an attempt gives tchannel-go never reaches the user's
// tracer: injected through the attempt span's tracer, it carries the call
// span's identity, as any code holding that context would propagate it.
func TestAttemptSpanInjectsTheCallSpan(t *testing.T) {
	tr := mocktracer.New()
	call := tr.StartSpan("get")
	as := &attemptSpan{Span: call, tracer: &spanTracer{tr}, n: 1, hostPort: "127.0.0.1:1"}
	carrier := opentracing.TextMapCarrier{}
	require.NoError(t, as.Tracer().Inject(as.Context(), opentracing.TextMap, carrier))
	sc, err := tr.Extract(opentracing.TextMap, carrier)
	require.NoError(t, err)
	assert.Equal(t, call.Context().(mocktracer.MockSpanContext).SpanID, sc.(mocktracer.MockSpanContext).SpanID)

	child := as.tracer.StartSpan("get", opentracing.ChildOf(as.Context()))
	child.Finish()
	ms := child.(*mocktracer.MockSpan)
	assert.Equal(t, call.Context().(mocktracer.MockSpanContext).SpanID, ms.ParentID)
	assert.Equal(t, 1, ms.Tag(retry.AttemptsHeader))
	assert.Equal(t, "127.0.0.1:1", ms.Tag(string(ext.PeerAddress)))
}
