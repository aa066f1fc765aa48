// Package tchconn guards TChannel connections against the peer at the other
// end: every frame is checked before tchannel-go reads it, and what a peer
// can make a process hold is bounded in bytes and in time.
//
// A Guard wraps each connection of a channel in a *Conn: the listener's
// (Gate) and the dialer's (Client). A Conn reads the socket ahead into its
// own buffer and hands tchannel-go only whole frames that tframe.Parse
// accepts; the first frame that breaks the protocol is answered with a
// protocol error and ends the connection, so tchannel-go never parses it.
// On top of the frame checks a Conn keeps the protocol's rules tchannel-go
// does not: the first frame is an init frame, and no init frame follows.
//
// A request that arrives in several fragments is unfinished until its last
// fragment. The frame bytes of unfinished requests are budgeted per
// connection and per Guard: a first fragment over budget is refused with
// BUSY and never reaches tchannel-go (nor do its other fragments); a later
// fragment over budget drops its request: the peer gets BUSY, tchannel-go
// gets a cancel for it, so its handler ends. When the Guard's budget is
// spent but a connection holds less than its fair share (the budget over
// the connections holding unfinished requests), the connection holding the
// most gives up its largest request to make room. A request whose next
// fragment does not come within StallTimeout is dropped the same way, with
// TIMEOUT, whatever time to live it claimed; a frame whose bytes stop
// coming for as long closes its connection.
//
// A Conn also counts the calls it serves (BeginCall, EndCall), so that a
// server can refuse calls beyond MaxCallsPerConn: responses a peer does not
// read pile up per call. Over all connections, the calls whose answers are
// not yet written are charged their bytes, within MaxAnswerBytes: a call
// over it is answered BUSY before tchannel-go sees it (answers.go).
package tchconn

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/tframe"
)

// Defaults of Limits' zero fields.
const (
	// DefaultStallTimeout drops a request whose fragments stop coming,
	// and closes a connection whose frame stops coming, after 10 s.
	DefaultStallTimeout = 10 * time.Second
	// DefaultMaxUnfinishedPerConn is 16 MiB of unfinished requests per
	// connection: four requests at the Channel's default size limit.
	DefaultMaxUnfinishedPerConn = 16 << 20
	// DefaultMaxUnfinished is 128 MiB of unfinished requests in all.
	DefaultMaxUnfinished = 128 << 20
	// DefaultMaxCallsPerConn bounds the calls a connection has in
	// flight.
	DefaultMaxCallsPerConn = 1024
	// DefaultMaxAnswerBytes is 128 MiB of calls whose answers are not yet
	// written, over all connections: with what tchannel-go and the
	// handlers hold beside the charged bytes, and the collector's
	// headroom, a process that peers do not read from stays within about
	// 500 MB.
	DefaultMaxAnswerBytes = 128 << 20
)

// MinMaxAnswerBytes is the least MaxAnswerBytes that admits any call: the
// charge of a call whose request fills a frame.
const MinMaxAnswerBytes = 2 * answerFrame

// MaxInitSize bounds an init frame. tchannel-go's are about 150 bytes;
// other implementations' hold the same few parameters.
const MaxInitSize = 8 << 10

// Limits bounds what the peers of a Guard's connections can make it hold.
// The zero value means the defaults; a negative value turns a limit off.
type Limits struct {
	// StallTimeout drops a request whose next fragment has not come for
	// this long, and closes a connection whose frame has not been whole
	// for this long since its first byte. 0: DefaultStallTimeout.
	StallTimeout time.Duration
	// MaxUnfinishedPerConn bounds the frame bytes of a connection's
	// unfinished requests. 0: DefaultMaxUnfinishedPerConn.
	MaxUnfinishedPerConn int64
	// MaxUnfinished bounds the frame bytes of unfinished requests on all
	// the Guard's connections. 0: DefaultMaxUnfinished.
	MaxUnfinished int64
	// MaxCallsPerConn bounds the calls a connection has in flight
	// (BeginCall). 0: DefaultMaxCallsPerConn.
	MaxCallsPerConn int
	// MaxAnswerBytes bounds the bytes charged, over all connections, for
	// calls whose answers are not yet written: each its request's frame
	// bytes and a frame for its answer. 0: DefaultMaxAnswerBytes.
	MaxAnswerBytes int64
}

