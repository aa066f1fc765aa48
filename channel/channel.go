package channel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/criticality"

	"github.com/opentracing/opentracing-go"
	"github.com/sluice-rpc/sluice/busy"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/discovery"
	"github.com/sluice-rpc/sluice/internal/config"
	"github.com/sluice-rpc/sluice/internal/pool"
	"github.com/sluice-rpc/sluice/internal/recorder"
	"github.com/sluice-rpc/sluice/internal/retryexec"
	"github.com/sluice-rpc/sluice/serviceconfig"
	"github.com/uber-go/tally/v4"
	"github.com/uber/tchannel-go"
)

// defaultTimeout bounds a call whose context has no deadline (TChannel
// requires one on every call).
const defaultTimeout = time.Second

// closeWait bounds how long Close waits for connections to finish closing.
const closeWait = 5 * time.Second

// deregisterWait bounds the withdrawal of a Channel's registrations in
// Close and Shutdown: a registry that does not answer (etcd down) must not
// hold up the rest.
const deregisterWait = time.Second

// defaultMaxRequestSize is the default limit on a request's arguments
// (arg2 and arg3 together), in bytes: 4 MiB, gRPC's default for a received
// message.
const defaultMaxRequestSize = 4 << 20

// Option configures a Channel.
type Option func(*options)

type options struct {
	clock clock.Clock
	// classCap caps the class each caller may claim (WithCriticalityCap).
	classCap func(caller string) criticality.Class
	busy     busy.Config
	scope    tally.Scope
	tracer   opentracing.Tracer
	timeout  time.Duration
	tch      tchannel.ChannelOptions
	connect  ConnectConfig
	shed     func(clock.Clock) (serverShedding, error) // WithShedding's, or nil
	// utilisation is WithUtilisation's (loadreport.go).
	utilisation func() float64
	// maxRequest bounds the bytes of a request's arg2 and arg3, both ways:
	// calls larger fail BAD_REQUEST before anything is sent, and inbound
	// requests larger are answered BAD_REQUEST.
	maxRequest int64
	// maxResponse bounds the bytes of a response's arg2 and arg3;
	// responseBudget their sum over the calls in flight (set by
	// WithResponseBudget if responseBudgetSet, else a default).
	maxResponse       int64
	responseBudget    int64
	responseBudgetSet bool
	peerLimits        PeerLimits
	// logNow is the clock of the budgets of log lines (newLimitedLogger's,
	// the peer guard's); nil means time.Now. Tests freeze it.
	logNow func() time.Time
	// serverTLS and clientTLS check their option's configuration and make
	// the listener's TLS and the dialer's; WithServerTLS and WithClientTLS
	// set them. Closures over the configurations: a program without the
	// options links none of crypto/tls's handshakes, and the Channel's
	// types do not refer to tls.Config's, whose methods the linker would
	// keep (together 2.3 MB; TestBinarySize).
	serverTLS func(l PeerLimits) (accept func(net.Conn) (net.Conn, error), err error)
	clientTLS func(pg *peerGuard, next dialFunc) (dialFunc, error)

	config             *serviceconfig.Config
	retries            RetryConfig // WithRetries
	noDeadlineRefusals bool        // ShedConfig.NoDeadlineRefusals (WithShedding)
	tchannelMetrics    bool        // WithTChannelMetrics

	registrar discovery.Registrar
	shutdown  ShutdownConfig
	logger    *slog.Logger // WithLogger's; nil: slog.Default() at the time of logging

	callMW    []CallMiddleware
	attemptMW []AttemptMiddleware
	inboundMW []InboundMiddleware

	rand func() float64 // backoff jitter, uniform in [0, 1); tests fix it
	// onWait, if set, is called each time a call starts waiting for a
	// peer to become ready; tests synchronise on it.
	onWait func()
}

// WithClock sets the clock the busy limiters and latency measurements use.
// Default: the wall clock.
func WithClock(c clock.Clock) Option { return func(o *options) { o.clock = c } }

// WithBusyConfig sets the busy-throttling configuration of every peer.
// Default: the zero busy.Config, the design's defaults. Its Clock must be
// nil or the Channel's: the limiters run on the Channel's clock (WithClock).
func WithBusyConfig(c busy.Config) Option { return func(o *options) { o.busy = c } }

