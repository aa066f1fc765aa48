package channel

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/testkit/benchlat"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/uber/tchannel-go"
	tjson "github.com/uber/tchannel-go/json"
	"github.com/uber/tchannel-go/raw"
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

// mwClient returns a client made with opts, with s as its peer of "kv".
func mwClient(t *testing.T, s *testServer, opts ...Option) *Channel {
	t.Helper()
	c, err := New("mw-client", opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	if err := to(c, "kv").AddPeer(s.ch.HostPort()); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}
	return c
}

// requireCallError requires err to be a *CallError with code and returns it.
func requireCallError(t *testing.T, err error, code codes.Code) *CallError {
	t.Helper()
	var ce *CallError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a %T", err, ce)
	}
	if ce.Code != code {
		t.Fatalf("%v: got %v, want %v", err, ce.Code, code)
	}
	return ce
}

// Call middlewares run in order, the first outermost, around the call, and
// see its service, method and response.
func TestCallMiddlewareOrder(t *testing.T) {
	s := startServer(t)
	var ev events
	mw := func(name string) CallMiddleware {
		return func(ctx context.Context, service, method string, req *Request, next Invoker) (*Response, error) {
			ev.add("%s> %s::%s %s", name, service, method, req.Arg3)
			res, err := next(ctx, service, method, req)
			ev.add("<%s %s %v", name, res.Arg3, err)
			return res, err
		}
	}
	c := mwClient(t, s, WithCallMiddleware(mw("a"), mw("b")))
	res, err := to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, []byte("hi"))
	if err != nil {
		t.Fatalf("CallRaw: %v", err)
	}
	if string(res.Arg3) != "hi" {
		t.Errorf("string(res.Arg3) = %q, want %q", string(res.Arg3), "hi")
	}
	if got, want := ev.get(), []string{"a> kv::echo hi", "b> kv::echo hi", "<b hi <nil>", "<a hi <nil>"}; !slices.Equal(got, want) {
		t.Errorf("ev.get() = %q, want %q", got, want)
	}
}

// A call middleware that passes on another request sends that one: a
// header it adds reaches the server.
func TestCallMiddlewareReplacesRequest(t *testing.T) {
	s := startServer(t)
	c := mwClient(t, s, WithCallMiddleware(func(ctx context.Context, service, method string, req *Request, next Invoker) (*Response, error) {
		return next(ctx, service, method, req.WithHeader("who", "middleware"))
	}))
	var out echoRes
	var rh map[string]string
	if err := to(c, "kv").CallJSON(ctxTimeout(t), "get", &echoReq{Key: "k"}, &out, ResponseHeaders(&rh)); err != nil {
		t.Fatalf("CallJSON: %v", err)
	}
	if out.Key != "k" {
		t.Errorf("out.Key = %q, want %q", out.Key, "k")
	}
	if rh["seen"] != "middleware" {
		t.Errorf("the server did not see the middleware's header: got %q, want %q", rh["seen"], "middleware")
	}
}

// A call middleware that returns an error without calling next fails the
// call with nothing sent: an error of its own becomes a *CallError with code
// UNEXPECTED wrapping it.
func TestCallMiddlewareFailsTheCall(t *testing.T) {
	s := startServer(t)
	errNoCredentials := errors.New("no credentials")
	c := mwClient(t, s, WithCallMiddleware(func(context.Context, string, string, *Request, Invoker) (*Response, error) {
		return nil, errNoCredentials
	}))
	_, err := to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, []byte("hi"))
	ce := requireCallError(t, err, codes.Unexpected)
	if !errors.Is(err, errNoCredentials) {
		t.Errorf("CallRaw error = %v, want %v", err, errNoCredentials)
	}
	if ce.Attempts != 0 {
		t.Errorf("ce.Attempts = %v, want 0", ce.Attempts)
	}
	if got := s.received.Load(); got != 0 {
		t.Errorf("the call was sent: got %v, want 0", got)
	}
}