// Validate reports the first field that breaks its rule.
func (l Limits) Validate() error {
	l = l.withDefaults()
	switch {
	case l.MaxUnfinished > 0 && l.MaxUnfinishedPerConn > l.MaxUnfinished:
		return fmt.Errorf("MaxUnfinishedPerConn is %d, more than MaxUnfinished (%d); a connection cannot hold more than all of them", l.MaxUnfinishedPerConn, l.MaxUnfinished)
	case l.MaxAnswerBytes > 0 && l.MaxAnswerBytes < MinMaxAnswerBytes:
		return fmt.Errorf("MaxAnswerBytes is %d, below %d (a request frame and its answer's): no call could be admitted", l.MaxAnswerBytes, MinMaxAnswerBytes)
	}
	return nil
}

func (l Limits) withDefaults() Limits {
	l.StallTimeout = cmp.Or(l.StallTimeout, DefaultStallTimeout)
	l.MaxUnfinishedPerConn = cmp.Or(l.MaxUnfinishedPerConn, DefaultMaxUnfinishedPerConn)
	l.MaxUnfinished = cmp.Or(l.MaxUnfinished, DefaultMaxUnfinished)
	l.MaxCallsPerConn = cmp.Or(l.MaxCallsPerConn, DefaultMaxCallsPerConn)
	l.MaxAnswerBytes = cmp.Or(l.MaxAnswerBytes, DefaultMaxAnswerBytes)
	return l
}

// EventKind says what a Guard did about a peer.
type EventKind int

// The events.
const (
	// InvalidFrame: the peer sent a frame that breaks the protocol; its
	// connection was closed.
	InvalidFrame EventKind = iota + 1
	// FrameStalled: a frame's bytes stopped coming for StallTimeout; the
	// connection was closed.
	FrameStalled
	// RequestRefused: a request's first fragment was over budget; the
	// peer got BUSY and tchannel-go never saw the request.
	RequestRefused
	// RequestDropped: a later fragment was over budget, or the request
	// was the largest of the connection holding the most when another
	// needed room; the peer got BUSY and the handler a cancel.
	RequestDropped
	// RequestStalled: a request's fragments stopped coming for
	// StallTimeout; the peer got TIMEOUT and the handler a cancel.
	RequestStalled
	// CallRefused: a call came while its connection had MaxCallsPerConn
	// in flight (reported by the server's handler wrapper).
	CallRefused
	// AnswersRefused: a call came while the Guard's answers not yet
	// written were at MaxAnswerBytes and its connection held its share;
	// the peer got BUSY and tchannel-go never saw the call.
	AnswersRefused
	// AnswersUnread: the connection owed the most answers not yet
	// written, over its share of MaxAnswerBytes, when a connection under
	// its share needed room; it was closed.
	AnswersUnread
)