// WithScope sets the tally scope metrics are reported to. Default: none.
func WithScope(s tally.Scope) Option { return func(o *options) { o.scope = s } }

// WithDefaultTimeout sets the timeout of calls whose context has no
// deadline. Default: one second.
func WithDefaultTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithTChannelOptions sets the options the underlying tchannel.Channel is
// created with. Its Tracer (default opentracing.GlobalTracer(), read once
// by New: a global tracer registered later is not used) traces the
// Channel's calls as well as its server side: a call has one span named
// after its method, each attempt sent one child span, tagged as
// opentracing's semantic conventions say (plus retry.AttemptsHeader, the
// attempt's number), and the trace propagates to the servers. Cancel
// propagation is always on (SendCancelOnContextCanceled and PropagateCancel)
// so that cancelled hedges stop their servers' work. Its Dialer, if set,
// makes the connections Sluice's connectors open (see WithConnectConfig).
// Leave tchannel-go's own health checks (DefaultConnectionOptions.
// HealthChecks) off: Sluice's connectors check their connections
// themselves (ConnectConfig.HealthCheck), and a tchannel-go check that
// fails on a closing connection waits for itself forever. Its Logger, if
// set, gets tchannel-go's own lines (none without it), at most LogBurst
// lines of a message at once and LogLinesPerSecond after (Debug lines
// excepted): peers can make tchannel-go log a line per frame. Sluice's
// own lines go to WithLogger's logger.
func WithTChannelOptions(t tchannel.ChannelOptions) Option { return func(o *options) { o.tch = t } }

// WithConnectConfig sets how the Channel connects to its peers: the timeout
// of one connect (dial and handshakes: TChannel's, and TLS's with
// WithClientTLS), the backoff between connects to a
// peer that failed, the health check of established connections, and the
// budget of connects across all peers. Default: the zero ConnectConfig,
// which means a 5 s timeout, the connection backoff
// (gRPC's: 1 s, x1.6, at most 120 s, +-20 %), the health check (a
// ping a second; three unanswered close the connection, so a frozen peer is
// found in about three seconds) and a budget of 2,500
// connects at once, then 100 a second.
func WithConnectConfig(c ConnectConfig) Option { return func(o *options) { o.connect = c } }

// WithShedding makes the Channel's server side answer Busy, before any
// handler runs, to requests beyond the limits of c, and refuse requests
// doomed by their deadline unless c.NoDeadlineRefusals is set. Without it
// the Channel sheds nothing and refuses doomed requests. A later
// WithShedding replaces an earlier one whole: give all the server's
// limits, and NoDeadlineRefusals, in one ShedConfig.
func WithShedding(c ShedConfig) Option {
	return func(o *options) {
		o.noDeadlineRefusals = c.NoDeadlineRefusals
		if c.MaxRPS == 0 && c.MaxInFlight == 0 && c.Adaptive == nil {
			// No limit: nothing to shed, so no shedder for requests to
			// pass through; c is still validated.
			o.shed = func(clock.Clock) (serverShedding, error) { return nil, c.Validate() }
			return
		}
		// The shedder is made here, behind an interface, so that a program
		// that never sheds links none of it (TestBinarySize).
		o.shed = func(clk clock.Clock) (serverShedding, error) {
			s, err := newShedder(c, clk)
			if err != nil {
				return nil, err
			}
			return s, nil
		}
	}
}

// WithMaxRequestSize bounds a request's arguments (arg2 and arg3 together)
// to n bytes, both ways: a call with larger arguments fails at once with
// BAD_REQUEST and sends nothing, and the Channel's server side answers a
// larger inbound request with BAD_REQUEST. Default 4 MiB (gRPC's default
// for a received message); n must be > 0.
//
// On the server side the limit covers RegisterRaw and RegisterJSON handlers
// (answered as soon as it is passed, without buffering the rest) and the
// Thrift services registered on package thrift's NewServer (their body,
// arg3, including the lengths it declares). It does not cover other
// handlers registered through Registrar, Thrift headers (arg2), or the
// Thrift meta service: these read their arguments whole themselves.
func WithMaxRequestSize(n int64) Option { return func(o *options) { o.maxRequest = n } }

