package thrift

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/testkit/benchlat"
	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/examples/keyvalue/gen-go/keyvalue"
	athrift "github.com/uber/tchannel-go/thirdparty/github.com/apache/thrift/lib/go/thrift"
	tthrift "github.com/uber/tchannel-go/thrift"
	"github.com/uber/tchannel-go/thrift/gen-go/meta"
)

// events is a log of what middlewares and handlers did, in order.
type events struct {
	mu  sync.Mutex
	log []string
}

func (e *events) add(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.log = append(e.log, fmt.Sprintf(format, args...))
}

func (e *events) get() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.log...)
}

// ctxKey is a context key inbound middlewares set for the handlers.
type ctxKey struct{}

// ctxHandler is a kvServer whose Get logs "handler" and answers the ctxKey
// value of its context.
type ctxHandler struct {
	*kvServer
	ev *events
}

func (h ctxHandler) Get(ctx tthrift.Context, key string) (string, error) {
	h.ev.add("handler")
	if err := h.begin(ctx); err != nil {
		return "", err
	}
	if !validKey(key) {
		return "", &keyvalue.InvalidKey{}
	}
	v, _ := ctx.Value(ctxKey{}).(string)
	return v, nil
}

// startMWServer starts a ctxHandler on a Sluice channel made with opts.
func startMWServer(t *testing.T, ev *events, opts ...channel.Option) *kvServer {
	t.Helper()
	ch, err := channel.New(service, opts...)
	if err != nil {
		t.Fatalf("channel.New: %v", err)
	}
	t.Cleanup(ch.Close)
	s := newKVServer()
	NewServer(ch).Register(keyvalue.NewTChanKeyValueServer(ctxHandler{s, ev}))
	if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatalf("ListenAndServe: %v", err)
	}
	s.hostPort = ch.HostPort()
	return s
}

func requireCode(t *testing.T, err error, code codes.Code) *channel.CallError {
	t.Helper()
	var ce *channel.CallError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a %T", err, ce)
	}
	if ce.Code != code {
		t.Fatalf("%v: got %v, want %v", err, ce.Code, code)
	}
	return ce
}

// Inbound middlewares run in order, the first outermost, around the
// handler, and see the call: its caller, its TChannel method name, the
// Thrift format and the request headers.
func TestInboundMiddlewareOrder(t *testing.T) {
	var ev events
	mw := func(name string) channel.InboundMiddleware {
		return func(ctx context.Context, in *channel.Inbound, next func(context.Context) error) error {
			ev.add("%s> %s %s %s who=%s arg2=%v", name, in.Caller, in.Method, in.Format, in.Headers["who"], in.Arg2)
			err := next(ctx)
			ev.add("<%s %v", name, err)
			return err
		}
	}
	s := startMWServer(t, &ev, channel.WithInboundMiddleware(mw("a"), mw("b")))
	_, _, kv := startClient(t, s)
	_, err := kv.Get(ctxTimeout(t, map[string]string{"who": "me"}), "k")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got, want := ev.get(), []string{
		"a> kv-client KeyValue::Get thrift who=me arg2=[]",
		"b> kv-client KeyValue::Get thrift who=me arg2=[]",
		"handler", "<b <nil>", "<a <nil>",
	}; !slices.Equal(got, want) {
		t.Errorf("ev.get() = %q, want %q", got, want)
	}
}

// A context value a middleware adds reaches the handler, whose context
// still carries the request headers; the response headers it sets are
// answered, and so is a declared exception.
func TestInboundMiddlewareContextReachesHandler(t *testing.T) {
	var ev events
	s := startMWServer(t, &ev, channel.WithInboundMiddleware(func(ctx context.Context, in *channel.Inbound, next func(context.Context) error) error {
		return next(context.WithValue(ctx, ctxKey{}, "set by middleware"))
	}))
	_, _, kv := startClient(t, s)
	ctx := ctxTimeout(t, map[string]string{"who": "me"})
	v, err := kv.Get(ctx, "k")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if v != "set by middleware" {
		t.Errorf("v = %q, want %q", v, "set by middleware")
	}
	if got, want := ctx.ResponseHeaders(), map[string]string{"seen": "me", "server": s.hostPort}; !maps.Equal(got, want) {
		t.Errorf("ctx.ResponseHeaders() = %q, want %q", got, want)
	}

	ctx = ctxTimeout(t, map[string]string{"who": "you"})
	_, err = kv.Get(ctx, "1x")
	var ik *keyvalue.InvalidKey
	if !errors.As(err, &ik) {
		t.Fatalf("Get error = %v, want a %T", err, ik)
	}
	if got := ctx.ResponseHeaders()["seen"]; got != "you" {
		t.Errorf(`ctx.ResponseHeaders()["seen"] = %q, want %q`, got, "you")
	}
}

