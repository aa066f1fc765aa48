// Package connlimit bounds the connections a server accepts: how many it
// holds, how long a new one may take to show it speaks the protocol, how
// long one may sit idle or leave a write blocked; at the cap it closes the
// least useful connection to make room for the new one.
//
// A Listener wraps a net.Listener. Each accepted socket becomes a *Conn,
// counted until it is closed. A Conn is
//
//   - pending until its Gate passes (a Listener without a Gate has none):
//     Accept does not return it yet, and the gate must finish within
//     GateTimeout;
//   - open, once Accept has returned it;
//   - serving, from its first call (Active), for good.
//
// The protocol above marks a Conn's calls with Active and Begin/End; pings
// and other keepalives must not count. A Conn with no call in flight and
// no Active for IdleTimeout is closed. A Conn whose writes are stalled is
// closed too: one that has had a write in progress at every sweep for
// WriteTimeout, during which that write never ended or its peer took fewer
// than MinReadRate bytes a second. So a peer that reads nothing, and one
// that reads a little now and then to keep each write moving, are judged
// alike, by their progress over time. At MaxConns a new socket closes,
// in this order of preference, a pending Conn, an open one that never
// served a call, a serving one, each the longest idle first, and never a
// Conn with a call in flight; if every Conn has a call in flight the new
// socket is closed instead. So sockets that connect and wait cannot lock
// out a client that calls, and a client mid-call is never cut.
//
// A connection closed by the server may take a call its client sent at the
// same moment: the protocol above can avoid that where the client can be
// asked to close the connection itself (SetDrain). An idle or evicted Conn
// that can be asked is asked instead of closed, and leaves the count at
// once; it is closed when its client closes it, or DrainWait later with
// no call in flight. At most MaxConns/16 (at least 8) are so draining at
// once; beyond that they are closed as before. The floor is for small
// caps: one client being reconnected often can have several of its
// connections draining at once, and closing one of them under a call is
// what draining is for; 8 descriptors beyond a cap cost nothing.
//
// Activity is kept at the resolution of the Listener's sweep (a second at
// most), which makes Active two atomic stores: cheap enough for every
// frame of a call.
package connlimit

import (
	"container/heap"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-rpc/sluice/clock"
)

// Defaults of Config's zero fields.
const (
	// DefaultIdleTimeout closes a connection with no call for five minutes.
	DefaultIdleTimeout = 5 * time.Minute
	// DefaultGateTimeout is the time a new connection has to pass its
	// gate: tchannel-go gives a handshake five seconds.
	DefaultGateTimeout = 5 * time.Second
	// DefaultWriteTimeout closes a connection whose writes have made no
	// progress for this long: its peer stopped reading.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultMinReadRate is the pace, 128 KiB a second (1 Mbit/s), below
	// which a peer with writes waiting for it throughout WriteTimeout is
	// taken for a stalled one.
	DefaultMinReadRate = 128 << 10
	// DrainWait is how long a Conn whose client was asked to close it
	// (SetDrain) is left to the client: an idle client closes it within a
	// round trip.
	DrainWait = 2 * time.Second
)

// DefaultMaxConns returns the cap a zero Config.MaxConns means: half the
// process's descriptor limit (RLIMIT_NOFILE), leaving the other half to
// outbound connections and files, and at least 64.
func DefaultMaxConns() int { return max(64, descriptorLimit()/2) }

// Config says how a Listener bounds its connections. The zero value means
// the defaults.
type Config struct {
	// MaxConns is the most connections held at once, pending ones
	// included; 0 means DefaultMaxConns().
	MaxConns int
	// IdleTimeout closes a connection with no call in flight and no
	// activity for this long; 0 means DefaultIdleTimeout, a negative
	// value never.
	IdleTimeout time.Duration
	// WriteTimeout closes a connection whose pending write has made no
	// progress for this long; 0 means DefaultWriteTimeout, a negative
	// value never.
	WriteTimeout time.Duration
	// MinReadRate, in bytes a second, is the least pace at which a peer
	// must take what is written to it while writes wait for it: one that
	// has had a write in progress at every sweep for WriteTimeout and took
	// fewer bytes than MinReadRate x WriteTimeout meanwhile is stalled.
	// 0 means DefaultMinReadRate; a negative value keeps only the rule
	// that one write made no progress for WriteTimeout.
	MinReadRate int64
	// Gate, if set, runs on each new connection, with a read deadline of
	// GateTimeout, before Accept returns it: the connection Accept returns
	// is the one Gate returns (it may wrap c). An error closes c.
	Gate func(c *Conn) (net.Conn, error)
	// GateTimeout bounds Gate; 0 means DefaultGateTimeout.
	GateTimeout time.Duration
	// OnClose, if set, is called when the Listener closes a connection,
	// with the reason and, for GateFailed, the gate's error.
	OnClose func(c *Conn, why Reason, err error)
	// Clock times idleness and stalled writes; nil means the wall clock.
	Clock clock.Clock
}