func (k EventKind) String() string {
	switch k {
	case InvalidFrame:
		return "invalid_frame"
	case FrameStalled:
		return "frame_stalled"
	case RequestRefused:
		return "request_refused"
	case RequestDropped:
		return "request_dropped"
	case RequestStalled:
		return "request_stalled"
	case CallRefused:
		return "call_refused"
	case AnswersRefused:
		return "answers_refused"
	case AnswersUnread:
		return "answers_unread"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is something a Guard did about a peer.
type Event struct {
	Kind EventKind
	// Peer is the connection's remote address.
	Peer string
	// Inbound is set for connections the listener accepted.
	Inbound bool
	// ID is the message id of the request or frame, when there is one.
	ID uint32
	// Err says what was wrong or what was over its limit.
	Err error
}

// Config configures a Guard. The zero value means the defaults.
type Config struct {
	Limits Limits
	// OnEvent, if set, is called for each Event, on the goroutine that
	// decided it: it must not block.
	OnEvent func(Event)
	// Clock times stalls; nil means the wall clock.
	Clock clock.Clock
}

// Guard is what a channel's connections share: their limits, the budget
// of unfinished requests, and the sweep that finds stalls. It is safe for
// concurrent use.
type Guard struct {
	lim     Limits
	onEvent func(Event)
	clk     clock.Clock
	start   time.Time
	now     atomic.Int64 // the sweep's time, ns since start

	done chan struct{}
	wg   sync.WaitGroup

	mu         sync.Mutex
	conns      map[*Conn]struct{}
	unfinished int64              // frame bytes of unfinished requests, all connections
	holding    map[*Conn]struct{} // connections with unfinished requests
	closed     bool

	owed    atomic.Int64 // bytes charged for answers not yet written (answers.go)
	holders atomic.Int32 // connections owed answers

	// The signal carrier's (signal.go).
	leaving     atomic.Bool   // Leave was called
	inSignalled int           // inbound connections whose client announced signals; guarded by mu
	inPlain     int           // the other inbound connections; guarded by mu
	plainCalls  atomic.Uint64 // calls that came on the others

	// Load reports (load.go).
	loadReporter atomic.Pointer[LoadReporter]
	onLoad       atomic.Pointer[func(string, Load)]
	_            [56]byte      // keeps served off the fields above's cache line
	served       atomic.Uint64 // call res frames tchannel-go wrote on inbound connections
}

// New returns a Guard. Close stops its sweep.
func New(cfg Config) (*Guard, error) {
	if err := cfg.Limits.Validate(); err != nil {
		return nil, fmt.Errorf("tchconn: %w", err)
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.Real
	}
	g := &Guard{lim: cfg.Limits.withDefaults(), onEvent: cfg.OnEvent, clk: clk, start: clk.Now(),
		done: make(chan struct{}), conns: map[*Conn]struct{}{}, holding: map[*Conn]struct{}{}}
	if g.lim.StallTimeout > 0 || g.lim.MaxAnswerBytes > 0 {
		g.wg.Add(1)
		go g.sweepLoop()
	}
	return g, nil
}

// Limits returns the limits in force, defaults filled in.
func (g *Guard) Limits() Limits { return g.lim }

// Close stops the sweep. Connections keep working, unswept.
func (g *Guard) Close() {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	g.closed = true
	g.mu.Unlock()
	close(g.done)
	g.wg.Wait()
}

// Conns returns the number of connections the Guard watches (open ones,
// and ones not yet seen closed by their reader).
func (g *Guard) Conns() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.conns)
}

// Unfinished returns the frame bytes of unfinished requests on all
// connections.
func (g *Guard) Unfinished() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.unfinished
}

// Client wraps nc, a connection this process dialed, before tchannel-go's
// handshake: the first frame it reads must be an init response (or an
// error).
func (g *Guard) Client(nc net.Conn) *Conn { return g.newConn(nc, nil, false) }

// Gate reads a connection's first frame, which must be an init request,
// and returns the Conn that hands it to tchannel-go: a listener calls it
// before Accept returns the connection, so that a socket that connects and
// waits holds no frame buffer of tchannel-go's. It reads with nc's own
// deadline; lim, if not nil, receives the connection's activity.
func (g *Guard) Gate(nc net.Conn, lim Activity) (*Conn, error) {
	c := g.newConn(nc, lim, true)
	if err := c.readFirst(); err != nil {
		var pe *tframe.ProtocolError
		if errors.As(err, &pe) {
			if err == errTLSClient {
				c.discardTLSRecord() // within nc's deadline
			}
			c.invalid(err) // reported, and answered, as any invalid frame
		}
		c.forget()
		return nil, err
	}
	g.mu.Lock()
	if !c.gone {
		c.counted = countedPlain
		g.inPlain++
		if c.signals.Load() {
			c.counted = countedSignalled
			g.inPlain--
			g.inSignalled++
		}
	}
	g.mu.Unlock()
	return c, nil
}

// Activity receives a server connection's activity: Active at each frame
// of a call, Begin and End around each call served. *connlimit.Conn is one.
type Activity interface {
	Active()
	Begin()
	End()
}

func (g *Guard) newConn(nc net.Conn, lim Activity, inbound bool) *Conn {
	c := &Conn{Conn: nc, g: g, lim: lim, inbound: inbound, first: true, peer: nc.RemoteAddr().String(), drained: make(chan struct{})}
	c.buf = c.small[:]
	g.mu.Lock()
	g.conns[c] = struct{}{}
	g.mu.Unlock()
	return c
}

func (g *Guard) nowNS() int64 { return int64(g.clk.Since(g.start)) }

func (g *Guard) report(e Event) {
	if g.onEvent != nil {
		g.onEvent(e)
	}
}