// defaultMaxResponseSize is the default limit on the arguments of a
// response a call reads.
const defaultMaxResponseSize = 64 << 20

// WithMaxResponseSize bounds the arguments (arg2 and arg3 together) of a
// response the Channel's calls read to n bytes: an attempt whose response
// is larger fails UNEXPECTED as soon as n+1 bytes have come, without
// reading the rest, and is not retried (the server answered). A server,
// hostile or mistaken, cannot make a client hold more for one call
// (WithResponseBudget bounds all of them together). Default 64 MiB; n
// must be > 0.
func WithMaxResponseSize(n int64) Option { return func(o *options) { o.maxResponse = n } }

// Channel is a TChannel channel whose outbound calls throttle, and whose
// inbound side can shed, by itself. It is safe for concurrent use.
//
// Raw, JSON and Thrift calls share one pipeline (see Call) and speak
// TChannel's wire formats, so a Channel talks to any TChannel server and
// any TChannel client talks to a Channel. On the server side a Channel
// registers raw and JSON handlers (Thrift ones through package thrift) and
// can shed load (WithShedding): it answers Busy before a handler runs above
// a rate or an in-flight limit, which closes the loop with the clients'
// busy throttling.
type Channel struct {
	name string
	tch  *tchannel.Channel
	o    options
	rec  *recorder.Recorder
	shed serverShedding // nil: no shedding (WithShedding)
	// loads makes the server's load reports, nil if it makes none
	// (loadreport.go).
	loads *loadReports
	// tracing is false when the tracer is opentracing's no-op one.
	tracing bool
	// spans is the tracer tchannel-go is given when tracing (see
	// spanTracer).
	spans *spanTracer
	// invoker runs calls through the call middlewares (nil without any).
	invoker Invoker
	// sendAttempt sends attempts through the attempt middlewares (nil
	// without any).
	sendAttempt AttemptInvoker

	pool   *pool.Pool // the connectors of every peer
	peers  *peerGuard // frame checks and limits on every connection
	buffer *retryexec.Buffer
	// responses bounds the response bytes its calls hold at once.
	responses *responseBudget
	states    sync.Pool // *callState: CallRaw's and CallJSON's, recycled

	// prefixed indexes the service config's method names of the form
	// "Service::method" by (service, method), for nameHint; fixed at New.
	prefixed map[methodKey][]string

	mu      sync.RWMutex
	clients map[string]*Client // by service (NewClient)
	closed  atomic.Bool

	// Registration and the server's life (see discovery.go).
	regState
	phase     atomic.Int32 // phaseServing, ...
	declining atomic.Bool  // inbound requests are declined (Shutdown's drain, Close)
	// started and ended count the requests that reached a handler and
	// those whose handler returned; Shutdown watches them.
	started atomic.Uint64
	_       [56]byte // keeps ended off started's cache line
	ended   atomic.Uint64
}