// A call middleware sees the call once, whatever its attempts: here a
// retry policy makes three, the first two answered Busy.
func TestCallMiddlewareSeesTheCallOnce(t *testing.T) {
	f := startFleet(t, 3, busyFirst(2))
	var ev events
	c, _ := retryClient(t, f, mustConfig(t, fmt.Sprintf(retryBusy, 3, "0.001s", "")),
		WithCallMiddleware(func(ctx context.Context, service, method string, req *Request, next Invoker) (*Response, error) {
			res, err := next(ctx, service, method, req)
			if err == nil {
				ev.add("call: %d attempts", res.Attempts)
			}
			return res, err
		}))
	var out echoRes
	if err := to(c, "kv").CallJSON(ctxTimeout(t), "get", &echoReq{Key: "k"}, &out); err != nil {
		t.Fatalf("CallJSON: %v", err)
	}
	if got := f.received(); got != 3 {
		t.Errorf("f.received() = %v, want %v", got, 3)
	}
	if got, want := ev.get(), []string{"call: 3 attempts"}; !slices.Equal(got, want) {
		t.Errorf("ev.get() = %q, want %q", got, want)
	}
}

// headerFleet is n real servers of "kv" whose JSON method "get" answers
// Busy to the first busy requests the fleet receives, and records every
// request's headers.
type headerFleet struct {
	servers []*Channel
	busy    int
	mu      sync.Mutex
	headers []map[string]string
}

func startHeaderFleet(t *testing.T, n, busy int) *headerFleet {
	t.Helper()
	f := &headerFleet{busy: busy}
	for i := 0; i < n; i++ {
		ch, err := New("kv")
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if err := ch.RegisterJSON(map[string]any{
			"get": func(ctx tjson.Context, req *echoReq) (*echoRes, error) {
				f.mu.Lock()
				k := len(f.headers)
				f.headers = append(f.headers, ctx.Headers())
				f.mu.Unlock()
				if k < f.busy {
					return nil, Busy("busy #%d", k)
				}
				return &echoRes{Key: req.Key}, nil
			},
		}); err != nil {
			t.Fatalf("RegisterJSON: %v", err)
		}
		if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
			t.Fatalf("ListenAndServe: %v", err)
		}
		t.Cleanup(ch.Close)
		f.servers = append(f.servers, ch)
	}
	return f
}

func (f *headerFleet) received() []map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]string(nil), f.headers...)
}

