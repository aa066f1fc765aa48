package pool

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-rpc/sluice/backoff"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/config"
	"github.com/sluice-rpc/sluice/internal/departed"
	"github.com/sluice-rpc/sluice/internal/recorder"
	"github.com/uber/tchannel-go"
)

// DefaultConnectTimeout bounds one connect (TCP dial and TChannel
// handshake) when ConnectConfig.Timeout is zero. A handshake on a LAN takes
// milliseconds; a peer that has not answered in this long is treated as
// failed.
const DefaultConnectTimeout = 5 * time.Second

// DefaultConnectBackoff returns gRPC's connection backoff: 1 s after the
// first failed connect, then x1.6 per further failure, at most 120 s, each
// wait spread by +-20 % (backoff.ProportionalJitter).
func DefaultConnectBackoff() backoff.Exponential {
	return backoff.Exponential{Initial: time.Second, Max: 120 * time.Second, Multiplier: 1.6,
		Jitter: backoff.ProportionalJitter, Spread: 0.2}
}

// ConnectConfig says how a Pool connects to peers. The zero value means the
// defaults. It mirrors channel.ConnectConfig, field for field, through
// which users set it; its errors name that type's fields.
type ConnectConfig struct {
	// Timeout bounds one connect: the TCP dial and TChannel's handshake.
	// 0 means DefaultConnectTimeout.
	Timeout time.Duration
	// Backoff spaces the connects to a peer after failures: after the
	// nth failure in a row the next connect starts Backoff.Delay(n) after
	// the failed one started. A connection that closes within
	// Backoff.Initial of its handshake counts as a failure too, so a peer
	// that accepts and drops connections is retried on this schedule, not
	// in a loop. Its Jitter must be backoff.ProportionalJitter (a Spread of
	// 0 means none). The zero value means DefaultConnectBackoff().
	Backoff backoff.Exponential
	// HealthCheck finds a Ready connection whose peer stopped answering
	// without closing it (a frozen process, a dead link). The zero value
	// means DefaultHealthCheck(); HealthCheck{Disabled: true} turns it off.
	HealthCheck HealthCheck
	// Budget bounds the connects the Pool starts across all its peers
	// (see ConnectBudget). The zero value means DefaultConnectRate a
	// second after a burst of DefaultConnectBurst.
	Budget ConnectBudget
}

// HealthCheck is how a connector checks a Ready connection: a TChannel ping
// every Interval, and after Failures pings in a row unanswered within
// Timeout it closes the connection and the peer goes into TransientFailure.
// (tchannel-go has health checks of its own, ConnectionOptions.HealthChecks;
// a check of theirs that fails on a closing connection waits for itself
// forever, so Sluice runs its own.) The zero value means
// DefaultHealthCheck(); any other sets every field.
type HealthCheck struct {
	// Interval is the time between pings, > 0.
	Interval time.Duration
	// Timeout is how long a ping may go unanswered, > 0.
	Timeout time.Duration
	// Failures is how many pings in a row may go unanswered before the
	// connection is closed, >= 1.
	Failures int
	// Disabled turns health checks off; the other fields must then be 0.
	Disabled bool
}

// Validate reports the first rule h breaks, as a *retry.FieldError, or nil.
func (h HealthCheck) Validate() error {
	switch {
	case h == HealthCheck{} || h == HealthCheck{Disabled: true}:
		return nil
	case h.Disabled:
		return config.Errorf("channel", "HealthCheck.Disabled", true, "must have Interval, Timeout and Failures 0")
	case h.Interval <= 0:
		return config.Errorf("channel", "HealthCheck.Interval", h.Interval, "must be > 0 (or the whole HealthCheck zero, for DefaultHealthCheck())")
	case h.Timeout <= 0:
		return config.Errorf("channel", "HealthCheck.Timeout", h.Timeout, "must be > 0 (or the whole HealthCheck zero, for DefaultHealthCheck())")
	case h.Failures < 1:
		return config.Errorf("channel", "HealthCheck.Failures", h.Failures, "must be >= 1 (or the whole HealthCheck zero, for DefaultHealthCheck())")
	}
	return nil
}