// Validate reports the first field that breaks its rule.
func (c Config) Validate() error {
	switch {
	case c.MaxConns < 0:
		return fmt.Errorf("connlimit: MaxConns is %d, must be >= 0 (0: half the descriptor limit)", c.MaxConns)
	case c.GateTimeout < 0:
		return fmt.Errorf("connlimit: GateTimeout is %v, must be >= 0 (0: %v)", c.GateTimeout, DefaultGateTimeout)
	}
	return nil
}

// Reason says why a Listener closed a connection.
type Reason int

// The reasons.
const (
	// Evicted: the Listener was at MaxConns and a new connection came.
	Evicted Reason = iota + 1
	// Refused: the Listener was at MaxConns, every connection had a call
	// in flight, and this is the new one.
	Refused
	// Idle: no call for IdleTimeout.
	Idle
	// WriteStalled: a write made no progress for WriteTimeout.
	WriteStalled
	// GateTimeout: the gate did not finish within GateTimeout.
	GateTimeout
	// GateFailed: the gate returned an error.
	GateFailed
)

func (r Reason) String() string {
	switch r {
	case Evicted:
		return "evicted"
	case Refused:
		return "refused"
	case Idle:
		return "idle"
	case WriteStalled:
		return "write_stalled"
	case GateTimeout:
		return "gate_timeout"
	case GateFailed:
		return "gate_failed"
	}
	return fmt.Sprintf("Reason(%d)", int(r))
}

// Eviction classes, in the order a connection is given up: a lower class
// goes first.
const (
	pending int32 = iota
	open
	serving
)

// Listener is a net.Listener that bounds its connections as its Config
// says. It is safe for concurrent use.
type Listener struct {
	inner net.Listener
	cfg   Config
	clk   clock.Clock
	start time.Time
	now   atomic.Int64 // the sweep's time, in ns since start

	accepted chan net.Conn
	done     chan struct{}
	wg       sync.WaitGroup // the accept loop, the sweeper, gates

	mu       sync.Mutex
	conns    connHeap           // every Conn held, least useful on top
	draining map[*Conn]struct{} // Conns whose client was asked to close them, out of conns
	closed   bool
	err      error // why the accept loop stopped
}

// Listen returns a Listener accepting on inner. Close closes inner.
func Listen(inner net.Listener, cfg Config) (*Listener, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = DefaultMaxConns()
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.MinReadRate == 0 {
		cfg.MinReadRate = DefaultMinReadRate
	}
	if cfg.GateTimeout == 0 {
		cfg.GateTimeout = DefaultGateTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
	}
	l := &Listener{inner: inner, cfg: cfg, clk: cfg.Clock, start: cfg.Clock.Now(),
		accepted: make(chan net.Conn), done: make(chan struct{}), draining: map[*Conn]struct{}{}}
	l.wg.Add(2)
	go l.acceptLoop()
	go l.sweepLoop()
	return l, nil
}

// Accept returns the next connection that passed the gate.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.accepted:
		return c, nil
	case <-l.done:
		l.mu.Lock()
		defer l.mu.Unlock()
		return nil, l.err
	}
}

// Addr returns the inner listener's address.
func (l *Listener) Addr() net.Addr { return l.inner.Addr() }

// Close stops accepting and closes the pending connections; open ones
// stay with whoever accepted them. It waits for the Listener's goroutines.
func (l *Listener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.err = net.ErrClosed
	var waiting []*Conn
	for _, c := range l.conns {
		if c.class.Load() == pending {
			waiting = append(waiting, c)
		}
	}
	l.mu.Unlock()
	close(l.done)
	err := l.inner.Close()
	for _, c := range waiting {
		c.Close()
	}
	l.wg.Wait()
	return err
}

// Len returns the number of connections held, pending and draining ones
// included.
func (l *Listener) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns) + len(l.draining)
}