// New returns a Channel for the service named serviceName (the name it
// serves under and calls as). Options are validated; an invalid one is an
// error naming it.
func New(serviceName string, opts ...Option) (*Channel, error) {
	if serviceName == "" {
		return nil, errors.New("channel: the service name is empty; name the service this channel serves or calls as")
	}
	o := options{clock: clock.Real, timeout: defaultTimeout, rand: rand.Float64,
		maxRequest: defaultMaxRequestSize, maxResponse: defaultMaxResponseSize}
	for _, opt := range opts {
		opt(&o)
	}
	if o.busy.Clock != nil && !config.Same(o.busy.Clock, o.clock) {
		return nil, errors.New("channel: WithBusyConfig: Clock must be nil or the Channel's clock (WithClock): the busy limiters run on it")
	}
	if err := o.busy.Validate(); err != nil {
		return nil, fmt.Errorf("channel: WithBusyConfig: %w", err)
	}
	if o.timeout <= 0 {
		return nil, fmt.Errorf("channel: WithDefaultTimeout is %v, must be > 0", o.timeout)
	}
	if o.clock == nil {
		return nil, errors.New("channel: WithClock is nil, must be a clock")
	}
	if o.maxRequest <= 0 {
		return nil, fmt.Errorf("channel: WithMaxRequestSize is %d, must be > 0", o.maxRequest)
	}
	if o.maxResponse <= 0 {
		return nil, fmt.Errorf("channel: WithMaxResponseSize is %d, must be > 0", o.maxResponse)
	}
	if err := validateResponseBudget(&o); err != nil {
		return nil, err
	}
	if err := o.peerLimits.validateFor(o.maxRequest); err != nil {
		return nil, err
	}
	if err := validateMiddleware(&o); err != nil {
		return nil, err
	}
	if err := o.retries.Validate(); err != nil {
		return nil, err
	}
	// Validated above; zero sizes take retryexec's defaults.
	buffer := retryexec.NewBuffer(retryexec.BufferConfig{Total: o.retries.BufferTotal, PerCall: o.retries.BufferPerCall})
	if err := o.shutdown.Validate(); err != nil {
		return nil, err
	}
	if o.tracer = o.tch.Tracer; o.tracer == nil {
		o.tracer = opentracing.GlobalTracer()
	}
	_, noop := o.tracer.(opentracing.NoopTracer)
	c := &Channel{name: serviceName, o: o, rec: recorder.New(o.scope), tracing: !noop, buffer: buffer,
		clients: map[string]*Client{}, prefixed: prefixedNames(o.config), responses: &responseBudget{limit: o.responseBudget}}
	if o.shed != nil {
		s, err := o.shed(o.clock)
		if err != nil {
			return nil, err
		}
		c.shed = s
	}
	if len(o.callMW) > 0 {
		c.invoker = chainCalls(o.callMW, c.callBehindMiddleware)
	}
	if len(o.attemptMW) > 0 {
		c.sendAttempt = chainAttempts(o.attemptMW, sendBehindMiddleware)
	}
	conns, err := pool.New(pool.Config{Connect: o.connect.pool(), Clock: o.clock, Recorder: c.rec})
	if err != nil {
		return nil, fmt.Errorf("channel: WithConnectConfig: %w", err)
	}
	pg, err := newPeerGuard(&o, c.rec)
	if err != nil {
		return nil, err
	}
	topts := o.tch
	topts.Tracer = o.tracer
	if topts.Logger == nil {
		topts.Logger = discardLogger{}
	} else {
		topts.Logger = newLimitedLogger(topts.Logger, o.logNow)
	}
	if c.tracing {
		c.spans = &spanTracer{o.tracer}
		topts.Tracer = c.spans
	}
	// Connectors make every connection to a peer; calls never dial. Every
	// connection checks the frames its peer sends, inside TLS when the
	// Channel dials with TLS.
	dial := o.tch.Dialer
	if o.clientTLS != nil {
		if dial, err = o.clientTLS(pg, dial); err != nil {
			pg.close()
			return nil, err
		}
	}
	topts.Dialer = placeholderDial(func() *tchannel.Channel { return c.tch }, conns.Dialer(pg.dialer(dial)))
	// Cancel frames both ways: a losing hedge or an abandoned call stops
	// work on its server too (tchannel-go leaves both off by default).
	topts.DefaultConnectionOptions.SendCancelOnContextCanceled = true
	topts.DefaultConnectionOptions.PropagateCancel = true
	tch, err := tchannel.NewChannel(serviceName, &topts)
	if err != nil {
		pg.close()
		return nil, fmt.Errorf("channel: %w", err)
	}
	if err := conns.Start(tch); err != nil {
		tch.Close()
		pg.close()
		return nil, fmt.Errorf("channel: %w", err)
	}
	c.tch, c.pool, c.peers = tch, conns, pg
	addPlaceholder(tch) // tchannel-go's clients on tch fail ErrUseClient
	c.startLoadReports()
	return c, nil
}

// ServiceName returns the name the Channel serves under.
func (c *Channel) ServiceName() string { return c.name }

// TChannel returns the underlying tchannel-go channel, for what Sluice does
// not wrap. Calls made on it directly bypass Sluice's pipeline; those of
// tchannel-go's clients that choose a peer from its peer list
// (tthrift.NewClient(ch.TChannel(), ...)) fail with ErrUseClient while the
// application has added no peer there.
func (c *Channel) TChannel() *tchannel.Channel { return c.tch }