// DefaultHealthCheck returns the health check connectors run by default: a
// ping every second, and the connection closed after three in a row go
// unanswered for half a second. It finds a silent peer in about three
// seconds.
func DefaultHealthCheck() HealthCheck {
	return HealthCheck{Interval: time.Second, Timeout: 500 * time.Millisecond, Failures: 3}
}

// Validate reports the first rule c breaks, in the order of the fields, as
// a *retry.FieldError, or nil.
func (c ConnectConfig) Validate() error {
	if c.Timeout < 0 {
		return config.Errorf("channel", "ConnectConfig.Timeout", c.Timeout, "must be >= 0 (0 means the default, %v)", DefaultConnectTimeout)
	}
	if b := c.Backoff; b != (backoff.Exponential{}) {
		if err := b.Validate(); err != nil {
			return config.Nest(err, "channel", "ConnectConfig.Backoff")
		}
		if b.Jitter != backoff.ProportionalJitter {
			return config.Errorf("channel", "ConnectConfig.Backoff.Jitter", b.Jitter, "must be proportional (backoff.ProportionalJitter): connects are spread around the schedule, not drawn below it")
		}
	}
	if err := c.HealthCheck.Validate(); err != nil {
		return config.Nest(err, "channel", "ConnectConfig.HealthCheck")
	}
	return config.Nest(c.Budget.Validate(), "channel", "ConnectConfig.Budget")
}

func (c ConnectConfig) withDefaults() ConnectConfig {
	c.Timeout = cmp.Or(c.Timeout, DefaultConnectTimeout)
	if c.Backoff == (backoff.Exponential{}) {
		c.Backoff = DefaultConnectBackoff()
	}
	if c.HealthCheck == (HealthCheck{}) {
		c.HealthCheck = DefaultHealthCheck()
	}
	c.Budget = c.Budget.withDefaults()
	return c
}

// ErrNoConnection is the error a caller's dial gets from a Pool's Dialer:
// the peer has no established connection, and callers never make one (the
// peer's connector does). An attempt that gets it was not sent.
var ErrNoConnection = errors.New("no established connection to the peer (connections are made by the peer's connector, not by calls)")

// ErrClosed is returned by Acquire after the Pool's Close.
var ErrClosed = errors.New("the connection pool is closed")

// Pool keeps one connection to each host:port its lists use, off the
// callers' path: a connector per host:port dials and handshakes with its own
// timeout, follows the connection's health (see peer.State) and reconnects with
// backoff. Calls only ever use established connections, so none waits on a
// dial or a stuck handshake (tchannel-go's own connect path holds a lock
// that ignores deadlines).
//
// Make a Pool with New, install its Dialer in the tchannel.Channel's
// options, then Start it with that channel; Lists made with the Pool take
// their peers' connections from it. It is safe for concurrent use.
type Pool struct {
	cfg    ConnectConfig
	budget *connectBudget // nil: none
	clk    clock.Clock
	rec    *recorder.Recorder
	rand   func() float64

	ctx  context.Context // cancelled by Close: ends every connect
	stop context.CancelFunc
	wg   sync.WaitGroup // connectors

	// making is read-held by a connect from the moment its handshake's
	// answer is whole until tchannel-go's Connect returns, which is when
	// tchannel-go makes the connection; Serve write-holds it (see Serve).
	making sync.RWMutex

	changed atomic.Pointer[chan struct{}] // closed and replaced at each change

	// Changes other than to Ready are coalesced (see notify): nmu guards
	// when Changed was last closed, and the timer that will close it.
	nmu        sync.Mutex
	lastNotify time.Time
	nTimer     *time.Timer // armed while a coalesced close is due
	nClosed    bool        // Close ran: no timer is armed any more
	// nconns is len(conns), read without mu by notify: a small pool's
	// changes are never coalesced.
	nconns atomic.Int32

	mu    sync.Mutex
	tch   *tchannel.Channel
	conns map[string]*Conn
	// released holds the host:ports whose last reference went: for
	// ReleasedHold the Dialer still refuses callers' dials to them, so
	// that a call that chose such a peer just before finds no connection
	// instead of making one. At most maxReleased are held (the oldest go
	// first), so that addresses rotating through a registry cannot grow
	// it without bound.
	released *departed.Table[struct{}]
	sweep    departed.Sweeper // prunes released while it holds any; mu
	closed   bool
}