// minDraining is the least bound on the Conns draining at once.
const minDraining = 8

// maxDraining bounds the Conns draining at once.
func (l *Listener) maxDraining() int { return max(minDraining, l.cfg.MaxConns/16) }

// MaxConns returns the cap in force.
func (l *Listener) MaxConns() int { return l.cfg.MaxConns }

// nowNS returns the clock's time in ns since the Listener started, and
// makes it the activity clock's if it is later: the clock only moves on,
// so that a key in the heap is never later than its connection's.
func (l *Listener) nowNS() int64 {
	now := int64(l.clk.Since(l.start))
	for {
		old := l.now.Load()
		if now <= old || l.now.CompareAndSwap(old, now) {
			return max(now, old)
		}
	}
}

func (l *Listener) acceptLoop() {
	defer l.wg.Done()
	var backoff time.Duration
	for {
		nc, err := l.inner.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || transient(err) {
				// Out of descriptors (or a passing error): make room by
				// closing the least useful connection, and retry after
				// a pause, as net/http does.
				l.evict()
				backoff = min(max(5*time.Millisecond, 2*backoff), time.Second)
				select {
				case <-time.After(backoff):
					continue
				case <-l.done:
					return
				}
			}
			l.mu.Lock()
			if !l.closed {
				l.err = fmt.Errorf("connlimit: accept: %w", err)
				l.closed = true
				close(l.done)
			}
			l.mu.Unlock()
			return
		}
		backoff = 0
		c := l.add(nc)
		if c == nil {
			continue
		}
		if l.cfg.Gate == nil {
			l.hand(c, c)
			continue
		}
		l.wg.Add(1)
		go l.gate(c)
	}
}

// add registers a new socket, evicting to stay within MaxConns; it returns
// nil if the socket was refused (closed).
func (l *Listener) add(nc net.Conn) *Conn {
	now := l.nowNS()
	c := &Conn{Conn: nc, l: l, idx: -1}
	c.last.Store(now)
	if l.cfg.Gate == nil {
		c.class.Store(open)
	}
	for {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			nc.Close()
			return nil
		}
		if len(l.conns) < l.cfg.MaxConns {
			c.key = connKey{c.class.Load(), now}
			heap.Push(&l.conns, c)
			l.mu.Unlock()
			return c
		}
		victim := l.leastUseful(now)
		l.mu.Unlock()
		if victim == nil {
			l.report(c, Refused, nil)
			nc.Close()
			return nil
		}
		l.retire(victim, Evicted, now)
	}
}

// retire gives up c, which is out of the heap, for why: it asks c's client
// to close it if c can be asked and the draining Conns are not at their
// bound, and closes it otherwise.
func (l *Listener) retire(c *Conn, why Reason, now int64) {
	l.mu.Lock()
	drain := c.drain
	ask := drain != nil && len(l.draining) < l.maxDraining() && !l.closed && c.idx < 0
	if ask {
		l.draining[c] = struct{}{}
		c.drainWhy, c.drainAt = why, now
	}
	l.mu.Unlock()
	if ask && drain() {
		return
	}
	l.mu.Lock()
	delete(l.draining, c)
	l.mu.Unlock()
	c.closeFor(why, nil)
}

// evict closes the least useful connection, if any has no call in flight.
func (l *Listener) evict() {
	l.mu.Lock()
	victim := l.leastUseful(l.nowNS())
	l.mu.Unlock()
	if victim != nil {
		victim.closeFor(Evicted, nil) // a descriptor is wanted now: no drain
	}
}

// leastUseful removes from the heap and returns the connection to give up
// first, or nil if every one has a call in flight. Call it with l.mu held.
//
// Keys in the heap may be stale: a Conn's activity and class only grow,
// and are read afresh when it reaches the top; a stale top is re-keyed
// and sinks. A busy Conn is keyed as serving now, the most useful there
// is, so once a busy Conn is on top after re-keying, all are busy.
func (l *Listener) leastUseful(now int64) *Conn {
	for len(l.conns) > 0 {
		c := l.conns[0]
		k := c.currentKey(now)
		if k == c.key {
			if c.busy.Load() > 0 {
				return nil // every Conn is busy
			}
			heap.Pop(&l.conns)
			return c
		}
		c.key = k
		heap.Fix(&l.conns, 0)
	}
	return nil
}