// client returns a client of the fleet with a retry policy of three
// attempts on the codes given, and opts.
func (f *headerFleet) client(t *testing.T, retryOn string, opts ...Option) *Channel {
	t.Helper()
	cfg := mustConfig(t, `{"methodConfig":[{"name":[{"service":"kv"}],
 "retryPolicy":{"maxAttempts":3,"initialBackoff":"0.001s","maxBackoff":"1s","backoffMultiplier":2,"retryableStatusCodes":[`+retryOn+`]}}]}`)
	c, err := New("client", append([]Option{WithServiceConfig(cfg)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	for _, s := range f.servers {
		if err := to(c, "kv").AddPeer(s.HostPort()); err != nil {
			t.Fatalf("AddPeer: %v", err)
		}
	}
	if err := to(c, "kv").Connect(ctxTimeout(t)); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	return c
}

// An attempt middleware runs once per attempt, numbered from 0, and a
// header it adds to one attempt's request reaches the server with that
// attempt, each attempt with its own value.
func TestAttemptMiddlewareRunsPerAttempt(t *testing.T) {
	f := startHeaderFleet(t, 3, 2)
	var ev events
	c := f.client(t, `"BUSY"`, WithAttemptMiddleware(func(ctx context.Context, a *Attempt, next AttemptInvoker) (*Response, error) {
		ev.add("%s::%s attempt %d", a.Service, a.Method, a.Number)
		a.Request = a.Request.WithHeader("signature", fmt.Sprintf("sig-%d", a.Number))
		return next(ctx, a)
	}))
	var out echoRes
	if err := to(c, "kv").CallJSON(ctxTimeout(t), "get", &echoReq{Key: "k"}, &out, WithHeaders(map[string]string{"who": "me"})); err != nil {
		t.Fatalf("CallJSON: %v", err)
	}
	if got, want := ev.get(), []string{"kv::get attempt 0", "kv::get attempt 1", "kv::get attempt 2"}; !slices.Equal(got, want) {
		t.Errorf("ev.get() = %q, want %q", got, want)
	}
	got := f.received()
	if len(got) != 3 {
		t.Fatalf("len(got) = %d, want %d", len(got), 3)
	}
	for i, h := range got {
		if want := fmt.Sprintf("sig-%d", i); h["signature"] != want {
			t.Errorf("attempt %d: got %q, want %q", i, h["signature"], want)
		}
		if h["who"] != "me" {
			t.Errorf("attempt %d lost the call's header: got %q, want %q", i, h["who"], "me")
		}
	}
}

// An attempt middleware's error returned without calling next fails the
// call in this process: that attempt sends nothing, and no further attempt
// is made, although the policy would retry the error's code.
func TestAttemptMiddlewareErrorEndsTheCall(t *testing.T) {
	errNoToken := errors.New("no token for this attempt")
	for _, failOn := range []int{0, 1} {
		t.Run(fmt.Sprintf("attempt %d", failOn), func(t *testing.T) {
			f := startHeaderFleet(t, 3, 1)
			var ev events
			c := f.client(t, `"BUSY","UNEXPECTED"`, WithAttemptMiddleware(func(ctx context.Context, a *Attempt, next AttemptInvoker) (*Response, error) {
				ev.add("attempt %d", a.Number)
				if a.Number == failOn {
					return nil, errNoToken
				}
				return next(ctx, a)
			}))
			err := to(c, "kv").CallJSON(ctxTimeout(t), "get", &echoReq{Key: "k"}, nil)
			var ce *CallError
			if !errors.As(err, &ce) {
				t.Fatalf("CallJSON error = %v, want a %T", err, ce)
			}
			if ce.Attempts != failOn {
				t.Errorf("attempts sent: got %v, want %v", ce.Attempts, failOn)
			}
			if got := len(f.received()); got != failOn {
				t.Errorf("requests the servers received: got length %d, want %d", got, failOn)
			}
			if got := len(ev.get()); got != failOn+1 {
				t.Errorf("attempts the middleware saw: got length %d, want %d", got, failOn+1)
			}
			// The call's error is the middleware's, also on a retry (not
			// the last sent attempt's BUSY), though UNEXPECTED is
			// retryable here.
			if ce.Code != codes.Unexpected {
				t.Errorf("ce.Code = %v, want %v", ce.Code, codes.Unexpected)
			}
			if !errors.Is(err, errNoToken) {
				t.Errorf("CallJSON error = %v, want %v", err, errNoToken)
			}
			if ce.Stop != retry.StopCommitted {
				t.Errorf("ce.Stop = %v, want %v", ce.Stop, retry.StopCommitted)
			}
		})
	}
}

// ctxKey is a context key inbound middlewares set for the handlers.
type ctxKey struct{}

// startMWServer starts a test server with the inbound middlewares mws and
// two more methods, "ctx-raw" and "ctx-json", whose handlers log "handler"
// to ev and answer the ctxKey value of their context (raw: as arg3; JSON:
// as Key, with the request's "who" header as response header "seen").
func startMWServer(t *testing.T, ev *events, opts ...Option) *testServer {
	t.Helper()
	s := startServer(t, opts...)
	if err := s.ch.RegisterRaw("ctx-raw", func(ctx context.Context, req *RawRequest) (*RawResponse, error) {
		s.received.Add(1)
		ev.add("handler")
		v, _ := ctx.Value(ctxKey{}).(string)
		return &RawResponse{Arg2: req.Arg2, Arg3: []byte(v)}, nil
	}); err != nil {
		t.Fatalf("RegisterRaw: %v", err)
	}
	if err := s.ch.RegisterJSON(map[string]any{
		"ctx-json": func(ctx tjson.Context, req *echoReq) (*echoRes, error) {
			s.received.Add(1)
			ev.add("handler")
			v, _ := ctx.Value(ctxKey{}).(string)
			ctx.SetResponseHeaders(map[string]string{"seen": ctx.Headers()["who"]})
			return &echoRes{Key: v}, nil
		},
	}); err != nil {
		t.Fatalf("RegisterJSON: %v", err)
	}
	return s
}

// callBoth calls ctx-raw (arg2 "token") and then ctx-json (header
// who=token) and returns their errors, the raw call's arg3 and the JSON
// call's Key and response headers.
func callBoth(t *testing.T, c *Channel) (rawArg3, jsonKey string, rh map[string]string, rawErr, jsonErr error) {
	t.Helper()
	res, rawErr := to(c, "kv").CallRaw(ctxTimeout(t), "ctx-raw", []byte("token"), []byte("x"))
	if rawErr == nil {
		rawArg3 = string(res.Arg3)
	}
	var out echoRes
	jsonErr = to(c, "kv").CallJSON(ctxTimeout(t), "ctx-json", &echoReq{Key: "k"}, &out,
		WithHeaders(map[string]string{"who": "token"}), ResponseHeaders(&rh))

	return rawArg3, out.Key, rh, rawErr, jsonErr
}

// Inbound middlewares run in order, the first outermost, around the
// handler, and see the call: its caller, method, format and headers (JSON)
// or arg2 (raw).
func TestInboundMiddlewareOrder(t *testing.T) {
	var ev events
	mw := func(name string) InboundMiddleware {
		return func(ctx context.Context, in *Inbound, next func(context.Context) error) error {
			ev.add("%s> %s %s %s headers=%v arg2=%q", name, in.Caller, in.Method, in.Format, in.Headers, in.Arg2)
			err := next(ctx)
			ev.add("<%s %v", name, err)
			return err
		}
	}
	s := startMWServer(t, &ev, WithInboundMiddleware(mw("a")), WithInboundMiddleware(mw("b")))
	_, _, _, rawErr, jsonErr := callBoth(t, mwClient(t, s))
	if rawErr != nil {
		t.Fatalf("callBoth: %v", rawErr)
	}
	if jsonErr != nil {
		t.Fatalf("callBoth: %v", jsonErr)
	}
	// The JSON call's headers include the tracing headers a Sluice client adds.
	log := ev.get()
	if len(log) != 10 {
		t.Fatalf("len(log) = %d, want %d", len(log), 10)
	}
	if got, want := log[:5], []string{
		`a> mw-client ctx-raw raw headers=map[] arg2="token"`,
		`b> mw-client ctx-raw raw headers=map[] arg2="token"`,
		"handler", "<b <nil>", "<a <nil>",
	}; !slices.Equal(got, want) {
		t.Errorf("log[:5] = %q, want %q", got, want)
	}
	for i, prefix := range []string{"a> mw-client ctx-json json headers=map[", "b> mw-client ctx-json json headers=map["} {
		if !strings.HasPrefix(log[5+i], prefix) {
			t.Errorf("%s: strings.HasPrefix(log[5+i], prefix) = false, want true", log[5+i])
		}
		if !strings.Contains(log[5+i], "who:token") {
			t.Errorf("log[5+i] = %q, want it to contain %q", log[5+i], "who:token")
		}
		if !strings.HasSuffix(log[5+i], `arg2=""`) {
			t.Errorf("%s: condition is false, want true", log[5+i])
		}
	}
	if got, want := log[7:], []string{"handler", "<b <nil>", "<a <nil>"}; !slices.Equal(got, want) {
		t.Errorf("log[7:] = %q, want %q", got, want)
	}
}

// A context value a middleware adds reaches the handler; a JSON handler's
// context still carries the request headers, and the response headers it
// sets are answered.
func TestInboundMiddlewareContextReachesHandler(t *testing.T) {
	var ev events
	s := startMWServer(t, &ev, WithInboundMiddleware(func(ctx context.Context, in *Inbound, next func(context.Context) error) error {
		return next(context.WithValue(ctx, ctxKey{}, "set by middleware"))
	}))
	rawArg3, jsonKey, rh, rawErr, jsonErr := callBoth(t, mwClient(t, s))
	if rawErr != nil {
		t.Fatalf("callBoth: %v", rawErr)
	}
	if jsonErr != nil {
		t.Fatalf("callBoth: %v", jsonErr)
	}
	if rawArg3 != "set by middleware" {
		t.Errorf("rawArg3 = %q, want %q", rawArg3, "set by middleware")
	}
	if jsonKey != "set by middleware" {
		t.Errorf("jsonKey = %q, want %q", jsonKey, "set by middleware")
	}
	if rh["seen"] != "token" {
		t.Errorf("the JSON handler's request or response headers were lost: got %q, want %q", rh["seen"], "token")
	}
}

// The error of a middleware that returns without calling next is answered
// as if the handler had returned it, and the handler does not run: a
// system error, wrapped or not, with its code; any other error UNEXPECTED
// for a raw call and as an application error for a JSON one.
func TestInboundMiddlewareRejects(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		code     codes.Code // of both calls; OK: raw UNEXPECTED, JSON application error
		contains string
	}{
		{"system error", tchannel.NewSystemError(tchannel.ErrCodeBadRequest, "no token"), codes.BadRequest, "no token"},
		{"wrapped busy", fmt.Errorf("auth backend: %w", Busy("overloaded")), codes.Busy, "overloaded"},
		{"declined", Declined("not today"), codes.Declined, "not today"},
		{"other error", errors.New("denied"), codes.OK, "denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ev events
			s := startMWServer(t, &ev, WithInboundMiddleware(func(ctx context.Context, in *Inbound, next func(context.Context) error) error {
				return tc.err
			}))
			_, _, _, rawErr, jsonErr := callBoth(t, mwClient(t, s))
			if got := s.received.Load(); got != 0 {
				t.Errorf("the handler ran: got %v, want 0", got)
			}
			if tc.code != codes.OK {
				if got := requireCallError(t, rawErr, tc.code).Message; !strings.Contains(got, tc.contains) {
					t.Errorf("got %q, want it to contain %q", got, tc.contains)
				}
				if got := requireCallError(t, jsonErr, tc.code).Message; !strings.Contains(got, tc.contains) {
					t.Errorf("got %q, want it to contain %q", got, tc.contains)
				}
				return
			}
			if got := requireCallError(t, rawErr, codes.Unexpected).Message; !strings.Contains(got, tc.contains) {
				t.Errorf("got %q, want it to contain %q", got, tc.contains)
			}
			var ae *ApplicationError
			if !errors.As(jsonErr, &ae) {
				t.Fatalf("callBoth error = %v, want a %T", jsonErr, ae)
			}
			if want := (ApplicationError{Type: "error", Message: tc.contains}); *ae != want {
				t.Errorf("*ae = %+v, want %+v", *ae, want)
			}
		})
	}
}

// A middleware that returns nil without calling next answers an empty
// response: a raw call gets empty arg2 and arg3; a JSON call gets the empty
// object {}, which Sluice's and tchannel-go's JSON clients decode without
// error into the response struct, leaving it zero.
func TestInboundMiddlewareAnswersWithoutHandler(t *testing.T) {
	var ev events
	s := startMWServer(t, &ev, WithInboundMiddleware(func(context.Context, *Inbound, func(context.Context) error) error {
		return nil
	}))
	c := mwClient(t, s)
	res, err := to(c, "kv").CallRaw(ctxTimeout(t), "ctx-raw", []byte("a2"), []byte("a3"))
	if err != nil {
		t.Fatalf("CallRaw: %v", err)
	}
	if want := (RawResponse{Arg2: []byte{}, Arg3: []byte{}}); !reflect.DeepEqual(*res, want) {
		t.Errorf("*res = %+v, want %+v", *res, want)
	}

	jres, err := to(c, "kv").Call(ctxTimeout(t), "ctx-json", &Request{Format: tchannel.JSON, Arg3: []byte(`{"Key":"k"}`)})
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	if got := strings.TrimSpace(string(jres.Arg3)); got != "{}" {
		t.Errorf("strings.TrimSpace(string(jres.Arg3)) = %q, want %q", got, "{}")
	}
	if jres.AppError {
		t.Error("jres.AppError = true, want false")
	}

	out := echoRes{Key: "untouched"}
	if err := to(c, "kv").CallJSON(ctxTimeout(t), "ctx-json", &echoReq{Key: "k"}, &out); err != nil {
		t.Fatalf("CallJSON: %v", err)
	}
	if want := (echoRes{Key: "untouched"}); out != want {
		t.Errorf("out = %+v, want %+v", out, want)
	}

	plain := plainClient(t, nil)
	tctx, cancel := tjson.NewContext(testwait.Limit)
	defer cancel()
	var pout echoRes
	if err := tjson.CallPeer(tctx, plain.Peers().GetOrAdd(s.ch.HostPort()), "kv", "ctx-json", &echoReq{Key: "k"}, &pout); err != nil {
		t.Fatalf("tjson.CallPeer: %v", err)
	}
	if pout != (echoRes{}) {
		t.Errorf("pout = %+v, want echoRes{}", pout)
	}
	if got := s.received.Load(); got != 0 {
		t.Errorf("the handler ran: got %v, want 0", got)
	}
}

// Inbound middlewares run after the server's guard and argument checks: a
// shed request, one over the size limit and malformed JSON never reach
// them.
func TestInboundMiddlewareRunsAfterTheGuard(t *testing.T) {
	count := func(ev *events) Option {
		return WithInboundMiddleware(func(ctx context.Context, in *Inbound, next func(context.Context) error) error {
			ev.add("middleware %s", in.Method)
			return next(ctx)
		})
	}
	t.Run("shedding", func(t *testing.T) {
		var ev events
		// One request admitted, the next token in 1000 s: the second is shed.
		s := startMWServer(t, &ev, count(&ev), WithShedding(ShedConfig{MaxRPS: 0.001, Burst: 1}))
		c := mwClient(t, s)
		_, err := to(c, "kv").CallRaw(ctxTimeout(t), "ctx-raw", nil, nil)
		if err != nil {
			t.Fatalf("CallRaw: %v", err)
		}
		_, err = to(c, "kv").CallRaw(ctxTimeout(t), "ctx-raw", nil, nil)
		requireCallError(t, err, codes.Busy)
		if got, want := ev.get(), []string{"middleware ctx-raw", "handler"}; !slices.Equal(got, want) {
			t.Errorf("ev.get() = %q, want %q", got, want)
		}
	})
	t.Run("size and malformed", func(t *testing.T) {
		var ev events
		s := startMWServer(t, &ev, count(&ev), WithMaxRequestSize(64))
		hp := s.ch.HostPort()
		_, err := plainCall(t, hp, "ctx-raw", tchannel.Raw, nil, make([]byte, 65))
		requireSystemError(t, err, tchannel.ErrCodeBadRequest)
		_, err = plainCall(t, hp, "ctx-json", tchannel.JSON, nil, []byte(`{"Key":"`+strings.Repeat("k", 64)+`"}`))
		requireSystemError(t, err, tchannel.ErrCodeBadRequest)
		_, err = plainCall(t, hp, "ctx-json", tchannel.JSON, nil, []byte(`{"Key":`))
		requireSystemError(t, err, tchannel.ErrCodeBadRequest)
		_, err = plainCall(t, hp, "ctx-json", tchannel.JSON, []byte(`{"who"`), []byte(`{}`))
		requireSystemError(t, err, tchannel.ErrCodeBadRequest)
		if got := ev.get(); len(got) != 0 {
			t.Errorf("ev.get() = %q, want empty", got)
		}
	})
}

// A nil middleware is a start-up error naming the option and its position.
func TestNilMiddlewareIsAnError(t *testing.T) {
	pass := func(ctx context.Context, _ *Inbound, next func(context.Context) error) error { return next(ctx) }
	for _, tc := range []struct {
		opt  Option
		want string
	}{
		{WithCallMiddleware(nil), "channel: WithCallMiddleware: middleware 0 is nil"},
		{WithAttemptMiddleware(nil), "channel: WithAttemptMiddleware: middleware 0 is nil"},
		{WithInboundMiddleware(pass, nil), "channel: WithInboundMiddleware: middleware 1 is nil"},
	} {
		c, err := New("kv", tc.opt)
		if c != nil {
			t.Errorf("c = %+v, want nil", c)
		}
		if err == nil || err.Error() != tc.want {
			t.Errorf("New error = %v, want %q", err, tc.want)
		}
	}
}

// BenchmarkServerInboundMiddleware times raw and JSON calls from one plain
// tchannel-go client to a server without inbound middleware ("none") and to
// one with a middleware that only calls next ("passthrough"): the first
// shows what the feature costs a server that does not use it (nothing), the
// second what one middleware costs.
func BenchmarkServerInboundMiddleware(b *testing.B) {
	pass := func(ctx context.Context, _ *Inbound, next func(context.Context) error) error { return next(ctx) }
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"none", nil},
		{"passthrough", []Option{WithInboundMiddleware(pass)}},
	} {
		s := startServer(b, tc.opts...)
		ch := plainClient(b, nil)
		ctx := benchCtx(b)
		hp := s.ch.HostPort()
		b.Run("raw/"+tc.name, func(b *testing.B) {
			benchlat.Median(b, func() error {
				_, _, _, err := raw.Call(ctx, ch, hp, "kv", "echo", benchArg2, benchArg3)
				return err
			})
		})
		b.Run("json/"+tc.name, func(b *testing.B) {
			benchlat.Median(b, func() error {
				call, err := ch.BeginCall(ctx, hp, "kv", "get", &tchannel.CallOptions{Format: tchannel.JSON})
				if err != nil {
					return err
				}
				_, _, _, err = raw.WriteArgs(call, []byte(`{"who":"me"}`), []byte(`{"Key":"k"}`))
				return err
			})
		})
	}
}