// ReleasedHold is how long the Dialer goes on refusing callers' dials to a
// host:port after its last peer was removed.
const ReleasedHold = time.Minute

// maxReleased is the most host:ports a Pool holds for ReleasedHold after
// their release: a registry's MaxPeers (discovery.DefaultMaxPeers). Past
// it the earliest released is forgotten first; a call that chose such a
// peer long before may then dial it itself, as tchannel-go would.
const maxReleased = 10000

// Config configures a Pool. Its zero value connects as the zero
// ConnectConfig says, on the wall clock, reporting nowhere.
type Config struct {
	// Connect says how the Pool connects to peers: connect timeout,
	// backoff and health check. The zero value means the defaults.
	Connect ConnectConfig
	// Clock times the connectors' backoff and health checks; nil means
	// clock.Real.
	Clock clock.Clock
	// Recorder receives the connection metrics; nil means nowhere.
	Recorder *recorder.Recorder
	// Rand draws the backoff's jitter, uniform in [0, 1); nil means
	// math/rand/v2's Float64.
	Rand func() float64
	// SweepEvery is how often, on the wall clock, the Pool forgets the
	// released host:ports held past ReleasedHold; 0 means
	// departed.SweepEvery.
	SweepEvery time.Duration
}

// Validate reports the first rule c breaks, as a *retry.FieldError naming
// the field of channel.ConnectConfig (the public face of Connect), or nil.
func (c Config) Validate() error { return c.Connect.Validate() }

// New returns a Pool configured by cfg, or cfg's validation error.
func New(cfg Config) (*Pool, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
	}
	if cfg.Recorder == nil {
		cfg.Recorder = recorder.New(nil)
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	ctx, stop := context.WithCancel(context.Background())
	p := &Pool{cfg: cfg.Connect.withDefaults(), clk: cfg.Clock, rec: cfg.Recorder, rand: cfg.Rand, ctx: ctx, stop: stop,
		conns: map[string]*Conn{}, released: departed.New[struct{}](ReleasedHold, maxReleased), sweep: departed.Sweeper{Every: cmp.Or(cfg.SweepEvery, departed.SweepEvery)}}
	p.budget = newConnectBudget(p.cfg.Budget)
	ch := make(chan struct{})
	p.changed.Store(&ch)
	return p, nil
}

// Dialer returns the dial function to put in tchannel.ChannelOptions.Dialer.
// For a host:port the Pool manages (or did until a minute ago) it dials only
// on behalf of the peer's connector, through next (a net.Dialer when nil),
// and refuses every other dial at once with ErrNoConnection: that is a call
// that found no established connection, and it must not wait on a connect.
// After Close it refuses every dial but a connector's. Dials to other
// host:ports go through next unchanged.
func (p *Pool) Dialer(next func(ctx context.Context, network, hostPort string) (net.Conn, error)) func(ctx context.Context, network, hostPort string) (net.Conn, error) {
	if next == nil {
		var d net.Dialer
		next = d.DialContext
	}
	return func(ctx context.Context, network, hostPort string) (net.Conn, error) {
		w, _ := ctx.Value(watchKey{}).(*watch)
		if w == nil {
			if p.managed(hostPort) {
				return nil, ErrNoConnection
			}
			return next(ctx, network, hostPort)
		}
		nc, err := next(ctx, network, hostPort)
		if err != nil {
			return nil, err
		}
		return w.wrap(nc), nil
	}
}

// Start gives the Pool the channel it connects through; the channel's
// options must hold the Pool's Dialer. Lists can add peers only after
// Start, which may be called once.
func (p *Pool) Start(tch *tchannel.Channel) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case tch == nil:
		return errors.New("pool: Start needs a tchannel.Channel")
	case p.tch != nil:
		return errors.New("pool: the Pool is already started")
	}
	p.tch = tch
	return nil
}