func (l *Listener) gate(c *Conn) {
	defer l.wg.Done()
	// Sockets keep the wall clock's time, whatever clock times idleness.
	_ = c.SetReadDeadline(time.Now().Add(l.cfg.GateTimeout))
	wrapped, err := l.cfg.Gate(c)
	if err != nil {
		why := GateFailed
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			why = GateTimeout
		}
		c.closeFor(why, err)
		return
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		c.closeFor(GateFailed, err)
		return
	}
	c.class.CompareAndSwap(pending, open)
	l.hand(c, wrapped)
}

// hand passes an accepted connection to Accept; nc is c or the gate's
// wrapping of it, which is closed if nobody accepts it.
func (l *Listener) hand(c *Conn, nc net.Conn) {
	select {
	case l.accepted <- nc:
	case <-l.done:
		nc.Close()
		c.Close()
	}
}

func (l *Listener) sweepLoop() {
	defer l.wg.Done()
	tick := time.Second
	for _, d := range []time.Duration{l.cfg.IdleTimeout, l.cfg.WriteTimeout} {
		if d > 0 {
			tick = min(tick, max(d/4, time.Millisecond))
		}
	}
	for {
		t := l.clk.NewTimer(tick)
		select {
		case <-t.C():
			l.sweep()
		case <-l.done:
			t.Stop()
			return
		}
	}
}

// sweep advances the activity clock and closes idle connections and
// connections whose writes stalled. It looks at every connection: a few
// atomic loads each, once a tick.
func (l *Listener) sweep() {
	now := l.nowNS()
	idleFor, stallFor := int64(l.cfg.IdleTimeout), int64(l.cfg.WriteTimeout)
	var idle, stalled, drained []*Conn
	l.mu.Lock()
	for _, c := range l.conns {
		switch {
		case idleFor > 0 && c.busy.Load() == 0 && c.class.Load() != pending && now-c.last.Load() >= idleFor:
			idle = append(idle, c)
		case stallFor > 0 && c.writeStalled(now, stallFor, l.cfg.MinReadRate):
			stalled = append(stalled, c)
		}
	}
	for c := range l.draining {
		switch {
		case stallFor > 0 && c.writeStalled(now, stallFor, l.cfg.MinReadRate):
			stalled = append(stalled, c)
		case c.busy.Load() == 0 && now-c.drainAt >= int64(DrainWait):
			drained = append(drained, c)
		}
	}
	for _, c := range idle {
		heap.Remove(&l.conns, c.idx)
	}
	l.mu.Unlock()
	for _, c := range idle {
		l.retire(c, Idle, now)
	}
	for _, c := range stalled {
		c.closeFor(WriteStalled, nil)
	}
	for _, c := range drained {
		c.closeFor(c.drainWhy, nil)
	}
}

// transient reports whether an accept error passes: the process or the
// system is out of descriptors or buffers for now, or the listener says
// the error is temporary (a listener of the caller's may).
func transient(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM} {
		if errors.Is(err, e) {
			return true
		}
	}
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

func (l *Listener) report(c *Conn, why Reason, err error) {
	if f := l.cfg.OnClose; f != nil {
		f(c, why, err)
	}
}

// Conn is a connection a Listener accepted. The protocol above it reports
// its calls: Active at each frame or message of a call, Begin and End
// around each call it serves.
type Conn struct {
	net.Conn
	l *Listener

	last  atomic.Int64 // the sweep time of the last activity
	class atomic.Int32
	busy  atomic.Int32  // calls in flight
	wgen  atomic.Uint32 // odd while a write is in progress
	wrote atomic.Int64  // bytes written
	once  sync.Once

	// Guarded by l.mu.
	drain    func() bool // asks the client to close the connection itself (SetDrain)
	idx      int         // in l.conns, or -1
	key      connKey
	drainWhy Reason // why it was retired, while draining
	drainAt  int64  // when its client was asked to close it

	// The sweeper's own: the run of sweeps that each found a write in
	// progress, since runAt, when the write in progress was runGen and
	// runWrote bytes were written.
	inRun    bool
	runGen   uint32
	runAt    int64
	runWrote int64
}

type connKey struct {
	class int32
	last  int64
}

func (k connKey) less(o connKey) bool {
	return k.class < o.class || k.class == o.class && k.last < o.last
}