// On a hedged call, an attempt middleware refusing the hedge ends the call
// with its error: the hedge sends nothing, and the first attempt, still in
// flight on a server that does not answer, is cancelled rather than
// waited for until the deadline.
func TestAttemptMiddlewareRefusingAHedge(t *testing.T) {
	a, b := startServer(t), startServer(t)
	cfg := mustConfig(t, `{"methodConfig":[{"name":[{"service":"kv"}],
	  "hedgingPolicy":{"maxAttempts":2,"hedgingDelay":"0.01s","nonFatalStatusCodes":["BUSY"]}}]}`)
	errNoToken := errors.New("no token for the hedge")
	c, err := New("client", WithServiceConfig(cfg), WithAttemptMiddleware(func(ctx context.Context, at *Attempt, next AttemptInvoker) (*Response, error) {
		if at.Number > 0 {
			return nil, errNoToken
		}
		return next(ctx, at)
	}))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer c.Close()
	if err := to(c, "kv").AddPeer(a.ch.HostPort()); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}
	if err := to(c, "kv").AddPeer(b.ch.HostPort()); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}
	if err := to(c, "kv").Connect(ctxTimeout(t)); err != nil {
		t.Fatalf("Connect: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	_, err = to(c, "kv").CallRaw(ctx, "echo", nil, []byte("block")) // its server answers only when released
	var ce *CallError
	if !errors.As(err, &ce) {
		t.Fatalf("CallRaw error = %v, want a %T", err, ce)
	}
	if !errors.Is(err, errNoToken) {
		t.Errorf("CallRaw error = %v, want %v", err, errNoToken)
	}
	if ce.Code != codes.Unexpected {
		t.Errorf("ce.Code = %v, want %v", ce.Code, codes.Unexpected)
	}
	if ce.Attempts != 1 {
		t.Errorf("attempts sent: the first only: got %v, want %v", ce.Attempts, 1)
	}
	if got := time.Since(start); got >= 2*time.Second {
		t.Errorf("the call waited for its stuck first attempt: got %v, want < %v", got, 2*time.Second)
	}
	testwait.Until(t, "the first attempt to reach its server", func() bool { return a.received.Load()+b.received.Load() == 1 })
	if got := a.received.Load() + b.received.Load(); got != 1 {
		t.Errorf("requests the servers received: got %v, want %v", got, 1)
	}
}