// Serve runs serve, which calls tchannel-go's Channel.Serve, while no
// connect of the Pool's is making its connection. tchannel-go's Serve
// rewrites the channel's logger, which its Connect reads unlocked as it
// makes a connection; a Channel adding peers before it serves would race.
// Connects still dialling or handshaking go on: Serve waits for none of
// them, only for those between a whole answer and their connection.
func (p *Pool) Serve(serve func() error) error {
	p.making.Lock()
	defer p.making.Unlock()
	return serve()
}

// managed reports whether callers' dials to hostPort are refused.
func (p *Pool) managed(hostPort string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.conns[hostPort]; ok || p.closed {
		return true
	}
	_, ok := p.released.Get(hostPort, p.clk.Now())
	return ok
}

// Acquire returns the connector of hostPort, making it on first use, and
// counts a reference to it; Release gives the reference back. A new
// connector is Idle until asked to connect (List.Add asks at once).
func (p *Pool) Acquire(hostPort string) (*Conn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		return nil, ErrClosed
	case p.tch == nil:
		return nil, errors.New("pool: the connection pool is not started; call Start first")
	}
	if c := p.conns[hostPort]; c != nil {
		c.refs++
		return c, nil
	}
	p.released.Take(hostPort, p.clk.Now())
	c := newConn(p, hostPort, p.tch.RootPeers().GetOrAdd(hostPort))
	p.conns[hostPort] = c
	p.nconns.Store(int32(len(p.conns)))
	p.wg.Add(1)
	go c.run()
	return c, nil
}

// Release gives back a reference Acquire counted. The last one stops the
// connector and closes its connection once the calls on it are done.
func (p *Pool) Release(c *Conn) {
	p.mu.Lock()
	c.refs--
	last := c.refs == 0 && p.conns[c.hostPort] == c
	if last {
		delete(p.conns, c.hostPort)
		p.nconns.Store(int32(len(p.conns)))
		p.released.Put(c.hostPort, struct{}{}, p.clk.Now())
		p.sweep.Arm(p.released.Len(), &p.mu, func() int {
			p.released.Prune(p.clk.Now())
			return p.released.Len()
		})
	}
	p.mu.Unlock()
	if last {
		c.shutdown(true)
	}
}

// Close stops every connector and waits for them to return. It does not
// close the connections: closing the channel does, once their calls are
// done.
func (p *Pool) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.sweep.Stop()
	conns := p.conns
	p.conns = map[string]*Conn{}
	p.mu.Unlock()
	p.stop()
	for _, c := range conns {
		c.shutdown(false)
	}
	p.wg.Wait()
	p.nmu.Lock()
	p.nClosed = true
	if p.nTimer != nil && p.nTimer.Stop() {
		p.nTimer = nil
		defer p.closeChanged() // the change it was due for
	}
	p.nmu.Unlock()
	p.closeChanged() // the connectors' last changes (Shutdown)
}

// Held returns how many connectors the Pool runs (one per host:port in
// use) and how many released host:ports its Dialer still refuses.
func (p *Pool) Held() (conns, released int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns), p.released.Len()
}

// Refs returns how many references Acquire counted to c and Release has
// not given back, and whether c is the Pool's connector of its host:port.
func (p *Pool) Refs(c *Conn) (refs int, held bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return c.refs, p.conns[c.hostPort] == c
}

// Changed returns a channel that is closed at the next change of any
// peer's State: at once for a peer becoming Ready, and for any change in
// a pool of at most coalesceAbove connections; within notifyGap for other
// changes in a larger pool. Read it before looking at the states, then
// wait on it.
func (p *Pool) Changed() <-chan struct{} { return *p.changed.Load() }

// notifyGap is the longest a change other than to Ready waits before
// Changed is closed for it in a pool of more than coalesceAbove
// connections, and so the least time between two closes for such changes.
// Each close sends every waiter (calls waiting for a peer, the channel's
// watch on failing peers) over the list: with thousands of peers retrying
// their connects, one close per change would keep a core busy. A peer
// becoming Ready, what waiting calls wait for, is never delayed.
// Wall-clock time, whatever the Pool's Clock: it bounds a wake-up's
// lateness, not a policy.
const notifyGap = 20 * time.Millisecond

