package thrift

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"strconv"
	"sync"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/internal/chanhook"
	"github.com/sluice-rpc/sluice/internal/decline"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/sluice-rpc/sluice/stats"
	"github.com/uber-go/tally/v4"
	"github.com/uber/tchannel-go"
	athrift "github.com/uber/tchannel-go/thirdparty/github.com/apache/thrift/lib/go/thrift"
	tthrift "github.com/uber/tchannel-go/thrift"
)

// Server is tchannel-go's Thrift server, every method of it, registering on
// a Sluice Channel: its registrations sit behind the Channel's server guard
// (request counting, load shedding, declining while the Channel closes), and
// Register bounds the request bodies of the services registered on it.
type Server struct {
	*tthrift.Server
	limit    int64
	oversize tally.Counter
	// answered tells the Channel's server metrics how a call is answered.
	answered func(ctx context.Context, err error, appError bool)
	// inbound runs the Channel's inbound middleware; nil without any.
	inbound func(ctx context.Context, method string, f tchannel.Format, h map[string]string, next func(context.Context) error) error
}

// NewServer returns a Server that registers its handlers on ch, so requests
// beyond ch's shedding limits are answered Busy before any handler runs.
// Register generated handlers on it as on any tchannel-go Thrift server:
//
//	NewServer(ch).Register(keyvalue.NewTChanKeyValueServer(handler))
//
// Register handlers before ch starts listening. Handlers read request
// headers with ctx.Headers() and set response headers with
// ctx.SetResponseHeaders; a handler that returns channel.Busy(...) answers
// Busy, which the calling Sluice clients throttle and may retry elsewhere.
// Unlike on a plain tchannel-go channel, the Thrift meta service (health
// checks) is registered under ch's own service name only.
//
// It panics if ch is nil, as a Thrift server of no Channel cannot serve.
func NewServer(ch *channel.Channel) *Server {
	ss, err := chanhook.ServerOf(ch)
	if err != nil {
		panic("sluice: thrift: NewServer: " + err.Error())
	}
	return &Server{Server: tthrift.NewServer(ss.Registrar), limit: ss.MaxRequestSize,
		oversize: ss.Scope.Counter(stats.ServerOversize), inbound: ss.Inbound, answered: ss.Answered}
}

// Register registers svr's methods as tchannel-go's Register does, and
// bounds each request's body (arg3) by the Channel's maximum request size
// (channel.WithMaxRequestSize): a body longer than that, or one that
// declares a string, binary or container longer than the bytes left under
// the limit, is answered BAD_REQUEST as soon as it is seen, before the
// handler runs, without reading further or allocating for what was
// declared, and counted on stats.ServerOversize.
//
// What it does not bound: the request headers (arg2), which tchannel-go
// reads whole before the body, and the Thrift meta service that NewServer
// registers (tchannel-go's own, registered before Register can wrap it).
func (s *Server) Register(svr tthrift.TChanServer, opts ...tthrift.RegisterOption) {
	s.Server.Register(bounded{TChanServer: svr, s: s}, opts...)
}

// bounded is a TChanServer whose requests are decoded through a limit.
type bounded struct {
	tthrift.TChanServer
	s *Server
}

var protocols = sync.Pool{New: func() any {
	p := &limitedProtocol{}
	p.TBinaryProtocol = athrift.NewTBinaryProtocolTransport(&p.t)
	return p
}}

func (b bounded) Handle(ctx tthrift.Context, method string, p athrift.TProtocol) (success bool, res athrift.TStruct, err error) {
	tr, ok := p.Transport().(transport)
	if !ok {
		tr = athrift.NewTRichTransport(p.Transport())
	}
	if b.s.inbound != nil {
		success, res, err = b.handleVia(ctx, method, tr)
	} else {
		success, res, err = b.decode(ctx, method, tr)
	}
	answer := err
	if _, ok := err.(athrift.TProtocolException); ok {
		answer = errProtocol // tchannel-go's Thrift server answers it BAD_REQUEST
	}
	b.s.answered(ctx, answer, !success)
	return success, res, err
}

// errProtocol stands, for the server metrics, for the BAD_REQUEST answer
// of a request the generated code could not decode.
var errProtocol = tchannel.NewSystemError(tchannel.ErrCodeBadRequest, "the request could not be decoded")