// The error of a middleware that returns without calling next is answered
// as if the handler had returned it, and the handler does not run: a
// system error, wrapped or not, with its code, any other UNEXPECTED (as an
// undeclared error of a Thrift handler is). A middleware that returns nil
// without calling next has no result to answer with: UNEXPECTED too.
func TestInboundMiddlewareRejects(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		code     codes.Code
		contains string
	}{
		{"system error", tchannel.NewSystemError(tchannel.ErrCodeBadRequest, "no token"), codes.BadRequest, "no token"},
		{"wrapped busy", fmt.Errorf("auth backend: %w", channel.Busy("overloaded")), codes.Busy, "overloaded"},
		{"other error", errors.New("denied"), codes.Unexpected, "denied"},
		{"nil without next", nil, codes.Unexpected, "an inbound middleware returned no error but the handler left no result"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ev events
			s := startMWServer(t, &ev, channel.WithInboundMiddleware(func(context.Context, *channel.Inbound, func(context.Context) error) error {
				return tc.err
			}))
			_, _, kv := startClient(t, s)
			_, err := kv.Get(ctxTimeout(t, nil), "k")
			if got := requireCode(t, err, tc.code).Message; !strings.Contains(got, tc.contains) {
				t.Errorf("requireCode(t, err, tc.code).Message = %q, want it to contain %q", got, tc.contains)
			}
			if got := ev.get(); len(got) != 0 {
				t.Errorf("the handler ran: got %q, want empty", got)
			}
		})
	}
}

// A middleware may call next more than once: each call decodes the request
// again and runs the handler; the last one's result is answered.
func TestInboundMiddlewareCallsNextTwice(t *testing.T) {
	var ev events
	s := startMWServer(t, &ev, channel.WithInboundMiddleware(func(ctx context.Context, in *channel.Inbound, next func(context.Context) error) error {
		if err := next(ctx); err != nil {
			return err
		}
		return next(context.WithValue(ctx, ctxKey{}, "second"))
	}))
	_, _, kv := startClient(t, s)
	v, err := kv.Get(ctxTimeout(t, nil), "k")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if v != "second" {
		t.Errorf("v = %q, want %q", v, "second")
	}
	if got, want := ev.get(), []string{"handler", "handler"}; !slices.Equal(got, want) {
		t.Errorf("ev.get() = %q, want %q", got, want)
	}
}