// coalesceAbove is the most connections a pool may have for its changes
// to be told at once. In a small pool a close costs little, and a call
// waiting for a peer must learn at once that the last one failed, to fail
// fast (UNAVAILABLE) rather than notifyGap late.
const coalesceAbove = 64

// notify closes Changed for a change of a peer's state: at once if now
// (a peer became Ready, or the first resolver answer came), if the pool
// is small or if it was not closed within notifyGap; otherwise once
// notifyGap has passed since the last close, with the changes meanwhile.
func (p *Pool) Notify(now bool) {
	p.nmu.Lock()
	if !now && !p.nClosed && p.nconns.Load() > coalesceAbove { // after Close, no timer: at once
		if p.nTimer != nil {
			p.nmu.Unlock() // a close is due, and will cover this change
			return
		}
		if wait := notifyGap - time.Since(p.lastNotify); wait > 0 {
			p.nTimer = time.AfterFunc(wait, func() {
				p.nmu.Lock()
				p.nTimer = nil
				p.lastNotify = time.Now()
				p.nmu.Unlock()
				p.closeChanged()
			})
			p.nmu.Unlock()
			return
		}
	}
	p.lastNotify = time.Now()
	p.nmu.Unlock()
	p.closeChanged()
}

func (p *Pool) closeChanged() {
	ch := make(chan struct{})
	close(*p.changed.Swap(&ch))
}

// backoff returns the wait after the nth failed connect in a row.
func (p *Pool) backoff(n int) time.Duration { return p.cfg.Backoff.Delay(n, p.rand()) }

type watchKey struct{}

// watch follows one connection's socket: it learns from tchannel-go's
// reads and closes whether the remote side ended the connection or this
// process closed it, and it can abort a connect in progress.
type watch struct {
	closed chan struct{} // closed when the socket is closed
	// drain is the connection's, if the server at the other end can ask
	// it to drain (Sluice's signal carrier, internal/tchconn); set by
	// wrap, before tchannel-go has the connection.
	drain drainable
	// reported is the connection's, if it tells the protocol errors its
	// peer reported (internal/tchconn's Conn does); set by wrap.
	reported interface{ PeerProtocolError() error }

	mu      sync.Mutex
	nc      net.Conn
	readErr error // the first read error before the socket was closed
	aborted bool
	done    bool
	// The handshake's answer, the first frame read: its size field (once
	// both bytes came) and the bytes read of it. Once it is whole,
	// tchannel-go makes the connection and calls may go on it, so an abort
	// leaves its socket to the graceful close (see abort).
	head      [2]byte
	headN     int
	answerN   int
	handshook atomic.Bool
	// making is the Pool's, read-held by the connect's goroutine once the
	// answer is whole (held records it) until its Connect returns.
	making *sync.RWMutex
	held   bool
}

func newWatch(making *sync.RWMutex) *watch {
	return &watch{closed: make(chan struct{}), making: making}
}

// made ends what the handshake's whole answer began: tchannel-go's Connect
// returned, so the connection is made or never will be. Called by the
// connect's goroutine, which read the answer.
func (w *watch) made() {
	if w.held {
		w.held = false
		w.making.RUnlock()
	}
}

func (w *watch) wrap(nc net.Conn) net.Conn {
	w.drain, _ = nc.(drainable)
	w.reported, _ = nc.(interface{ PeerProtocolError() error })
	w.mu.Lock()
	w.nc = nc
	aborted := w.aborted
	w.mu.Unlock()
	if aborted {
		nc.Close()
	}
	if sc, ok := nc.(syscall.Conn); ok {
		// tchannel-go sets socket options through SyscallConn.
		return &watchedSysConn{watchedConn{nc, w}, sc}
	}
	return &watchedConn{nc, w}
}

// abort closes the socket of a connect in progress, so that a handshake
// blocked on a silent peer returns at once. Once the handshake's answer
// has been read it does not: tchannel-go may already have handed the
// connection to a call (it picks any connection to the host:port, such as
// a re-added peer's that is still connecting), which a close under it
// would fail; the connector closes it gracefully instead, after its calls.
func (w *watch) abort() {
	w.mu.Lock()
	w.aborted = true
	nc := w.nc
	if w.handshook.Load() {
		nc = nil
	}
	w.mu.Unlock()
	if nc != nil {
		nc.Close()
	}
}

