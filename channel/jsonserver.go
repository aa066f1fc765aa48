package channel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/decline"
	"github.com/sluice-rpc/sluice/internal/jsonheaders"

	"github.com/uber/tchannel-go"
	tjson "github.com/uber/tchannel-go/json"
)

// RegisterJSON registers tchannel-go JSON handlers by method name: each is a
// func(json.Context, *Req) (*Resp, error) of package
// github.com/uber/tchannel-go/json, where Req and Resp are structs (or the
// argument and result are map[string]T), so existing handlers move over as
// they are. Returning an error made with Busy or Declined answers with that
// TChannel code; any other error is an application error whose body is
// {"type":"error","message":...}.
//
// Every request gets an answer: one whose headers (arg2) or body (arg3) is
// not valid JSON is answered BAD_REQUEST with the decoder's message, and one
// whose arguments exceed the Channel's maximum request size
// (WithMaxRequestSize) is answered BAD_REQUEST as soon as the limit is
// passed; neither reaches the handler.
//
// Registration is all or nothing: if a method is already registered, by any
// means, or a handler does not have the shape above, RegisterJSON returns an
// error naming the method and registers none of handlers.
func (c *Channel) RegisterJSON(handlers map[string]any) error {
	methods := make([]string, 0, len(handlers))
	for m := range handlers {
		methods = append(methods, m)
	}
	sort.Strings(methods) // the first bad entry, in order, is the one reported
	hs := make([]*jsonHandler, len(methods))
	for i, m := range methods {
		h, err := newJSONHandler(c, m, handlers[m])
		if err != nil {
			return err
		}
		hs[i] = h
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	registered := c.registeredWith()
	for _, m := range methods {
		if via := registered[m]; via != "" {
			return errRegistered(viaJSON, m, via)
		}
	}
	for i, m := range methods {
		c.register(viaJSON, m, hs[i].stats, hs[i])
	}
	return nil
}

var (
	typeOfJSONContext = reflect.TypeFor[tjson.Context]()
	typeOfError       = reflect.TypeFor[error]()
)

// jsonShape is the shape RegisterJSON's errors ask for.
const jsonShape = "want func(json.Context, *Req) (*Resp, error) with Req and Resp structs, or map[string]T in place of *Req or *Resp"

// jsonHandler serves one JSON method. It reads and answers the call as
// tchannel-go's JSON handler does, and also answers the requests that one
// drops: malformed JSON and arguments over the size limit.
type jsonHandler struct {
	c        *Channel
	fn       reflect.Value
	argType  reflect.Type // what the body decodes into: a struct or a map
	argIsMap bool
	// errNilable: a nil value of the function's error result is no error
	// (its type is an interface or a pointer, not a struct).
	errNilable bool
	mw         InboundMiddleware // nil without any
	limit      int64
	stats      *serverStats
}

func newJSONHandler(c *Channel, method string, f any) (*jsonHandler, error) {
	if method == "" {
		return nil, errors.New("channel: RegisterJSON: a method name is empty; name every method")
	}
	fail := func(what string) error {
		return fmt.Errorf("channel: RegisterJSON: the handler of method %q %s; %s", method, what, jsonShape)
	}
	v := reflect.ValueOf(f)
	switch {
	case !v.IsValid():
		return nil, fail("is nil")
	case v.Kind() != reflect.Func:
		return nil, fail(fmt.Sprintf("is a %T, not a function", f))
	case v.IsNil():
		return nil, fail("is a nil function")
	}
	t := v.Type()
	argOrRes := func(t reflect.Type) bool {
		return t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct ||
			t.Kind() == reflect.Map && t.Key().Kind() == reflect.String
	}
	switch {
	case t.NumIn() != 2 || t.NumOut() != 2:
		return nil, fail(fmt.Sprintf("is a %v, which takes %d arguments and returns %d results", t, t.NumIn(), t.NumOut()))
	case t.In(0) != typeOfJSONContext:
		return nil, fail(fmt.Sprintf("is a %v, whose first argument is not a json.Context", t))
	case !argOrRes(t.In(1)):
		return nil, fail(fmt.Sprintf("is a %v, whose second argument is neither a pointer to a struct nor a map with string keys", t))
	case !argOrRes(t.Out(0)):
		return nil, fail(fmt.Sprintf("is a %v, whose first result is neither a pointer to a struct nor a map with string keys", t))
	case !t.Out(1).AssignableTo(typeOfError):
		return nil, fail(fmt.Sprintf("is a %v, whose second result is not an error", t))
	}
	h := &jsonHandler{c: c, fn: v, argType: t.In(1), argIsMap: t.In(1).Kind() == reflect.Map,
		mw: c.inboundMiddleware(), limit: c.o.maxRequest, stats: c.serverStats()}
	if !h.argIsMap {
		h.argType = h.argType.Elem()
	}
	switch t.Out(1).Kind() {
	case reflect.Interface, reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		h.errNilable = true
	}
	return h, nil
}

// jsonBufs holds the buffers JSON requests are read into: JSON decoding
// copies what it keeps, so a buffer serves request after request. One grown
// past maxJSONBuf by a large request is left to the garbage collector.
var jsonBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

const maxJSONBuf = 64 << 10

// jsonError is the body of an application error, as tchannel-go writes it.
type jsonError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

func (h *jsonHandler) Handle(tctx context.Context, call *tchannel.InboundCall) { h.serve(tctx, call) }

// serve serves call and says how it answered (answerer).
func (h *jsonHandler) serve(tctx context.Context, call *tchannel.InboundCall) answer {
	bp := jsonBufs.Get().(*[]byte)
	buf := (*bp)[:0]
	defer func() {
		if cap(buf) <= maxJSONBuf {
			*bp = buf[:0]
			jsonBufs.Put(bp)
		}
	}()

	// As tchannel-go: the headers, then the span they carry, then the body.
	buf, failed := readArg(call, call.Arg2Reader, buf, h.limit, h.stats)
	if failed != codes.OK {
		return answered(failed, false)
	}
	var headers map[string]string
	if len(buf) > 0 { // TChannel allows an empty argument for no headers
		var plain bool
		if headers, plain = jsonheaders.Parse(buf); !plain {
			if err := json.Unmarshal(buf, &headers); err != nil {
				return h.malformed(call, "malformed JSON request headers: %v", err)
			}
		}
	}
	tctx = tchannel.ExtractInboundSpan(tctx, call, headers, h.c.tch.Tracer())
	ctx := tjson.WithHeaders(tctx, headers)

	n2 := len(buf)
	buf, failed = readArg(call, call.Arg3Reader, buf, h.limit, h.stats)
	if failed != codes.OK {
		return answered(failed, false)
	}
	argp := reflect.New(h.argType)
	if body := buf[n2:]; len(body) > 0 {
		if err := json.Unmarshal(body, argp.Interface()); err != nil {
			return h.malformed(call, "malformed JSON request body: %v", err)
		}
	}
	arg := argp
	if h.argIsMap {
		arg = argp.Elem() // the handler takes the map itself
	}

	var (
		res any
		err error
	)
	if h.mw == nil {
		res, err = h.call(ctx, arg)
	} else {
		res, err = h.serveVia(ctx, call, headers, arg)
	}
	return h.respond(ctx, call.Response(), res, err)
}

// respond answers a request whose handler returned res and err. It is a
// function of its own so that serve's frame, which stays on the stack
// under the handler's, does not hold the answer's locals (they would add
// 192 bytes to it, and 1 to 2 points to BenchmarkJSONServerPaired).
func (h *jsonHandler) respond(ctx tjson.Context, resp *tchannel.InboundCallResponse, res any, err error) answer {
	if err != nil {
		// A system error answers with its code, wrapped or not (as for raw
		// handlers; tchannel-go's JSON handler sees only an unwrapped one).
		var se tchannel.SystemError
		if errors.As(decline.HandlerError(err), &se) {
			_ = resp.SendSystemError(se)
			return answered(codes.Code(se.Code()), false)
		}
		_ = resp.SetApplicationError()
		res = jsonError{Type: "error", Message: err.Error()}
	}
	// Both arguments are encoded before either is sent: a result that
	// JSON cannot encode (a NaN, a channel) is answered UNEXPECTED, not
	// left half sent for the caller to wait out.
	out := jsonOuts.Get().(*jsonOut)
	defer out.release()
	if encErr := out.encode(ctx.ResponseHeaders(), res); encErr != nil {
		_ = resp.SendSystemError(tchannel.NewSystemError(tchannel.ErrCodeUnexpected,
			"the handler's result cannot be encoded as JSON: %v", encErr))
		return answered(codes.Unexpected, false)
	}
	if tchannel.NewArgWriter(resp.Arg2Writer()).Write(out.hdr) != nil ||
		tchannel.NewArgWriter(resp.Arg3Writer()).Write(out.body.Bytes()) != nil {
		return answered(codes.Cancelled, false)
	}
	return answered(codes.OK, err != nil)
}

// jsonOut is a response's arguments encoded as tchannel-go's WriteJSON
// encodes them (encoding/json's Encoder: a newline after each value), in
// buffers that serve response after response.
type jsonOut struct {
	hdr  []byte
	body bytes.Buffer
	enc  *json.Encoder // writes to body
}

var jsonOuts = sync.Pool{New: func() any {
	o := new(jsonOut)
	o.enc = json.NewEncoder(&o.body)
	return o
}}

// encode encodes the headers h and the result v. Plain headers, nearly
// all, are encoded without reflection, in the same bytes (jsonheaders).
func (o *jsonOut) encode(h map[string]string, v any) error {
	o.body.Reset()
	if err := o.enc.Encode(v); err != nil {
		return err
	}
	hdr, ok := jsonheaders.Append(o.hdr[:0], h)
	if !ok {
		b, err := json.Marshal(h) // as the Encoder, but for the newline
		if err != nil {
			return err
		}
		hdr = append(o.hdr[:0], b...)
	}
	o.hdr = append(hdr, '\n')
	return nil
}

// release puts o back in the pool, unless a large response grew it.
func (o *jsonOut) release() {
	if o.body.Cap() <= maxJSONBuf && cap(o.hdr) <= maxJSONBuf {
		jsonOuts.Put(o)
	}
}

// call runs the handler with ctx and arg, and returns its result and its
// error (nil if it returned none).
func (h *jsonHandler) call(ctx tjson.Context, arg reflect.Value) (any, error) {
	out := h.fn.Call([]reflect.Value{reflect.ValueOf(ctx), arg})
	if ev := out[1]; !h.errNilable || !ev.IsNil() {
		return out[0].Interface(), ev.Interface().(error)
	}
	return out[0].Interface(), nil
}

// emptyObject is the answer of a middleware that returns nil without
// calling next: the JSON object {}, which decodes without error into the
// handler's response type (a struct or a map) in any client.
var emptyObject = struct{}{}

// serveVia runs the handler behind the inbound middleware. next wraps the
// context it is given, if it is not a json.Context, into one that shares
// the request and response headers ctx carries (tchannel.Wrap keeps the
// headers of the context it wraps, where json.Wrap would start empty ones),
// so the handler reads the request headers and the response headers it
// sets are answered.
func (h *jsonHandler) serveVia(ctx tjson.Context, call *tchannel.InboundCall, headers map[string]string, arg reflect.Value) (any, error) {
	in := inboundOf(call, tchannel.JSON, headers)
	var (
		res any
		ran bool
	)
	err := h.mw(ctx, in, func(mctx context.Context) error {
		ran = true
		jctx, ok := mctx.(tjson.Context)
		if !ok {
			jctx = tchannel.Wrap(mctx) // json.Wrap would drop the headers
		}
		var err error
		res, err = h.call(jctx, arg)
		return err
	})
	if !ran {
		res = emptyObject
	}
	return res, err
}

// malformed answers call BAD_REQUEST and counts it.
func (h *jsonHandler) malformed(call *tchannel.InboundCall, format string, args ...any) answer {
	h.stats.malformed.Inc(1)
	_ = call.Response().SendSystemError(tchannel.NewSystemError(tchannel.ErrCodeBadRequest, format, args...))
	return answered(codes.BadRequest, false)
}