// Inbound middlewares run after the server's guard and the size limit: a
// shed request and a body over the limit never reach them. A body within
// the limit that declares a string longer than the limit is refused when
// it is decoded, which is in next: the middleware sees it, the handler
// does not.
func TestInboundMiddlewareRunsAfterTheGuard(t *testing.T) {
	count := func(ev *events) channel.Option {
		return channel.WithInboundMiddleware(func(ctx context.Context, in *channel.Inbound, next func(context.Context) error) error {
			ev.add("middleware")
			return next(ctx)
		})
	}
	t.Run("shedding", func(t *testing.T) {
		var ev events
		// One request admitted, the next token in 1000 s: the second is shed.
		s := startMWServer(t, &ev, count(&ev), channel.WithShedding(channel.ShedConfig{MaxRPS: 0.001, Burst: 1}))
		_, _, kv := startClient(t, s)
		_, err := kv.Get(ctxTimeout(t, nil), "k")
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		_, err = kv.Get(ctxTimeout(t, nil), "k")
		requireCode(t, err, codes.Busy)
		if got, want := ev.get(), []string{"middleware", "handler"}; !slices.Equal(got, want) {
			t.Errorf("ev.get() = %q, want %q", got, want)
		}
	})

	const limit = 1024
	str := func(id byte, n uint32, body string) []byte {
		return append([]byte{byte(athrift.STRING), 0, id, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, body...)
	}
	for _, tc := range []struct {
		name   string
		arg3   []byte
		seenBy []string
	}{
		{"long body", append(str(1, 64<<10, strings.Repeat("k", 64<<10)), byte(athrift.STOP)), nil},
		{"many fields", append([]byte(strings.Repeat(string([]byte{byte(athrift.I32), 0, 9, 0, 0, 0, 1}), 300)), byte(athrift.STOP)), nil},
		{"declared string", str(1, 1<<31-1, "only a few bytes"), []string{"middleware"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ev events
			s := startMWServer(t, &ev, count(&ev), channel.WithMaxRequestSize(limit))
			err := plainThriftCall(t, s.hostPort, "KeyValue::Get", tc.arg3)
			var se tchannel.SystemError
			if !errors.As(err, &se) {
				t.Fatalf("plainThriftCall error = %v, want a %T", err, se)
			}
			if got := se.Code(); got != tchannel.ErrCodeBadRequest {
				t.Errorf("%s: got %v, want %v", se.Message(), got, tchannel.ErrCodeBadRequest)
			}
			if got := se.Message(); !strings.Contains(got, "1024 bytes") {
				t.Errorf("se.Message() = %q, want it to contain %q", got, "1024 bytes")
			}
			if got := ev.get(); !reflect.DeepEqual(got, tc.seenBy) {
				t.Errorf("ev.get() = %q, want %q", got, tc.seenBy)
			}
		})
	}
	t.Run("at the limit", func(t *testing.T) {
		var ev events
		s := startMWServer(t, &ev, count(&ev), channel.WithMaxRequestSize(limit))
		arg3 := append(str(1, 0, ""), byte(athrift.STOP))
		arg3 = append(str(1, uint32(limit-len(arg3)), strings.Repeat("k", limit-len(arg3))), byte(athrift.STOP))
		if len(arg3) != limit {
			t.Fatalf("len(arg3) = %d, want %d", len(arg3), limit)
		}
		if err := plainThriftCall(t, s.hostPort, "KeyValue::Get", arg3); err != nil {
			t.Fatalf("plainThriftCall: %v", err)
		}
		if got, want := ev.get(), []string{"middleware", "handler"}; !slices.Equal(got, want) {
			t.Errorf("ev.get() = %q, want %q", got, want)
		}
	})
}

// The Thrift meta service (health checks) is tchannel-go's own, registered
// before Register can wrap it: middlewares do not run for it.
func TestInboundMiddlewareSkipsMetaHealth(t *testing.T) {
	var ev events
	s := startMWServer(t, &ev, channel.WithInboundMiddleware(func(context.Context, *channel.Inbound, func(context.Context) error) error {
		return tchannel.NewSystemError(tchannel.ErrCodeBadRequest, "no token")
	}))
	c, _, _ := startClient(t, s)
	var res meta.MetaHealthResult
	ok, err := NewClient(c).Call(ctxTimeout(t, nil), "Meta", "health", &meta.MetaHealthArgs{Hr: &meta.HealthRequest{}}, &res)
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	if !ok {
		t.Fatal("ok = false, want true")
	}
	if !res.Success.Ok {
		t.Error("res.Success.Ok = false, want true")
	}
}

// BenchmarkThriftServerInboundMiddleware times a Get from tchannel-go's own
// Thrift client to a Sluice server without inbound middleware ("none") and
// with one that only calls next ("passthrough"): the cost of one middleware,
// the body read whole before it included.
func BenchmarkThriftServerInboundMiddleware(b *testing.B) {
	pass := func(ctx context.Context, _ *channel.Inbound, next func(context.Context) error) error {
		return next(ctx)
	}
	for _, tc := range []struct {
		name string
		opts []channel.Option
	}{
		{"none", nil},
		{"passthrough", []channel.Option{channel.WithInboundMiddleware(pass)}},
	} {
		sch, err := channel.New(service, tc.opts...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(sch.Close)
		NewServer(sch).Register(keyvalue.NewTChanKeyValueServer(benchHandler{}))
		if err := sch.ListenAndServe("127.0.0.1:0"); err != nil {
			b.Fatal(err)
		}
		call := plainGet(b, benchCtx(b), sch.HostPort())
		b.Run(tc.name, func(b *testing.B) { benchlat.Median(b, call) })
	}
}
