package channel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentracing/opentracing-go"
	"github.com/opentracing/opentracing-go/mocktracer"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/decline"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/stats"
	"github.com/uber-go/tally/v4"
	"github.com/uber/tchannel-go"
	tjson "github.com/uber/tchannel-go/json"
	"github.com/uber/tchannel-go/raw"
)

// plainClient returns a plain tchannel-go channel: it sends what it is
// given, with none of a Sluice client's checks or retries.
func plainClient(t testing.TB, opts *tchannel.ChannelOptions) *tchannel.Channel {
	t.Helper()
	ch, err := tchannel.NewChannel("plain-client", opts)
	if err != nil {
		t.Fatalf("tchannel.NewChannel: %v", err)
	}
	t.Cleanup(ch.Close)
	return ch
}

// plainCall calls method of the server at hp through a plain tchannel-go
// channel, arguments as they are, in the given format.
func plainCall(t testing.TB, hp, method string, format tchannel.Format, arg2, arg3 []byte) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Limit)
	defer cancel()
	call, err := plainClient(t, nil).BeginCall(ctx, hp, "kv", method, &tchannel.CallOptions{Format: format})
	if err != nil {
		t.Fatalf("BeginCall: %v", err)
	}
	_, res, _, err := raw.WriteArgs(call, arg2, arg3)
	return res, err
}

// requireSystemError requires err to be a TChannel system error with code
// and returns its message.
func requireSystemError(t testing.TB, err error, code tchannel.SystemErrCode) string {
	t.Helper()
	var se tchannel.SystemError
	if !errors.As(err, &se) {
		t.Fatalf("want a %v system error, got %T %v: errors.As(err, &se) = false, want true", code, err, err)
	}
	if got := se.Code(); got != code {
		t.Fatalf("message: %s: got %v, want %v", se.Message(), got, code)
	}
	return se.Message()
}

func counter(scope tally.TestScope, name string) int64 {
	if c, ok := scope.Snapshot().Counters()[name+"+"]; ok {
		return c.Value()
	}
	return 0
}

