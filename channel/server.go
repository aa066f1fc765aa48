package channel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/sluice-rpc/sluice/internal/decline"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/criticality"
	"github.com/sluice-rpc/sluice/internal/config"
	"github.com/sluice-rpc/sluice/internal/recorder"
	"github.com/sluice-rpc/sluice/internal/shedlimit"
	"github.com/sluice-rpc/sluice/internal/tchconn"
	"github.com/sluice-rpc/sluice/shed"
	"github.com/sluice-rpc/sluice/stats"
	"github.com/uber-go/tally/v4"
	"github.com/uber/tchannel-go"
	"golang.org/x/time/rate"
)

// RawRequest is an inbound raw call.
type RawRequest struct {
	Caller, Method string
	Arg2, Arg3     []byte
}

// RawResponse is the answer to a raw call. AppError marks an application
// error: a successful transport that callers never retry.
type RawResponse struct {
	Arg2, Arg3 []byte
	AppError   bool
}

// RawHandler serves raw calls. Returning an error made with Busy or
// Declined answers with that TChannel code; any other error answers
// Unexpected.
type RawHandler func(ctx context.Context, req *RawRequest) (*RawResponse, error)

// RegisterRaw registers h for method of the Channel's service. Each method
// is registered once: registering a method again, by any means, is an
// error. Requests whose arguments exceed the Channel's maximum request size
// (WithMaxRequestSize) are answered BAD_REQUEST as soon as the limit is
// passed, before h runs and without buffering the rest.
func (c *Channel) RegisterRaw(method string, h RawHandler) error {
	if method == "" || h == nil {
		return errors.New("channel: RegisterRaw needs a method name and a handler")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if via := c.registeredWith()[method]; via != "" {
		return errRegistered(viaRaw, method, via)
	}
	st := c.serverStats()
	c.register(viaRaw, method, st, &rawHandler{h: h, mw: c.inboundMiddleware(), limit: c.o.maxRequest, stats: st})
	return nil
}

// How a method was registered, as registration errors name it.
const (
	viaRaw       = "RegisterRaw"
	viaJSON      = "RegisterJSON"
	viaRegistrar = "RegisterHandler"
	viaTChannel  = "the underlying TChannel"
)

// registeredWith returns how each method of the Channel's service is
// registered: viaRaw, viaJSON, viaRegistrar or viaTChannel. Call it with
// c.mu held.
func (c *Channel) registeredWith() map[string]string {
	hs := c.tch.GetSubChannel(c.name).GetHandlers()
	via := make(map[string]string, len(hs))
	for m, h := range hs {
		via[m] = viaTChannel
		if g, ok := h.(*guarded); ok {
			via[m] = g.via
		}
	}
	return via
}

// errRegistered is the error of registering method through api when it is
// registered already, with via.
func errRegistered(api, method, via string) error {
	return fmt.Errorf("channel: %s: method %q is already registered with %s; register each method once", api, method, via)
}

// register registers h for method behind the Channel's guard. Call it with
// c.mu held, so that checking for a duplicate and registering are one step.
func (c *Channel) register(via, method string, st *serverStats, h tchannel.Handler) {
	var ms methodShedding
	if c.shed != nil {
		ms = c.shed.forMethod(method)
	}
	g := &guarded{c: c, h: h, via: via, stats: st, shed: ms, ttl: c.ttlGuardFor(method),
		metrics: c.rec.Server(c.name, method, c.o.tchannelMetrics)}
	g.own, _ = h.(answerer)
	c.tch.Register(g, method)
}

// serverStats are the untagged counters of a Channel's server side.
type serverStats struct{ malformed, oversize tally.Counter }

func (c *Channel) serverStats() *serverStats {
	scope := c.rec.Scope()
	return &serverStats{malformed: scope.Counter(stats.ServerMalformed), oversize: scope.Counter(stats.ServerOversize)}
}

// guarded is a handler behind the Channel's guard, marked with how it was
// registered.
type guarded struct {
	c       *Channel
	h       tchannel.Handler
	own     answerer // h, when it is one of the Channel's own (raw, JSON)
	via     string
	stats   *serverStats
	shed    methodShedding         // nil: no shedding
	ttl     *ttlGuard              // nil: no deadline admission (ttl.go)
	metrics *recorder.ServerMethod // nil: no scope, no server metrics (servermetrics.go)
}

// Handle declines the request while the Channel closes, refuses it when
// its connection has too many calls in flight or its deadline dooms it
// (ttl.go), sheds it when shedding is on and the Channel is over a limit,
// and otherwise passes it to the handler; and records how it was answered
// (servermetrics.go).
func (g *guarded) Handle(ctx context.Context, call *tchannel.InboundCall) {
	var ad admitted
	if g.metrics != nil {
		ad.ms, ad.t0 = g.metrics.Caller(call.CallerName()), g.c.o.clock.Now()
		ad.ms.Received()
	}
	// Counted before declining is read: drain sets declining, then waits
	// for started == ended, so a request it did not see declined is one it
	// waits for.
	g.c.started.Add(1)
	// One deferred call gives back all the request takes: the compiler
	// open-codes deferred calls only while returns times deferred calls
	// is at most 15, and a runtime deferred call costs every request 2 to
	// 3 points of BenchmarkJSONServerPaired (TestHotPathDefersAreOpenCoded).
	defer g.release(call, &ad)
	if g.c.declining.Load() {
		_ = call.Response().SendSystemError(errClosing)
		g.refused(ad.ms, ad.t0, codes.Declined)
		return
	}
	// Calls in flight per connection: a peer that does not read its
	// answers stops here (PeerLimits.MaxCallsPerConn). A connection this
	// process dialed is wrapped by its connector's watch (the guard's Conn
	// has a NetConn too: the socket, or TLS, under it).
	nc := call.Connection()
	tc, _ := nc.(*tchconn.Conn)
	if w, ok := nc.(interface{ NetConn() net.Conn }); ok && tc == nil {
		tc, _ = w.NetConn().(*tchconn.Conn)
	}
	if tc != nil {
		if !tc.BeginCall() {
			_ = call.Response().SendSystemError(errConnBusy)
			g.refused(ad.ms, ad.t0, codes.Busy)
			return
		}
		ad.tc = tc
	}
	cls, retried := g.c.classOf(call, tc)
	// A request with less time left than its method takes is refused
	// before it takes a slot of any limit (ttl.go).
	t1, ok := g.ttl.admit(ctx, call, ad.t0)
	if !ok {
		g.refused(ad.ms, ad.t0, codes.Busy)
		return
	}
	if m := g.shed; m != nil {
		a, reason, err := m.admit(cls, call.CallerName())
		if err != nil {
			if ad.ms != nil {
				ad.ms.Shed(reason)
			}
			_ = call.Response().SendSystemError(err)
			g.refused(ad.ms, ad.t0, codes.Busy)
			return
		}
		ad.shed, ad.shedding = a, true
	}
	// The Channel's own handlers are called from here, not through a
	// function that picks one: a frame less on every request, which
	// BenchmarkRawServerPaired/guard-off measured at 0.6 to 1.2 points.
	hctx := withInboundClass(ctx, cls, retried)
	var ans answer
	if g.own != nil {
		ans = g.own.serve(hctx, call)
	} else {
		ans = g.serveOther(hctx, call, ad.ms != nil)
	}
	var t2 time.Time
	if ad.ms != nil {
		t2 = g.c.o.clock.Now()
		done(ad.ms, ctx, ad.t0, t2, ans)
	}
	g.ttl.done(t1, t2)
}

// admitted is what the guard took for a request, which release gives
// back, and its server metrics.
type admitted struct {
	ms       *recorder.ServerSeries // nil: server metrics off
	t0       time.Time              // when it was received, for the server metrics
	tc       *tchconn.Conn          // whose call slot it holds, if any
	shed     admission              // its slots of the shedding limits, when shedding
	shedding bool
}

// release gives back what the guard took for a request, in the reverse
// order. A handler that returns without answering (tchannel-go's Thrift
// server does when a request's arguments cannot be read) would leave
// tchannel-go holding the call, its frame and a goroutine until the time
// to live the peer chose: release releases it (after an answer,
// Blackhole does nothing).
func (g *guarded) release(call *tchannel.InboundCall, ad *admitted) {
	if ad.shedding {
		g.shed.done(ad.shed)
	}
	call.Response().Blackhole()
	if ad.tc != nil {
		ad.tc.EndCall()
	}
	g.c.ended.Add(1)
}

// errConnBusy answers a call over PeerLimits.MaxCallsPerConn.
var errConnBusy = tchannel.NewSystemError(tchannel.ErrCodeBusy,
	"server busy: this connection has too many calls in flight; wait for their answers before sending more")

// rawArgBuf is the size of the pooled buffers raw requests are read into
// first (rawHandler.serve): about the largest small request.
const rawArgBuf = 512

var rawArgBufs = sync.Pool{New: func() any { return new([rawArgBuf]byte) }}

// rawHandler serves a RawHandler, behind the inbound middleware mw if
// there is one.
type rawHandler struct {
	h     RawHandler
	mw    InboundMiddleware
	limit int64
	stats *serverStats
}

func (r *rawHandler) Handle(ctx context.Context, call *tchannel.InboundCall) { r.serve(ctx, call) }

// serve serves call and says how it answered (answerer).
func (r *rawHandler) serve(ctx context.Context, call *tchannel.InboundCall) answer {
	// The handler owns the arguments. Small ones are read into a pooled
	// buffer and copied into one of their own size; larger ones outgrow
	// it into a buffer of their own as they are read.
	sc := rawArgBufs.Get().(*[rawArgBuf]byte)
	args, n2, failed := readArgs(call, sc[:0], r.limit, r.stats)
	if failed != codes.OK {
		rawArgBufs.Put(sc)
		return answered(failed, false)
	}
	args = ownedArg(args, sc[:])
	rawArgBufs.Put(sc)
	req := &RawRequest{Caller: call.CallerName(), Method: call.MethodString(), Arg2: args[:n2:n2], Arg3: args[n2:]}
	var (
		res *RawResponse
		err error
	)
	if r.mw == nil {
		res, err = r.h(ctx, req)
	} else {
		res, err = r.serveVia(ctx, call, req)
	}
	resp := call.Response()
	if err != nil {
		var se tchannel.SystemError
		if !errors.As(decline.HandlerError(err), &se) {
			se = tchannel.NewSystemError(tchannel.ErrCodeUnexpected, "%v", err).(tchannel.SystemError)
		}
		_ = resp.SendSystemError(se)
		return answered(codes.Code(se.Code()), false)
	}
	if res == nil {
		res = &RawResponse{}
	}
	if res.AppError {
		_ = resp.SetApplicationError()
	}
	if err := tchannel.NewArgWriter(resp.Arg2Writer()).Write(res.Arg2); err != nil {
		return answered(codes.Cancelled, false)
	}
	if err := tchannel.NewArgWriter(resp.Arg3Writer()).Write(res.Arg3); err != nil {
		return answered(codes.Cancelled, false)
	}
	return answered(codes.OK, res.AppError)
}

// serveVia runs the handler behind the inbound middleware. A middleware
// that answers without calling next answers an empty response (no error,
// empty arg2 and arg3).
func (r *rawHandler) serveVia(ctx context.Context, call *tchannel.InboundCall, req *RawRequest) (*RawResponse, error) {
	in := inboundOf(call, tchannel.Raw, nil)
	in.Arg2 = req.Arg2
	var res *RawResponse
	err := r.mw(ctx, in, func(ctx context.Context) error {
		var err error
		res, err = r.h(ctx, req)
		return err
	})
	return res, err
}

// readArgs appends the call's arg2 and then its arg3 to buf and returns
// them with the length of arg2, and codes.OK. If together they are longer
// than limit it answers BAD_REQUEST as soon as it has read limit+1 bytes,
// counts the request on st.oversize and returns codes.BadRequest; it
// returns codes.Cancelled when the connection broke, when there is no one
// left to answer.
func readArgs(call *tchannel.InboundCall, buf []byte, limit int64, st *serverStats) (_ []byte, n2 int, failed codes.Code) {
	buf, failed = readArg(call, call.Arg2Reader, buf, limit, st)
	if failed != codes.OK {
		return buf, 0, failed
	}
	n2 = len(buf)
	buf, failed = readArg(call, call.Arg3Reader, buf, limit, st)
	return buf, n2, failed
}

// argChunk is the size past which an argument is read into chunks of its
// own, joined once it is whole, instead of a buffer that grows ahead of
// what came: a request that stops half way holds the bytes that arrived
// (within 64 KiB), and each byte is copied twice at most.
const argChunk = 64 << 10

// readArg appends an argument to buf, reading at most limit+1-len(buf)
// bytes of it; see readArgs.
func readArg(call *tchannel.InboundCall, open func() (tchannel.ArgReader, error), buf []byte, limit int64, st *serverStats) ([]byte, codes.Code) {
	r, err := open()
	if err != nil {
		return buf, malformedArgs(call, err, st)
	}
	var full [][]byte // chunks already filled, in order, before buf
	total := int64(len(buf))
	for {
		if len(buf) == cap(buf) {
			if cap(buf) < argChunk {
				buf = append(buf, 0)[:len(buf)]
			} else {
				full = append(full, buf)
				buf = make([]byte, 0, argChunk)
			}
		}
		// Never ask for more than one byte past the limit: the reader
		// copies as much as it is asked for, fragment after fragment.
		end := len(buf) + int(min(int64(cap(buf)-len(buf)), limit+1-total))
		n, err := r.Read(buf[len(buf):end])
		buf = buf[:len(buf)+n]
		total += int64(n)
		if total > limit {
			st.oversize.Inc(1)
			_ = call.Response().SendSystemError(tchannel.NewSystemError(tchannel.ErrCodeBadRequest,
				"request too large: its arguments are more than %d bytes, the server's limit; send a smaller request", limit))
			return buf, codes.BadRequest
		}
		if err == io.EOF {
			if full != nil {
				buf = join(full, buf, total)
			}
			err = r.Close()
			if err == nil {
				return buf, codes.OK
			}
		}
		if err != nil {
			return buf, malformedArgs(call, err, st)
		}
	}
}

// malformedArgs answers a request whose arguments could not be read:
// their fragments did not follow the protocol (an argument missing or one
// too many, checksums that differ), and returns codes.BadRequest. When the
// connection or the call ended instead, there is no one to answer,
// tchannel-go sends nothing, and it returns codes.Cancelled.
func malformedArgs(call *tchannel.InboundCall, err error, st *serverStats) codes.Code {
	if call.Response().SendSystemError(tchannel.NewSystemError(tchannel.ErrCodeBadRequest,
		"malformed request: its arguments could not be read: %v", err)) != nil {
		return codes.Cancelled
	}
	st.malformed.Inc(1)
	return codes.BadRequest
}

// join returns the chunks and then last in one slice of total bytes.
func join(chunks [][]byte, last []byte, total int64) []byte {
	out := make([]byte, 0, total)
	for _, c := range chunks {
		out = append(out, c...)
	}
	return append(out, last...)
}

// ShedConfig limits what a Channel's server side accepts. Requests beyond a
// limit are answered Busy, with a pushback hint, before any handler runs,
// so callers' busy throttling backs them off. A zero limit is no limit, and
// the zero ShedConfig sheds nothing. Health checks (Meta::health) are never
// shed. Deadline refusals, of requests whose deadline dooms them, are
// separate from the limits: they are on, with or without WithShedding,
// unless NoDeadlineRefusals turns them off.
type ShedConfig struct {
	// MaxRPS is the most requests per second admitted, spread evenly; 0
	// means no limit.
	MaxRPS float64
	// Burst is how many requests may arrive at once within MaxRPS.
	// Default: MaxRPS/10, at least 1.
	Burst int
	// MaxInFlight is the most requests handled at once, all methods
	// together; 0 means no limit.
	MaxInFlight int
	// Adaptive, when set, bounds the requests in flight by an adaptive
	// concurrency limit that follows the handlers' measured latency (see
	// package shed): one limit per method, so that the latencies of
	// different methods do not mix, unless AdaptiveShared is set.
	// &shed.Config{}, the defaults, is a good start. Its Clock, nil or
	// the Channel's (WithClock): one clock times a Channel.
	Adaptive *shed.Config
	// AdaptiveShared makes one adaptive limit for all the Channel's
	// methods, for handlers that share one resource.
	AdaptiveShared bool
	// Pushback, when > 0, is the hint sent with each Busy answer: Sluice
	// clients wait exactly this long before retrying. By default (0) the
	// hint says when a slot is likely to free: for requests over a
	// concurrency limit, its current queueing delay (the mean latency of
	// its last window less the no-load latency), at least the no-load
	// latency and at least a millisecond (see package shed); for requests
	// over MaxRPS, 1/MaxRPS (the time one token takes to come back).
	Pushback time.Duration
	// NoRetry makes the hint of each Busy answer tell Sluice clients not
	// to retry. Pushback must then be 0.
	NoRetry bool
	// FirstComeFirstServed makes the limits admit requests in the order
	// they arrive, knowing no criticality classes and no callers: Sluice's
	// shedding before classes (for comparisons). By default the
	// concurrency limits (MaxInFlight, Adaptive) admit higher classes
	// first and share themselves between callers (TChannel caller names),
	// and their Busy answers name the highest class they refuse wholesale
	// (see package shed); MaxRPS knows no classes either way.
	FirstComeFirstServed bool
	// NoDeadlineRefusals turns off the server side's deadline admission:
	// by default a request whose time left (its handler context's
	// deadline, from the caller's TTL) is shorter than its method's
	// expected service time is answered BUSY with a "do not retry" hint
	// before its handler runs, and counted in stats.ServerRefused (reason
	// stats.ReasonDeadline). The expected service time is the 5% quantile
	// of the method's last 64 handler latencies measured (once there are
	// 32, one request in 64 is measured, one in 8 with server metrics on,
	// which time every request), and nothing is refused before 32 have
	// been; a method expected to take under 0.5 ms is not checked (its
	// requests are spared a clock read).
	//
	// The admission is on by default because it refuses only work that is
	// doomed: a request given less time than all but 1 in 20 of the
	// method's recent requests took would finish within its deadline
	// about 1 time in 20, and its caller, whose deadline ends the call
	// anyway, gets the answer at once instead of a TIMEOUT after the
	// handler spent its capacity. Turn it off for a method whose latency
	// depends on the request so much that callers who give little time
	// send only fast requests, rarer than 1 in 20 (the quantile then lies
	// among the slow ones). It is no shedding limit: a Channel without
	// WithShedding refuses doomed requests too.
	NoDeadlineRefusals bool
}

// Validate reports the first field that breaks its rule, in the order of
// the fields, as a *retry.FieldError, or nil.
func (s ShedConfig) Validate() error {
	const pkg = "channel"
	switch {
	case s.MaxRPS < 0 || math.IsNaN(s.MaxRPS) || math.IsInf(s.MaxRPS, 0):
		return config.Errorf(pkg, "ShedConfig.MaxRPS", s.MaxRPS, "must be a finite number >= 0")
	case s.Burst < 0:
		return config.Errorf(pkg, "ShedConfig.Burst", s.Burst, "must be >= 0 (0 means MaxRPS/10, at least 1)")
	case s.MaxInFlight < 0:
		return config.Errorf(pkg, "ShedConfig.MaxInFlight", s.MaxInFlight, "must be >= 0 (0 means no limit)")
	}
	if s.Adaptive != nil {
		if err := s.Adaptive.Validate(); err != nil {
			return config.Nest(err, pkg, "ShedConfig.Adaptive")
		}
	}
	switch {
	case s.AdaptiveShared && s.Adaptive == nil:
		return config.Errorf(pkg, "ShedConfig.AdaptiveShared", true, "needs Adaptive set")
	case s.Pushback < 0:
		return config.Errorf(pkg, "ShedConfig.Pushback", s.Pushback, "must be >= 0 (NoRetry tells clients not to retry)")
	case s.NoRetry && s.Pushback != 0:
		return config.Errorf(pkg, "ShedConfig.Pushback", s.Pushback, "must be 0 when NoRetry is set")
	}
	return nil
}

// healthMethod is the method of TChannel's Thrift health check, never shed:
// a server that sheds its health checks looks dead when it is only busy.
const healthMethod = "Meta::health"

// serverShedding is a Channel's load shedding (WithShedding), as the rest
// of the Channel sees it: an interface that only WithShedding makes, so
// that a program that never sheds links none of the limits
// (internal/shedlimit).
type serverShedding interface {
	// forMethod returns the shedding of one method, nil for one never
	// shed.
	forMethod(method string) methodShedding
	// limited, utilisation and refusing are what load reports carry
	// (loadreport.go).
	limited() bool
	utilisation() (float64, bool)
	refusing() criticality.Class
}

// methodShedding sheds one method's requests.
type methodShedding interface {
	// admit returns the admission of a request of class cls from caller
	// (give it back with done), or the Busy error to answer with and the
	// limit that refused it.
	admit(cls criticality.Class, caller string) (admission, recorder.ShedReason, error)
	done(a admission)
}

// shedder is a Channel's load shedding: the limits all methods share.
type shedder struct {
	cfg      ShedConfig
	adaptive shed.Config // *cfg.Adaptive on the Channel's clock
	rate     *rate.Limiter
	inFlight *shedlimit.Limiter // MaxInFlight, a fixed limit
	shared   *shedlimit.Limiter // the adaptive limit when AdaptiveShared

	lmu     sync.Mutex           // guards methods
	methods []*shedlimit.Limiter // the methods' own adaptive limits (loadreport.go)
}

func newShedder(cfg ShedConfig, clk clock.Clock) (*shedder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &shedder{cfg: cfg}
	if cfg.Adaptive != nil {
		s.adaptive = *cfg.Adaptive
		if s.adaptive.Clock != nil && !config.Same(s.adaptive.Clock, clk) {
			return nil, config.Errorf("channel", "ShedConfig.Adaptive.Clock", config.Verbatim(fmt.Sprintf("%T", s.adaptive.Clock)), "must be nil or the Channel's clock (WithClock)")
		}
		s.adaptive.Clock = clk
	}
	if cfg.MaxRPS > 0 {
		burst := cfg.Burst
		if burst == 0 {
			burst = max(1, int(cfg.MaxRPS/10))
		}
		s.rate = rate.NewLimiter(rate.Limit(cfg.MaxRPS), burst)
	}
	if n := cfg.MaxInFlight; n > 0 {
		l, err := shedlimit.New(shed.Config{MinLimit: n, MaxLimit: n, Clock: clk})
		if err != nil {
			return nil, fmt.Errorf("channel: ShedConfig.MaxInFlight: %w", err)
		}
		s.inFlight = l
	}
	if cfg.AdaptiveShared {
		l, err := shedlimit.New(s.adaptive)
		if err != nil {
			return nil, fmt.Errorf("channel: ShedConfig.Adaptive: %w", err)
		}
		s.shared = l
	}
	return s, nil
}

// forMethod returns the shedding of one method: nil for health checks, and
// with the method's own adaptive limit unless it is shared.
func (s *shedder) forMethod(method string) methodShedding {
	if method == healthMethod {
		return nil
	}
	m := &methodShedder{s: s, scope: "all methods", adaptive: s.shared}
	if s.shared == nil {
		m.scope = strconv.Quote(method)
	}
	if s.cfg.Adaptive != nil && !s.cfg.AdaptiveShared {
		// The config was validated when the shedder was made.
		m.adaptive, _ = shedlimit.New(s.adaptive)
		s.track(m.adaptive)
	}
	return m
}

// methodShedder sheds one method's requests.
type methodShedder struct {
	s        *shedder
	scope    string // what the adaptive limit covers, for its Busy message
	adaptive *shedlimit.Limiter
}

// admission is an admitted request's tokens, to give back when it is done.
type admission struct {
	fixed, adaptive shedlimit.Token
}

// admit returns the admission of a request of class cls from caller
// (give it back with done), or the Busy error to answer with and the
// limit that refused it.
func (m *methodShedder) admit(cls criticality.Class, caller string) (admission, recorder.ShedReason, error) {
	var a admission
	s := m.s
	if s.inFlight != nil {
		tok, ok := m.acquire(s.inFlight, cls, caller)
		if !ok {
			return a, recorder.ShedInFlight, m.busy(s.inFlight, s.inFlight.Pushback(), "server overloaded: %d requests in flight, its limit", s.cfg.MaxInFlight)
		}
		a.fixed = tok
	}
	if m.adaptive != nil {
		tok, ok := m.acquire(m.adaptive, cls, caller)
		if !ok {
			m.cancel(a)
			return a, recorder.ShedAdaptive, m.busy(m.adaptive, m.adaptive.Pushback(), "server overloaded: %d requests of %s in flight, its adaptive limit", m.adaptive.Limit(), m.scope)
		}
		a.adaptive = tok
	}
	// The rate last: a request a concurrency limit refuses spends no token.
	// It knows no classes: its refusals name none.
	if s.rate != nil && !s.rate.Allow() {
		m.cancel(a)
		if m.adaptive != nil {
			m.adaptive.Cancel(a.adaptive)
		}
		return a, recorder.ShedRate, m.busy(nil, time.Duration(float64(time.Second)/s.cfg.MaxRPS), "server overloaded: above %v requests per second", s.cfg.MaxRPS)
	}
	return a, 0, nil
}

// acquire admits a request of class cls from caller under l: higher
// classes first and the limit shared between callers, or first come,
// first served (ShedConfig.FirstComeFirstServed).
func (m *methodShedder) acquire(l *shedlimit.Limiter, cls criticality.Class, caller string) (shedlimit.Token, bool) {
	if m.s.cfg.FirstComeFirstServed {
		return l.Acquire()
	}
	return l.AcquireFor(cls, caller)
}

// busy returns the Busy answer of a request limit l refused (nil: a limit
// that knows no classes), naming the class l refuses wholesale, with the
// configured pushback, or else with pushback.
func (m *methodShedder) busy(l *shedlimit.Limiter, pushback time.Duration, format string, args ...any) error {
	switch {
	case m.s.cfg.NoRetry:
		pushback = -1 // BusyAfter's "do not retry"
	case m.s.cfg.Pushback > 0:
		pushback = m.s.cfg.Pushback
	}
	msg := fmt.Sprintf(format, args...)
	if l != nil && !m.s.cfg.FirstComeFirstServed {
		// Before the pushback hint, which BusyAfter puts last.
		msg = appendRefusing(msg, l.Refusing())
	}
	return BusyAfter(pushback, "%s", msg)
}

// cancel gives back the fixed-limit token of a request refused afterwards.
func (m *methodShedder) cancel(a admission) {
	if m.s.inFlight != nil {
		m.s.inFlight.Cancel(a.fixed)
	}
}

// done ends an admitted request, recording its latency.
func (m *methodShedder) done(a admission) {
	if m.s.inFlight != nil {
		m.s.inFlight.Release(a.fixed)
	}
	if m.adaptive != nil {
		m.adaptive.Release(a.adaptive)
	}
}