// decode decodes the request from tr through the limit and runs the
// handler.
func (b bounded) decode(ctx tthrift.Context, method string, tr transport) (bool, athrift.TStruct, error) {
	lp := protocols.Get().(*limitedProtocol)
	defer func() {
		lp.t = limitedTransport{} // keep nothing of this request
		protocols.Put(lp)
	}()
	lp.t = limitedTransport{transport: tr, left: b.s.limit}
	success, res, err := b.TChanServer.Handle(ctx, method, lp)
	if lp.t.over {
		return false, nil, b.tooLarge()
	}
	return success, res, handlerError(err)
}

// tooLarge counts a request over the limit and returns its answer.
func (b bounded) tooLarge() error {
	b.s.oversize.Inc(1)
	return tchannel.NewSystemError(tchannel.ErrCodeBadRequest,
		"request too large: its Thrift body is more than %d bytes, the server's limit; send a smaller request", b.s.limit)
}

// handlerError is err as tchannel-go's Thrift server should answer it: a
// system error, wrapped or not, answers with its code (tchannel-go looks
// only at an unwrapped one), after decline.HandlerError.
func handlerError(err error) error {
	if err == nil {
		return nil
	}
	err = decline.HandlerError(err)
	var se tchannel.SystemError
	if errors.As(err, &se) {
		return se
	}
	return err
}

// errNoResult answers a call whose inbound middleware returned nil with no
// result of the handler to send (it did not call next, or dropped the error
// next returned): a Thrift answer is the method's result struct, which only
// the handler produces.
var errNoResult = tchannel.NewSystemError(tchannel.ErrCodeUnexpected,
	"an inbound middleware returned no error but the handler left no result (next was not called, or its error was dropped); a middleware refuses a Thrift call by returning an error")

// bodies holds the buffers request bodies are read into before the
// inbound middleware runs. One grown past maxBodyBuf is left to the
// garbage collector.
var bodies = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

const maxBodyBuf = 64 << 10

// handleVia reads the request body whole through the limit (a body over it
// is answered BAD_REQUEST before any middleware runs), then runs the
// inbound middleware, whose next decodes the body and runs the handler with
// the context next is given, wrapped into a Thrift context that shares
// ctx's request and response headers (tchannel-go's Wrap keeps the headers
// of the context it wraps), so the response headers the handler sets are
// answered.
func (b bounded) handleVia(ctx tthrift.Context, method string, tr transport) (bool, athrift.TStruct, error) {
	bp := bodies.Get().(*[]byte)
	lt := limitedTransport{transport: tr, left: b.s.limit}
	body, err := readBody(&lt, (*bp)[:0])
	defer func() {
		if cap(body) <= maxBodyBuf {
			*bp = body[:0]
			bodies.Put(bp)
		}
	}()
	switch {
	case lt.over:
		return false, nil, b.tooLarge()
	case err != nil:
		return false, nil, athrift.NewTProtocolException(err)
	}

	var (
		success bool
		res     athrift.TStruct
	)
	err = b.s.inbound(ctx, b.Service()+"::"+method, tchannel.Thrift, ctx.Headers(), func(mctx context.Context) error {
		tctx, ok := mctx.(tthrift.Context)
		if !ok {
			tctx = tthrift.Wrap(mctx)
		}
		var err error
		// A fresh reader of the body for each call of next.
		success, res, err = b.decode(tctx, method, &athrift.TMemoryBuffer{Buffer: bytes.NewBuffer(body)})
		return err
	})
	switch {
	case err != nil:
		return false, nil, handlerError(err)
	case res == nil:
		return false, nil, errNoResult
	}
	return success, res, nil
}