// ListenAndServe listens on hostPort ("127.0.0.1:0" picks a free port) and
// serves the registered handlers. It returns once listening; HostPort tells
// the address. With WithRegistrar it then registers that address, as Serve
// does: an error doing so is returned, and the Channel serves on.
func (c *Channel) ListenAndServe(hostPort string) error {
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil || host == "" {
		return fmt.Errorf("channel: bad listen address %q: want host:port, for example 127.0.0.1:0", hostPort)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("channel: bad listen address %q: port must be a number in 0..65535", hostPort)
	}
	l, err := net.Listen("tcp", hostPort)
	if err != nil {
		return fmt.Errorf("channel: listen on %s: %w", hostPort, err)
	}
	if err := c.serve(l); err != nil {
		l.Close()
		return err
	}
	// A registration error leaves the Channel serving, its listener open:
	// closing it under tchannel-go's accept loop would end the process.
	return c.registerAddr()
}

// Serve serves the registered handlers on the connections l accepts, and
// returns at once; Close closes l. With WithRegistrar, it then registers
// the Channel's address (an error doing so is returned; the Channel serves
// on, unregistered). The Channel's PeerLimits bound those
// connections and every frame they carry is checked (see PeerLimits);
// with WithServerTLS the Channel runs their TLS handshakes itself, so give
// it a plain TCP listener. A Channel serves on one listener.
func (c *Channel) Serve(l net.Listener) error {
	if err := c.serve(l); err != nil {
		return err
	}
	return c.registerAddr()
}

// serve is Serve without the registration.
func (c *Channel) serve(l net.Listener) error {
	if c.closed.Load() {
		return ErrClosed
	}
	if c.peers.serving() {
		return fmt.Errorf("channel: Serve on %s: the Channel already serves on %s; a Channel serves on one listener", l.Addr(), c.HostPort())
	}
	guarded, err := c.peers.listen(l, c.o.peerLimits)
	if err != nil {
		return fmt.Errorf("channel: %w", err)
	}
	// The pool keeps tchannel-go's Serve apart from the connections its
	// connects are making: a Channel may add peers before it serves.
	if err := c.pool.Serve(func() error { return c.tch.Serve(guarded) }); err != nil {
		guarded.Close()
		return fmt.Errorf("channel: serve on %s: %w", l.Addr(), err)
	}
	return nil
}

// HostPort returns the address the Channel listens on.
func (c *Channel) HostPort() string { return c.tch.PeerInfo().HostPort }

// Close stops listening, withdraws the Channel's registrations (waiting at
// most a second for the registry), closes its Clients and connectors,
// closes every connection once its calls are done, and waits (up to a few
// seconds) until they have closed. Requests that reach the Channel's
// handlers meanwhile are declined before any handler runs, so Sluice
// clients retry them elsewhere. Calls made after Close fail with
// ErrClosed. Shutdown is the gentle form, for a server leaving its fleet.
func (c *Channel) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), closeWait)
	defer cancel()
	c.closeWithin(ctx)
}

// closeWithin is Close, waiting for the connections to close until ctx
// ends (at most closeWait).
func (c *Channel) closeWithin(ctx context.Context) {
	if c.closed.Swap(true) {
		return
	}
	c.declining.Store(true)
	c.phase.Store(phaseClosed)
	dctx, cancel := context.WithTimeout(ctx, deregisterWait)
	_ = c.deregister(dctx) // Shutdown has, if it ran: this does nothing then
	cancel()
	for _, cl := range c.clientList() {
		cl.close(false) // its resolver first, so that nothing adds peers now
	}
	c.pool.Close()
	c.peers.g.Leave() // Sluice clients stop choosing it before its connections close
	c.tch.Close()
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case <-c.tch.ClosedChan(): // closed once its connections have
	case <-t.C:
	case <-ctx.Done():
	}
	c.peers.close()
}

// rand returns a uniform number in [0, 1) for backoff jitter.
func (c *Channel) rand() float64 { return c.o.rand() }

// withDeadline gives ctx the default timeout if it has no deadline. It
// returns ctx itself and a nil CancelFunc if it has one.
func (c *Channel) withDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, nil
	}
	return context.WithTimeout(ctx, c.o.timeout)
}