// A request whose arguments exceed the server's limit is answered
// BAD_REQUEST, saying the limit, and never reaches the handler; one at the
// limit is served.
func TestOversizeRequestIsBadRequest(t *testing.T) {
	const limit = 1024
	for _, tc := range []struct {
		name, method string
		format       tchannel.Format
		arg2, arg3   []byte
	}{
		{"raw arg3", "echo", tchannel.Raw, nil, make([]byte, 64<<10)},
		{"raw arg2", "echo", tchannel.Raw, make([]byte, limit+1), nil},
		{"raw together", "echo", tchannel.Raw, make([]byte, limit/2), make([]byte, limit/2+1)},
		{"json arg3", "get", tchannel.JSON, nil, []byte(`{"Key":"` + strings.Repeat("k", 64<<10) + `"}`)},
		{"json headers", "get", tchannel.JSON, []byte(`{"who":"` + strings.Repeat("w", limit) + `"}`), []byte(`{"Key":"k"}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scope := tally.NewTestScope("", nil)
			s := startServer(t, WithMaxRequestSize(limit), WithScope(scope))
			_, err := plainCall(t, s.ch.HostPort(), tc.method, tc.format, tc.arg2, tc.arg3)
			msg := requireSystemError(t, err, tchannel.ErrCodeBadRequest)
			if !strings.Contains(msg, "1024 bytes") {
				t.Errorf("msg = %q, want it to contain %q", msg, "1024 bytes")
			}
			if got := s.received.Load(); got != 0 {
				t.Errorf("the handler ran: got %v, want 0", got)
			}
			if got := counter(scope, stats.ServerOversize); got != 1 {
				t.Errorf("counter(scope, stats.ServerOversize) = %v, want %v", got, 1)
			}
			if got := serverCalls(scope); got != 1 {
				t.Errorf("serverCalls(scope) = %v, want %v", got, 1)
			}
		})
	}
	t.Run("at the limit", func(t *testing.T) {
		s := startServer(t, WithMaxRequestSize(limit))
		arg3 := bytes.Repeat([]byte("x"), limit-1)
		res, err := plainCall(t, s.ch.HostPort(), "echo", tchannel.Raw, []byte("h"), arg3)
		if err != nil {
			t.Fatalf("plainCall: %v", err)
		}
		if !reflect.DeepEqual(res, arg3) {
			t.Errorf("res = %q, want %q", res, arg3)
		}
		js := []byte(`{"Key":"` + strings.Repeat("k", limit-len(`{"Key":""}`)) + `"}`)
		if len(js) != limit {
			t.Fatalf("len(js) = %d, want %d", len(js), limit)
		}
		_, err = plainCall(t, s.ch.HostPort(), "get", tchannel.JSON, nil, js)
		if err != nil {
			t.Fatalf("plainCall: %v", err)
		}
	})
}

// The server answers as soon as the limit is passed: it does not wait for
// (or buffer) the rest of the argument, which here never comes.
func TestOversizeIsAnsweredBeforeTheRestArrives(t *testing.T) {
	for _, method := range []string{"echo", "get"} {
		t.Run(method, func(t *testing.T) {
			s := startServer(t, WithMaxRequestSize(1024))
			ctx, cancel := context.WithTimeout(context.Background(), testwait.Limit)
			defer cancel()
			call, err := plainClient(t, nil).BeginCall(ctx, s.ch.HostPort(), "kv", method, nil)
			if err != nil {
				t.Fatalf("BeginCall: %v", err)
			}
			if err := tchannel.NewArgWriter(call.Arg2Writer()).Write(nil); err != nil {
				t.Fatalf("Write: %v", err)
			}
			w, err := call.Arg3Writer()
			if err != nil {
				t.Fatalf("Arg3Writer: %v", err)
			}
			_, err = w.Write(make([]byte, 2048))
			if err != nil {
				t.Fatalf("Write: %v", err)
			}
			if err := w.Flush(); err != nil {
				t.Fatalf("Flush: %v", err)
			} // sent, flagged "more to come"; nothing more is
			_, err = call.Response().Arg2Reader()
			requireSystemError(t, err, tchannel.ErrCodeBadRequest)
			if got := s.received.Load(); got != 0 {
				t.Errorf("the handler ran: got %v, want 0", got)
			}
		})
	}
}

// A JSON request whose headers or body is not valid JSON is answered
// BAD_REQUEST with the decoder's message, and never reaches the handler.
func TestMalformedJSONIsBadRequest(t *testing.T) {
	for _, tc := range []struct {
		name       string
		arg2, arg3 string
		want       string
	}{
		{"body", "", `{"Key":`, "malformed JSON request body: unexpected end of JSON input"},
		{"body syntax", "", `{"Key" "k"}`, "malformed JSON request body: invalid character"},
		{"body type", "", `["k"]`, "malformed JSON request body: json: cannot unmarshal array"},
		{"body trailing", "", `{"Key":"k"} {"Key":"j"}`, "malformed JSON request body: invalid character '{' after top-level value"},
		{"headers", `{"who":`, `{"Key":"k"}`, "malformed JSON request headers: unexpected end of JSON input"},
		{"headers type", `{"who":1}`, `{"Key":"k"}`, "malformed JSON request headers: json: cannot unmarshal number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scope := tally.NewTestScope("", nil)
			s := startServer(t, WithScope(scope))
			_, err := plainCall(t, s.ch.HostPort(), "get", tchannel.JSON, []byte(tc.arg2), []byte(tc.arg3))
			msg := requireSystemError(t, err, tchannel.ErrCodeBadRequest)
			if !strings.Contains(msg, tc.want) {
				t.Errorf("msg = %q, want it to contain %q", msg, tc.want)
			}
			if got := s.received.Load(); got != 0 {
				t.Errorf("the handler ran: got %v, want 0", got)
			}
			if got := counter(scope, stats.ServerMalformed); got != 1 {
				t.Errorf("counter(scope, stats.ServerMalformed) = %v, want %v", got, 1)
			}
		})
	}
}

type mapOrStruct struct{ N int }

// tchannel-go's own JSON client sees a Sluice JSON server as a tchannel-go
// one: headers both ways, map and struct arguments, empty arguments,
// application errors with tchannel-go's body, system errors as they are.
func TestJSONServerSpeaksTChannelJSON(t *testing.T) {
	s := startServer(t)
	if err := s.ch.RegisterJSON(map[string]any{
		"map": func(ctx tjson.Context, req map[string]any) (map[string]any, error) {
			return map[string]any{"got": req["n"], "none": req == nil}, nil
		},
		"nil": func(ctx tjson.Context, req *mapOrStruct) (*mapOrStruct, error) { return nil, nil },
		"declined": func(ctx tjson.Context, req *mapOrStruct) (*mapOrStruct, error) {
			return nil, Declined("not now")
		},
	}); err != nil {
		t.Fatalf("RegisterJSON: %v", err)
	}
	peer := plainClient(t, nil).Peers().GetOrAdd(s.ch.HostPort())
	call := func(ctx tjson.Context, method string, arg, res any) error {
		return tjson.CallPeer(ctx, peer, "kv", method, arg, res)
	}
	ctx := func() tjson.Context {
		ctx, cancel := tjson.NewContext(testwait.Limit)
		t.Cleanup(cancel)
		return tjson.WithHeaders(ctx, map[string]string{"who": "me"})
	}

	c := ctx()
	var out echoRes
	if err := call(c, "get", &echoReq{Key: "k"}, &out); err != nil {
		t.Fatalf("call: %v", err)
	}
	if want := (echoRes{Key: "k", Server: s.ch.HostPort()}); out != want {
		t.Errorf("out = %+v, want %+v", out, want)
	}
	if got, want := c.ResponseHeaders(), map[string]string{"seen": "me"}; !maps.Equal(got, want) {
		t.Errorf("c.ResponseHeaders() = %q, want %q", got, want)
	}

	var m map[string]any
	if err := call(ctx(), "map", map[string]any{"n": 7}, &m); err != nil {
		t.Fatalf("call: %v", err)
	}
	if want := map[string]any{"got": 7.0, "none": false}; !reflect.DeepEqual(m, want) {
		t.Errorf("m = %v, want %v", m, want)
	}

	var ms *mapOrStruct
	if err := call(ctx(), "nil", nil, &ms); err != nil {
		t.Fatalf("call: %v", err)
	}
	if ms != nil {
		t.Errorf("a nil result travels as null: got %+v, want nil", ms)
	}

	err := call(ctx(), "get", &echoReq{}, &out)
	var ae tjson.ErrApplication
	if !errors.As(err, &ae) {
		t.Fatalf("call error = %v, want a %T", err, ae)
	}
	if want := (tjson.ErrApplication{"type": "error", "message": "key is empty"}); !reflect.DeepEqual(ae, want) {
		t.Errorf("ae = %v, want %v", ae, want)
	}

	err = call(ctx(), "declined", &mapOrStruct{}, &ms)
	if err == nil {
		t.Fatal("call succeeded, want an error")
	}
	if !strings.Contains(err.Error(), "ErrCodeDeclined: not now") {
		t.Errorf("err.Error() = %q, want it to contain %q", err.Error(), "ErrCodeDeclined: not now")
	} // tchannel-go's client keeps only the text
}

// The JSON server answers in the bytes tchannel-go's JSON handler writes,
// headers included, whether they are plain (read and written without
// reflection) or not (left to encoding/json), for the same request.
func TestJSONServerWritesTChannelsBytes(t *testing.T) {
	echoHeaders := func(ctx tjson.Context, req map[string]any) (map[string]any, error) {
		ctx.SetResponseHeaders(ctx.Headers())
		return req, nil
	}
	s := startServer(t)
	registerJSONBothWays(t, s.ch, echoHeaders, "sluice", "tchannel")
	cl := plainClient(t, nil)
	call := func(method, arg2 string) (res [2]string, err error) {
		ctx, cancel := context.WithTimeout(context.Background(), testwait.Limit)
		defer cancel()
		c, err := cl.BeginCall(ctx, s.ch.HostPort(), "kv", method, &tchannel.CallOptions{Format: tchannel.JSON})
		if err != nil {
			return res, err
		}
		a2, a3, _, err := raw.WriteArgs(c, []byte(arg2), []byte(`{"n":1,"s":"<x>"}`))
		return [2]string{string(a2), string(a3)}, err
	}
	for _, arg2 := range []string{
		``,
		`{}`,
		`null`,
		`{"who":"me"}`,
		` {"b" : "2", "a":"1" ,"":""} `,
		`{"html":"<a&b>","quote":"\"","nl":"x\ny"}`,
		`{"lt":"<"}`, `{">":"gt"}`, `{"amp":"&"}`,
		`{"utf8":"é","esc":"\u00e9"}`,
		"{\"bad\":\"\xff\"}",
		`{"a":"1","a":"2"}`,
	} {
		want, err := call("tchannel", arg2)
		if err != nil {
			t.Fatalf("tchannel-go's handler, headers %q: %v", arg2, err)
		}
		got, err := call("sluice", arg2)
		if err != nil {
			t.Fatalf("Sluice's handler, headers %q: %v", arg2, err)
		}
		if got != want {
			t.Errorf("headers %q: Sluice answered %q, tchannel-go %q", arg2, got, want)
		}
	}
}

// A result JSON cannot encode is answered UNEXPECTED at once, naming the
// encoding error, not left half sent for the caller to wait out its
// deadline; the server serves the next request as before.
func TestJSONServerAnswersAnUnencodableResult(t *testing.T) {
	s := startServer(t)
	if err := s.ch.RegisterJSON(map[string]any{
		"nan": func(ctx tjson.Context, req map[string]any) (map[string]any, error) {
			ctx.SetResponseHeaders(map[string]string{"k": "v"})
			return map[string]any{"x": math.NaN()}, nil
		},
	}); err != nil {
		t.Fatal(err)
	}
	kv := to(sluiceClient(t, s.ch.HostPort()), "kv")
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Limit)
	defer cancel()
	start := time.Now()
	var out map[string]any
	err := kv.CallJSON(ctx, "nan", map[string]any{}, &out)
	var ce *CallError
	if !errors.As(err, &ce) || ce.Code != codes.Unexpected {
		t.Fatalf("call error = %v after %v, want an UNEXPECTED answer", err, time.Since(start))
	}
	if !strings.Contains(ce.Message, "cannot be encoded as JSON") || !strings.Contains(ce.Message, "NaN") {
		t.Errorf("message = %q, want it to say the result cannot be encoded, and why", ce.Message)
	}
	var res echoRes
	if err := kv.CallJSON(ctx, "get", &echoReq{Key: "k"}, &res); err != nil || res.Key != "k" {
		t.Errorf("the next call: %+v, %v; want key k", res, err)
	}
}

// The JSON server continues the caller's trace from the request headers, as
// tchannel-go's JSON handler does.
func TestJSONServerContinuesTheTrace(t *testing.T) {
	serverTracer, clientTracer := mocktracer.New(), mocktracer.New()
	s := startServer(t, WithTChannelOptions(tchannel.ChannelOptions{Tracer: serverTracer}))
	client := tjson.NewClient(plainClient(t, &tchannel.ChannelOptions{Tracer: clientTracer}), "kv",
		&tjson.ClientOptions{HostPort: s.ch.HostPort()})
	parent := clientTracer.StartSpan("caller")
	ctx, cancel := tjson.NewContext(testwait.Limit)
	defer cancel()
	var out echoRes
	if err := client.Call(tjson.Wrap(opentracing.ContextWithSpan(ctx, parent)), "get", &echoReq{Key: "k"}, &out); err != nil {
		t.Fatalf("Call: %v", err)
	}
	parent.Finish()

	var served *mocktracer.MockSpan
	testwait.Until(t, "the server's span of get", func() bool {
		for _, sp := range serverTracer.FinishedSpans() {
			if sp.OperationName == "get" {
				served = sp
				return true
			}
		}
		return false
	})
	if want := parent.Context().(mocktracer.MockSpanContext).TraceID; served.SpanContext.TraceID != want {
		t.Errorf("the server's span is not in the caller's trace: got %v, want %v", served.SpanContext.TraceID, want)
	}
	if served.ParentID == 0 {
		t.Errorf("served.ParentID = %v, want non-zero", served.ParentID)
	}
}

func okJSON(tjson.Context, *echoReq) (*echoRes, error) { return &echoRes{}, nil }

func okRaw(context.Context, *RawRequest) (*RawResponse, error) { return &RawResponse{}, nil }

// Registering a method twice, by any pair of means, is an error naming the
// method; the first handler stays.
func TestRegisteringAMethodTwiceIsAnError(t *testing.T) {
	for _, tc := range []struct {
		name   string
		second func(*Channel) error
		want   string
	}{
		{"raw then raw", func(c *Channel) error { return c.RegisterRaw("echo", okRaw) }, `RegisterRaw: method "echo" is already registered with RegisterRaw`},
		{"raw then json", func(c *Channel) error { return c.RegisterJSON(map[string]any{"echo": okJSON}) }, `RegisterJSON: method "echo" is already registered with RegisterRaw`},
		{"json then json", func(c *Channel) error { return c.RegisterJSON(map[string]any{"get": okJSON}) }, `RegisterJSON: method "get" is already registered with RegisterJSON`},
		{"json then raw", func(c *Channel) error { return c.RegisterRaw("get", okRaw) }, `RegisterRaw: method "get" is already registered with RegisterJSON`},
		{"registrar then raw", func(c *Channel) error {
			registrarOf(c).Register(tchannel.HandlerFunc(func(context.Context, *tchannel.InboundCall) {}), "thrift")
			return c.RegisterRaw("thrift", okRaw)
		}, `RegisterRaw: method "thrift" is already registered with RegisterHandler`},
		{"handler then handler", func(c *Channel) error {
			if err := c.RegisterHandler("own", tchannel.HandlerFunc(func(context.Context, *tchannel.InboundCall) {})); err != nil {
				return err
			}
			return c.RegisterHandler("own", tchannel.HandlerFunc(func(context.Context, *tchannel.InboundCall) {}))
		}, `RegisterHandler: method "own" is already registered with RegisterHandler`},
		{"raw then handler", func(c *Channel) error {
			return c.RegisterHandler("echo", tchannel.HandlerFunc(func(context.Context, *tchannel.InboundCall) {}))
		}, `RegisterHandler: method "echo" is already registered with RegisterRaw`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t)
			err := tc.second(s.ch)
			if err == nil {
				t.Fatal("second succeeded, want an error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err.Error() = %q, want it to contain %q", err.Error(), tc.want)
			}
			// The first handlers still serve.
			_, err = plainCall(t, s.ch.HostPort(), "echo", tchannel.Raw, nil, []byte("x"))
			if err != nil {
				t.Fatalf("plainCall: %v", err)
			}
			_, err = plainCall(t, s.ch.HostPort(), "get", tchannel.JSON, nil, []byte(`{"Key":"k"}`))
			if err != nil {
				t.Fatalf("plainCall: %v", err)
			}
			if got := s.received.Load(); got != 2 {
				t.Errorf("s.received.Load() = %v, want %v", got, 2)
			}
		})
	}
}

type notAHandler struct{}

// A RegisterJSON handler of the wrong shape is an error naming the method
// and the shape wanted, not a panic; and a map with one bad entry registers
// none of its handlers.
func TestRegisterJSONRejectsWrongShapes(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    any
		why  string
	}{
		{"string", "get", "is a string, not a function"},
		{"struct", notAHandler{}, "is a channel.notAHandler, not a function"},
		{"nil", nil, "is nil"},
		{"nil func", (func(tjson.Context, *echoReq) (*echoRes, error))(nil), "is a nil function"},
		{"arity", func(tjson.Context) error { return nil }, "takes 1 arguments and returns 1 results"},
		{"context", func(context.Context, *echoReq) (*echoRes, error) { return nil, nil }, "first argument is not a json.Context"},
		{"struct arg", func(tjson.Context, echoReq) (*echoRes, error) { return nil, nil }, "second argument is neither"},
		{"int map", func(tjson.Context, map[int]string) (*echoRes, error) { return nil, nil }, "second argument is neither"},
		{"result", func(tjson.Context, *echoReq) (string, error) { return "", nil }, "first result is neither"},
		{"error", func(tjson.Context, *echoReq) (*echoRes, string) { return nil, "" }, "second result is not an error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New("kv")
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			defer c.Close()
			err = c.RegisterJSON(map[string]any{"a-good": okJSON, "bad": tc.h, "z-good": okJSON})
			if err == nil {
				t.Fatal("RegisterJSON succeeded, want an error")
			}
			if !strings.Contains(err.Error(), `the handler of method "bad" `) {
				t.Errorf("err.Error() = %q, want it to contain %q", err.Error(), `the handler of method "bad" `)
			}
			if !strings.Contains(err.Error(), tc.why) {
				t.Errorf("err.Error() = %q, want it to contain %q", err.Error(), tc.why)
			}
			if want := "want func(json.Context, *Req) (*Resp, error)"; !strings.Contains(err.Error(), want) {
				t.Errorf("err.Error() = %q, want it to contain %q", err.Error(), want)
			}
			if err := c.RegisterJSON(map[string]any{"a-good": okJSON, "z-good": okJSON}); err != nil {
				t.Fatalf("the failed RegisterJSON registered some of its handlers: %v", err)
			}
		})
	}
	t.Run("duplicate", func(t *testing.T) {
		c, err := New("kv")
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		defer c.Close()
		if err := c.RegisterRaw("taken", okRaw); err != nil {
			t.Fatalf("RegisterRaw: %v", err)
		}
		if err := c.RegisterJSON(map[string]any{"a-new": okJSON, "taken": okJSON}); err == nil || !strings.Contains(err.Error(), `"taken" is already registered`) {
			t.Fatalf("RegisterJSON error = %v, want an error containing %q", err, `"taken" is already registered`)
		}
		if err := c.RegisterRaw("a-new", okRaw); err != nil {
			t.Fatalf("the failed RegisterJSON registered a-new: %v", err)
		}
	})
	t.Run("empty name", func(t *testing.T) {
		c, err := New("kv")
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		defer c.Close()
		if err := c.RegisterJSON(map[string]any{"": okJSON}); err == nil || !strings.Contains(err.Error(), "a method name is empty") {
			t.Fatalf("RegisterJSON error = %v, want an error containing %q", err, "a method name is empty")
		}
	})
}

// A tchannel.Registrar cannot return an error: registering through it a
// method registered with RegisterRaw or RegisterJSON panics, at start-up,
// saying so; registering through it again replaces, as on tchannel-go.
func TestRegistrarDuplicates(t *testing.T) {
	s := startServer(t)
	nop := tchannel.HandlerFunc(func(context.Context, *tchannel.InboundCall) {})
	for _, m := range []string{"echo", "get"} {
		func() {
			defer func() {
				r := recover()
				if r == nil {
					t.Fatalf("registering %q again through the Registrar did not panic", m)
				}
				if want := fmt.Sprintf("method %q is already registered with Register", m); !strings.Contains(fmt.Sprint(r), want) {
					t.Errorf("panic %q, want it to contain %q", fmt.Sprint(r), want)
				}
			}()
			registrarOf(s.ch).Register(nop, m)
		}()
	}
	_, err := plainCall(t, s.ch.HostPort(), "echo", tchannel.Raw, nil, []byte("x"))
	if err != nil {
		t.Fatalf("the raw handler was replaced: %v", err)
	}

	answer := func(text string) tchannel.Handler {
		return tchannel.HandlerFunc(func(ctx context.Context, call *tchannel.InboundCall) {
			if _, _, err := raw.ReadArgsV2(call); err == nil {
				_ = raw.WriteResponse(call.Response(), &raw.Res{Arg3: []byte(text)})
			}
		})
	}
	registrarOf(s.ch).Register(answer("first"), "thrift")
	registrarOf(s.ch).Register(answer("second"), "thrift")
	res, err := plainCall(t, s.ch.HostPort(), "thrift", tchannel.Raw, nil, nil)
	if err != nil {
		t.Fatalf("plainCall: %v", err)
	}
	if string(res) != "second" {
		t.Errorf("string(res) = %q, want %q", string(res), "second")
	}
}

// A request reaching a closing server is declined before any handler runs,
// with the mark that tells Sluice clients no handler ran.
func TestClosingServerDeclinesEarly(t *testing.T) {
	for _, tc := range []struct {
		method string
		format tchannel.Format
		arg3   string
	}{{"echo", tchannel.Raw, "x"}, {"get", tchannel.JSON, `{"Key":"k"}`}} {
		t.Run(tc.method, func(t *testing.T) {
			scope := tally.NewTestScope("", nil)
			s := startServer(t, WithScope(scope))
			s.ch.declining.Store(true)                        // where Close starts
			t.Cleanup(func() { s.ch.declining.Store(false) }) // runs before startServer's Close, so it closes
			_, err := plainCall(t, s.ch.HostPort(), tc.method, tc.format, nil, []byte(tc.arg3))
			msg := requireSystemError(t, err, tchannel.ErrCodeDeclined)
			if !decline.Early(msg) {
				t.Errorf("the decline is not marked early: %q: decline.Early(msg) = false, want true", msg)
			}
			if got := s.received.Load(); got != 0 {
				t.Errorf("the handler ran: got %v, want 0", got)
			}
			if got := serverCalls(scope); got != 1 {
				t.Errorf("serverCalls(scope) = %v, want %v", got, 1)
			}
		})
	}
}

// TestRawHandlerOwnsItsArguments: a raw handler may keep a request's
// arguments: later requests, of any size around the buffer requests are
// read into first (rawArgBuf), sequential or concurrent, never change
// them. Small arguments hold about their own size.
func TestRawHandlerOwnsItsArguments(t *testing.T) {
	srv, err := New("kv")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var (
		mu   sync.Mutex
		kept = map[string]*RawRequest{} // by arg2, the request's name
	)
	if err := srv.RegisterRaw("keep", func(ctx context.Context, req *RawRequest) (*RawResponse, error) {
		mu.Lock()
		kept[string(req.Arg2)] = req
		mu.Unlock()
		return &RawResponse{}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := srv.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	// Arg2 names the request and fills it to n2 bytes; arg3 is n3 bytes
	// of the name's first byte.
	type sent struct{ arg2, arg3 []byte }
	var all []sent
	request := func(name string, n2, n3 int) sent {
		arg2 := []byte(name)
		arg2 = append(arg2, bytes.Repeat([]byte{'.'}, max(0, n2-len(arg2)))...)
		return sent{arg2, bytes.Repeat(arg2[:1], n3)}
	}
	sizes := []int{0, 1, 5, rawArgBuf - 40, rawArgBuf, rawArgBuf + 1, 5000}
	for i, n := range sizes {
		all = append(all, request(fmt.Sprintf("%c-seq-%d", 'a'+i, i), 20, n), request(fmt.Sprintf("%c-big2-%d", 'a'+i, i), rawArgBuf+n, n))
	}
	for g := range 8 {
		for i := range 40 {
			all = append(all, request(fmt.Sprintf("%c-par-%d-%d", 'A'+g, g, i), 20, sizes[(g+i)%len(sizes)]))
		}
	}
	send := func(r sent) {
		if _, _, _, err := raw.Call(ctxTimeout(t), plainClient(t, nil), srv.HostPort(), "kv", "keep", r.arg2, r.arg3); err != nil {
			t.Errorf("request %.12q: %v", r.arg2, err)
		}
	}
	seq := 2 * len(sizes)
	for _, r := range all[:seq] {
		send(r)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for _, r := range all[seq+40*g : seq+40*(g+1)] {
				send(r)
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for _, r := range all {
		req := kept[string(r.arg2)]
		if req == nil {
			t.Errorf("request %.12q: the handler never saw it", r.arg2)
			continue
		}
		if !bytes.Equal(req.Arg3, r.arg3) {
			t.Errorf("request %.12q: its arg3 (%d bytes) reads %.20q... after later requests", r.arg2, len(r.arg3), req.Arg3)
		}
	}
	if req := kept[string(all[2].arg2)]; req != nil && cap(req.Arg2)+cap(req.Arg3) >= 64 {
		t.Errorf("a request of %d bytes holds %d", len(req.Arg2)+len(req.Arg3), cap(req.Arg2)+cap(req.Arg3))
	}
}