// admit charges n frame bytes of a request to c and the Guard, or returns
// why they are over budget. On the Guard's budget it may make room instead
// (see the package doc): it then returns the connection it dropped a
// request of, to interrupt once g.mu is released. Call it with g.mu held.
func (g *Guard) admit(c *Conn, n int64) (victim *Conn, err error) {
	if max := g.lim.MaxUnfinishedPerConn; max > 0 && c.unfinished+n > max {
		return nil, fmt.Errorf("server busy: this connection has %d bytes of unfinished requests and its limit is %d; send fewer or smaller requests at once", c.unfinished, max)
	}
	if max := g.lim.MaxUnfinished; max > 0 && g.unfinished+n > max {
		holders := len(g.holding)
		if _, ok := g.holding[c]; !ok {
			holders++
		}
		share := max / int64(holders)
		if c.unfinished+n > share {
			return nil, fmt.Errorf("server busy: %d bytes of unfinished requests, its limit is %d, and this connection holds its share (%d); retry later", g.unfinished, max, share)
		}
		// Make room: the largest requests of the connection holding the
		// most give way, while it holds more than its share, to a
		// connection under its share.
		for g.unfinished+n > max {
			var hog *Conn
			for h := range g.holding {
				if h != c && (hog == nil || h.unfinished > hog.unfinished) {
					hog = h
				}
			}
			if hog == nil || hog.unfinished <= share {
				if victim != nil {
					break // what could be freed was: admit a little over
				}
				return nil, fmt.Errorf("server busy: %d bytes of unfinished requests, its limit is %d; retry later", g.unfinished, max)
			}
			id, _ := hog.largest()
			hog.dropLocked(id, errCodeBusy, RequestDropped,
				fmt.Errorf("server busy: request dropped to make room for a connection under its share of %d bytes of unfinished requests; retry later", max))
			if victim != nil && victim != hog {
				victim.interrupt() // an earlier hog's drops; the caller interrupts the last
			}
			victim = hog
		}
	}
	g.charge(c, n)
	return victim, nil
}

// charge adds n bytes (negative: releases) to c's and the Guard's
// unfinished requests. Call it with g.mu held.
func (g *Guard) charge(c *Conn, n int64) {
	c.unfinished += n
	g.unfinished += n
	if c.unfinished > 0 {
		g.holding[c] = struct{}{}
	} else {
		delete(g.holding, c)
	}
}

func (g *Guard) sweepLoop() {
	defer g.wg.Done()
	tick := time.Second
	if g.lim.StallTimeout > 0 {
		tick = min(tick, max(g.lim.StallTimeout/4, time.Millisecond))
	}
	for {
		t := g.clk.NewTimer(tick)
		select {
		case <-t.C():
			g.sweep()
		case <-g.done:
			t.Stop()
			return
		}
	}
}

// sweep finds stalled requests and frames.
func (g *Guard) sweep() {
	now := g.nowNS()
	g.now.Store(now)
	stall := int64(g.lim.StallTimeout)
	var stalledFrames, wake []*Conn
	g.mu.Lock()
	if stall > 0 {
		for c := range g.conns {
			if at := c.partialSince.Load(); at != 0 && now-at >= stall && c.partialSince.CompareAndSwap(at, 0) {
				stalledFrames = append(stalledFrames, c)
			}
		}
		for c := range g.holding {
			if c.sweepRequests(now, stall) {
				wake = append(wake, c)
			}
		}
	}
	var owing []*Conn
	for c := range g.conns {
		if c.nowed.Load() > 0 {
			owing = append(owing, c)
		}
	}
	g.mu.Unlock()
	for _, c := range owing {
		c.sweepAnswers(now)
	}
	for _, c := range stalledFrames {
		err := errStalled(g.lim.StallTimeout)
		g.report(Event{Kind: FrameStalled, Peer: c.peer, Inbound: c.inbound, Err: err})
		// Close the socket: its reader may be anywhere, in tchannel-go
		// too; once it reads again it returns err, a protocol error, so
		// that a client backs off from such a server.
		c.stalled.Store(true)
		c.Conn.Close()
	}
	for _, c := range wake {
		c.interrupt()
	}
}

// errStalled is the error of a connection closed for a frame whose bytes
// stopped coming.
func errStalled(d time.Duration) error {
	return &tframe.ProtocolError{Reason: fmt.Sprintf("a frame's bytes stopped coming for %v", d)}
}

// errCodeBusy and errCodeTimeout are TChannel's system error codes.
const (
	errCodeTimeout  = 0x01
	errCodeBusy     = 0x03
	errCodeProtocol = 0xFF
)