// readAnswer notes b, bytes read before the handshake's answer was whole.
// It fails if an abort closed the socket under the read: the answer's
// last bytes then arrived too late, and tchannel-go must not make a
// connection of a closed socket.
// frameHeaderSize is a TChannel frame header's length, which every frame's
// size field counts.
const frameHeaderSize = 16

func (w *watch) readAnswer(b []byte) error {
	whole, err := w.noteAnswer(b)
	if whole && w.making != nil {
		// tchannel-go reads the answer in Connect's goroutine and makes
		// the connection next, before Connect returns (see made).
		w.making.RLock()
		w.held = true
	}
	return err
}

// noteAnswer is readAnswer's bookkeeping, under w.mu: whole reports that
// b completed the answer.
func (w *watch) noteAnswer(b []byte) (whole bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.aborted {
		return false, net.ErrClosed
	}
	w.headN += copy(w.head[w.headN:], b)
	w.answerN += len(b)
	// A size field below a header's 16 bytes is the peer's lie: tchannel-go
	// still waits for the header, and the abort must still end that wait.
	if w.headN == len(w.head) && w.answerN >= max(int(binary.BigEndian.Uint16(w.head[:])), frameHeaderSize) && !w.handshook.Load() {
		w.handshook.Store(true)
		return true, nil
	}
	return false, nil
}

// drainable is a connection whose server can ask it to drain: close once
// its calls are done (Sluice's signal carrier; *tchconn.Conn is one).
type drainable interface {
	// Drained is closed once the server asked.
	Drained() <-chan struct{}
	// PeerLeaving reports that the server said it is leaving, not only
	// that it wants this connection closed.
	PeerLeaving() bool
}

// drained returns a channel closed once the server asked the connection
// to drain; nil (never ready) for a connection no server can ask.
func (w *watch) drained() <-chan struct{} {
	if w.drain == nil {
		return nil
	}
	return w.drain.Drained()
}

// peerLeaving reports whether the server said it is leaving.
func (w *watch) peerLeaving() bool { return w.drain != nil && w.drain.PeerLeaving() }

// dialed reports whether the connect's TCP dial succeeded.
func (w *watch) dialed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.nc != nil
}

// remoteErr returns the first read error seen while the socket was open
// (io.EOF when the remote side closed it, another error when it was reset
// or failed), or the protocol error the peer reported on which tchannel-go
// closed it, or nil when this process closed it of its own accord.
func (w *watch) remoteErr() error {
	w.mu.Lock()
	err := w.readErr
	w.mu.Unlock()
	if err == nil && w.reported != nil {
		// tchannel-go closed the connection on the peer's word: the peer
		// ended it, as much as if it had closed it.
		err = w.reported.PeerProtocolError()
	}
	return err
}

func (w *watch) readFailed(err error) {
	w.mu.Lock()
	if !w.done && w.readErr == nil {
		w.readErr = err
	}
	w.mu.Unlock()
}

func (w *watch) close() {
	w.mu.Lock()
	if !w.done {
		w.done = true
		close(w.closed)
	}
	w.mu.Unlock()
}

type watchedConn struct {
	net.Conn
	w *watch
}

func (c *watchedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && !c.w.handshook.Load() {
		if aerr := c.w.readAnswer(b[:n]); aerr != nil {
			return 0, aerr
		}
	}
	if err != nil {
		c.w.readFailed(err)
	}
	return n, err
}

func (c *watchedConn) Close() error {
	c.w.close()
	return c.Conn.Close()
}

// NetConn returns the connection it watches (the dialer's), as tls.Conn's
// does: a handler of a call this connection carries finds the connection's
// own type through it.
func (c *watchedConn) NetConn() net.Conn { return c.Conn }

type watchedSysConn struct {
	watchedConn
	sc syscall.Conn
}

func (c *watchedSysConn) SyscallConn() (syscall.RawConn, error) { return c.sc.SyscallConn() }