// currentKey is c's eviction key now.
func (c *Conn) currentKey(now int64) connKey {
	if c.busy.Load() > 0 {
		return connKey{serving, now}
	}
	return connKey{c.class.Load(), c.last.Load()}
}

// Active records a call's activity on c: a frame or message of a call,
// not a ping. The first makes c a serving connection for good.
func (c *Conn) Active() {
	c.last.Store(c.l.now.Load())
	if c.class.Load() != serving {
		c.class.Store(serving)
	}
}

// SetDrain gives c a way to ask its client to close it once its calls are
// done: ask reports whether the client was asked (it never blocks). An
// idle or evicted c is then asked instead of closed (see the package doc).
// Call it before the Listener's Accept returns c: from its Gate.
//
// A Conn is counted, and may be evicted, while its Gate runs: drain is
// guarded by the Listener's lock.
func (c *Conn) SetDrain(ask func() bool) {
	c.l.mu.Lock()
	c.drain = ask
	c.l.mu.Unlock()
}

// Begin records a call in flight on c until End: a Conn with a call in
// flight is neither idle nor evicted.
func (c *Conn) Begin() { c.busy.Add(1) }

// End ends a call Begin began, and records activity.
func (c *Conn) End() {
	c.busy.Add(-1)
	c.Active()
}

// Write writes to the socket, marking the write in progress for the
// stalled-write check.
func (c *Conn) Write(b []byte) (int, error) {
	c.wgen.Add(1) // odd: a write in progress
	n, err := c.Conn.Write(b)
	c.wrote.Add(int64(n))
	c.wgen.Add(1)
	return n, err
}

// writeStalled reports whether c's writes have stalled: every sweep for
// timeout found a write in progress, and either the write in progress
// when the run began never ended, or fewer than minRate bytes a second
// were written (minRate <= 0: no pace is asked). A run that made its pace
// starts a new one, so that each stretch of timeout is judged on its own.
// Call it with l.mu held, from the sweeper.
func (c *Conn) writeStalled(now, timeout, minRate int64) bool {
	g := c.wgen.Load()
	switch {
	case g%2 == 0:
		c.inRun = false
		return false
	case !c.inRun:
		c.inRun, c.runGen, c.runAt, c.runWrote = true, g, now, c.wrote.Load()
		return false
	}
	d := now - c.runAt
	if d < timeout {
		return false
	}
	wrote := c.wrote.Load()
	if g == c.runGen || minRate > 0 && float64(wrote-c.runWrote) < float64(minRate)*float64(d)/float64(time.Second) {
		return true
	}
	c.runGen, c.runAt, c.runWrote = g, now, wrote
	return false
}

// Close closes the socket and stops counting c. A Conn whose client was
// asked to close it (SetDrain) is reported closed for the reason it was
// retired.
func (c *Conn) Close() error {
	var err error
	var drained Reason
	c.once.Do(func() {
		c.l.mu.Lock()
		if c.idx >= 0 {
			heap.Remove(&c.l.conns, c.idx)
		}
		if _, ok := c.l.draining[c]; ok {
			delete(c.l.draining, c)
			drained = c.drainWhy
		}
		c.l.mu.Unlock()
		err = c.Conn.Close()
	})
	if drained != 0 {
		c.l.report(c, drained, nil)
	}
	return err
}

// closeFor closes c for why, reporting it if c was still open.
func (c *Conn) closeFor(why Reason, err error) {
	closed := false
	c.once.Do(func() {
		closed = true
		c.l.mu.Lock()
		if c.idx >= 0 {
			heap.Remove(&c.l.conns, c.idx)
		}
		delete(c.l.draining, c)
		c.l.mu.Unlock()
		_ = c.Conn.Close()
	})
	if closed {
		c.l.report(c, why, err)
	}
}

// SyscallConn returns the socket's raw connection, for code that sets
// socket options (tchannel-go does, and logs an error for a connection
// without it).
func (c *Conn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.New("connlimit: the connection has no syscall.RawConn")
}

// connHeap orders Conns by their key, the least useful on top.
type connHeap []*Conn

func (h connHeap) Len() int           { return len(h) }
func (h connHeap) Less(i, j int) bool { return h[i].key.less(h[j].key) }
func (h connHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *connHeap) Push(x any) {
	c := x.(*Conn)
	c.idx = len(*h)
	*h = append(*h, c)
}
func (h *connHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	old[len(old)-1] = nil
	c.idx = -1
	*h = old[:len(old)-1]
	return c
}