// readBody appends what t reads, until its end, to buf.
func readBody(t *limitedTransport, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := t.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// errTooLarge ends the decoding of a request over the limit; bounded.Handle
// answers it with a message saying the limit.
var errTooLarge = athrift.NewTProtocolExceptionWithType(athrift.SIZE_LIMIT, errors.New("request too large"))

// transport is what the binary protocol reads from.
type transport interface {
	athrift.TTransport
	athrift.TRichTransport
}

// limitedTransport reads at most one byte past the limit from the request
// body, and marks the request over the limit when it does.
type limitedTransport struct {
	transport
	left int64 // bytes that may still be read; -1 once over
	over bool
}

func (t *limitedTransport) tooLarge() error {
	t.over = true
	return errTooLarge
}

func (t *limitedTransport) Read(b []byte) (int, error) {
	if int64(len(b)) > t.left {
		b = b[:max(t.left+1, 0)]
	}
	n, err := t.transport.Read(b)
	if t.left -= int64(n); t.left < 0 {
		return n, t.tooLarge()
	}
	return n, err
}

func (t *limitedTransport) ReadByte() (byte, error) {
	c, err := t.transport.ReadByte()
	if err == nil {
		if t.left--; t.left < 0 {
			return c, t.tooLarge()
		}
	}
	return c, err
}

// RemainingBytes is what the binary protocol checks declared lengths
// against before allocating for them.
func (t *limitedTransport) RemainingBytes() uint64 { return uint64(max(t.left, 0)) }

// limitedProtocol is the binary protocol reading through a limitedTransport,
// refusing declared lengths beyond what is left: the binary protocol would
// allocate for a string or binary first, and the generated code allocates
// for a container's declared count.
type limitedProtocol struct {
	*athrift.TBinaryProtocol
	t     limitedTransport
	small [64]byte // short strings are read here, not into a new buffer
}

// length reads a string's or binary's length.
func (p *limitedProtocol) length() (int, error) {
	n, err := p.ReadI32()
	switch {
	case err != nil:
		return 0, err
	case n < 0:
		return 0, athrift.NewTProtocolExceptionWithType(athrift.NEGATIVE_SIZE, fmt.Errorf("negative length %d", n))
	case int64(n) > p.t.left:
		return 0, p.t.tooLarge()
	}
	return int(n), nil
}

func (p *limitedProtocol) ReadString() (string, error) {
	n, err := p.length()
	if err != nil {
		return "", err
	}
	b := p.small[:0]
	if n > len(p.small) {
		b = make([]byte, n)
	}
	_, err = io.ReadFull(&p.t, b[:n])
	return string(b[:n]), athrift.NewTProtocolException(err)
}

func (p *limitedProtocol) ReadBinary() ([]byte, error) {
	n, err := p.length()
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	_, err = io.ReadFull(&p.t, b)
	return b, athrift.NewTProtocolException(err)
}

// count refuses a container's element count if its elements, at least a
// byte each, cannot fit in what is left.
func (p *limitedProtocol) count(n int, err error) (int, error) {
	if err == nil && int64(n) > p.t.left {
		return n, p.t.tooLarge()
	}
	return n, err
}

func (p *limitedProtocol) ReadListBegin() (athrift.TType, int, error) {
	et, n, err := p.TBinaryProtocol.ReadListBegin()
	n, err = p.count(n, err)
	return et, n, err
}

func (p *limitedProtocol) ReadSetBegin() (athrift.TType, int, error) {
	et, n, err := p.TBinaryProtocol.ReadSetBegin()
	n, err = p.count(n, err)
	return et, n, err
}

func (p *limitedProtocol) ReadMapBegin() (athrift.TType, athrift.TType, int, error) {
	kt, vt, n, err := p.TBinaryProtocol.ReadMapBegin()
	n, err = p.count(n, err)
	return kt, vt, n, err
}

// Skip skips a field through the limits above (the binary protocol's own
// Skip would call its own methods).
func (p *limitedProtocol) Skip(t athrift.TType) error { return athrift.SkipDefaultDepth(p, t) }

// PreviousAttempts returns how many attempts of the call being handled were
// sent before this one: 0 for an original request, 1 for the first retry or
// hedge, and so on. It reads the previous-rpc-attempts request header and
// returns 0 when the header is absent or is not a non-negative number.
func PreviousAttempts(ctx tthrift.Context) int {
	v, ok := ctx.Headers()[retry.AttemptsHeader]
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// SetPushback adds a retry-pushback-ms header to the response of the call
// being handled, telling a retrying client to wait exactly p.Delay before its
// next attempt (retry.PushbackAfter) or not to retry at all
// (retry.PushbackStopped). The response headers set so far are kept; the map
// the handler set is not modified. retry.Pushback{} (PushbackNone) removes
// the header. Use it in handlers of ctx created by the Thrift server, whose
// response headers are settable.
//
// Headers travel only on answers that reach the caller (successes and
// declared exceptions), which Sluice never retries: the header informs
// clients that retry application errors themselves. To make Sluice clients
// wait, answer a TChannel error instead: channel.BusyAfter(d, ...) carries
// the same hint in its message.
func SetPushback(ctx tthrift.Context, p retry.Pushback) {
	h := maps.Clone(ctx.ResponseHeaders())
	v := retry.FormatPushback(p)
	if v == "" {
		if _, ok := h[retry.PushbackHeader]; !ok {
			return
		}
		delete(h, retry.PushbackHeader)
	} else {
		if h == nil {
			h = make(map[string]string, 1)
		}
		h[retry.PushbackHeader] = v
	}
	ctx.SetResponseHeaders(h)
}
