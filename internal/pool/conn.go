package pool

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/recorder"
	"github.com/sluice-rpc/sluice/internal/tframe"
	"github.com/sluice-rpc/sluice/peer"
	"github.com/uber/tchannel-go"
)

// Conn is the connector of one host:port: a goroutine that makes and
// watches the one connection a Pool keeps to it, and the State that peer
// choice reads. The Pool makes one per host:port (Acquire); the peers of
// every list holding that host:port share it, each told of its changes
// as a Watcher.
type Conn struct {
	pool     *Pool
	hostPort string
	m        *recorder.Conn

	// tch is the tchannel-go peer holding the connection. tchannel-go
	// drops a peer from its root list when its last connection closes and
	// makes a new one for the next, so it is looked up after each connect.
	tch atomic.Pointer[tchannel.Peer]

	// state is what choice reads. The connector goroutine writes it, and
	// Lost may move it from Ready to Connecting; the goroutine keeps its
	// own copy of where it is, so that such a change is an event it
	// handles, never a state it finds itself in.
	state atomic.Uint32
	kick  chan struct{} // a call wants a connection, or found it gone
	// wanted: the kick of an Idle connector is a call's (Connect), whose
	// connect the budget does not delay (see ConnectBudget).
	wanted atomic.Bool

	// failure is the cause of the latest failed connect or failed
	// connection, and when it happened (nil before the first).
	failure atomic.Pointer[Failure]
	// readySince is when the connection last became Ready from cold, Unix
	// nanoseconds on the pool's clock (0: never): its first connect, or
	// one after a failure or after the remote closed it (a restarted
	// server). Reconnecting after this process's own idle close keeps it:
	// the server is warm.
	readySince atomic.Int64

	// pmu guards watchers, the peers of the lists holding the connector,
	// each told of its state's changes.
	pmu      sync.Mutex
	watchers []Watcher

	ctx   context.Context // ends when the connector is stopped
	stop  context.CancelFunc
	close atomic.Bool // on stop, close the connection too (release)
	refs  int         // guarded by pool.mu
}

func newConn(p *Pool, hostPort string, tch *tchannel.Peer) *Conn {
	c := &Conn{pool: p, hostPort: hostPort, m: p.rec.Conn(hostPort), kick: make(chan struct{}, 1), refs: 1}
	c.tch.Store(tch)
	c.ctx, c.stop = context.WithCancel(p.ctx)
	c.m.State.Update(float64(peer.Idle))
	return c
}

// State returns the connection's state now.
func (c *Conn) State() peer.State { return peer.State(c.state.Load()) }

// TChannel returns the tchannel-go peer whose connections calls use.
func (c *Conn) TChannel() *tchannel.Peer { return c.tch.Load() }

// Connect asks an Idle connector to connect for a call waiting on it, at
// once whatever the pool's budget; in any other state it does nothing. It
// never blocks.
func (c *Conn) Connect() {
	if c.State() == peer.Idle {
		c.wanted.Store(true)
		c.poke()
	}
}

// ConnectSoon asks an Idle connector to connect when the pool's budget
// allows (a peer joining a list); in any other state it does nothing.
func (c *Conn) ConnectSoon() {
	if c.State() == peer.Idle {
		c.poke()
	}
}

// Lost reports that an attempt found no usable connection although the
// state was Ready (the connection was closing). The peer leaves choice at
// once (Connecting); the connector looks into it, and makes it Ready again
// if the connection is in fact fine.
func (c *Conn) Lost() {
	if c.state.CompareAndSwap(uint32(peer.Ready), uint32(peer.Connecting)) {
		c.changed(peer.Connecting)
		c.poke()
	}
}

func (c *Conn) poke() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *Conn) shutdown(closeConn bool) {
	if closeConn {
		c.close.Store(true)
	}
	c.stop()
}

// publish makes s the state choice reads.
func (c *Conn) publish(s peer.State) {
	if peer.State(c.state.Swap(uint32(s))) != s {
		c.changed(s)
	}
}

func (c *Conn) changed(s peer.State) {
	c.m.State.Update(float64(s))
	c.pmu.Lock()
	for _, w := range c.watchers {
		w.ConnChanged()
	}
	c.pmu.Unlock()
	c.pool.Notify(s == peer.Ready)
}

// Watcher is told of each change of a Conn's State it is attached to:
// a peer of a list, which notes that it changed.
type Watcher interface {
	// ConnChanged is called, under the Conn's lock, after each change of
	// its State; it must not block or call back into the Conn.
	ConnChanged()
}

// Attach adds w to those told of the connection's changes; Detach
// removes it.
func (c *Conn) Attach(w Watcher) {
	c.pmu.Lock()
	c.watchers = append(c.watchers, w)
	c.pmu.Unlock()
}

// Detach removes w from those told of the connection's changes.
func (c *Conn) Detach(w Watcher) {
	c.pmu.Lock()
	for i, q := range c.watchers {
		if q == w {
			c.watchers = append(c.watchers[:i], c.watchers[i+1:]...)
			break
		}
	}
	c.pmu.Unlock()
}

// Stopped reports whether the connector was stopped (released, or its
// Pool closed).
func (c *Conn) Stopped() bool { return c.ctx.Err() != nil }

// Failure returns why the connection failed the last time, or nil if it
// never has. It is set before the connector enters TransientFailure, and
// kept once it is Ready again.
func (c *Conn) Failure() *Failure { return c.failure.Load() }

// ReadySince returns when the connection last became Ready from cold (its
// first connect, or one after a failure or after the remote closed it),
// Unix nanoseconds on the pool's clock; 0 if never.
func (c *Conn) ReadySince() int64 { return c.readySince.Load() }

// run is the connector: one goroutine per Conn, from Acquire until Release
// or Close. st is where it is; it publishes each state it enters.
func (c *Conn) run() {
	defer c.pool.wg.Done()
	var (
		st       = peer.Idle
		conn     *tchannel.Connection // the connection while Ready
		w        *watch               // its socket
		failures int                  // failed connects in a row
		misses   int                  // unanswered health checks in a row
		retryAt  time.Time            // when TransientFailure ends
		readyAt  time.Time            // when conn's handshake completed
		warm     bool                 // the last connection ended in this process, healthy
		urgent   bool                 // a call waits for the next connect: the budget does not delay it
		turn     bool                 // the budget's turn for the next connect is reserved, and has come
	)
	enter := func(s peer.State) { st = s; c.publish(s) }
	clk, stopped, hc := c.pool.clk, c.ctx.Done(), c.pool.cfg.HealthCheck
	reserved := false // a turn of the budget is reserved and not yet used
	defer func() {
		if conn != nil && c.close.Load() {
			conn.Close() // graceful: the calls on it finish first
		}
		if reserved {
			c.pool.budget.refund(clk.Now())
		}
		enter(peer.Shutdown)
	}()
	// await reserves the budget's next turn for a connect and waits for
	// it; false means the connector was stopped meanwhile.
	await := func() bool {
		now := clk.Now()
		at := c.pool.budget.reserve(now, false)
		if !at.After(now) {
			return true
		}
		reserved = true
		t := clk.NewTimerAt(onGrain(at))
		defer t.Stop()
		select {
		case <-t.C():
			reserved = false
			return true
		case <-stopped:
			return false
		}
	}
	fail := func(since time.Time, cause error) {
		warm = false
		failures++
		c.m.Failures.Inc(1)
		c.failure.Store(&Failure{Err: cause, At: clk.Now()})
		retryAt = since.Add(c.pool.backoff(failures))
		enter(peer.TransientFailure)
	}
	// left takes the peer out of choice when its server said it is
	// leaving: a failure for the backoff (a leaving server's listener may
	// stay open for a while, and each connect to it ends the same way)
	// but not for the failure count, since nothing went wrong.
	left := func(since time.Time) {
		warm = false
		failures++
		c.failure.Store(&Failure{Err: peer.ErrPeerLeaving, At: clk.Now()})
		retryAt = since.Add(c.pool.backoff(failures))
		enter(peer.TransientFailure)
	}
	for {
		switch st {
		case peer.Idle:
			select {
			case <-c.kick:
				urgent = c.wanted.Swap(false)
				enter(peer.Connecting)
			case <-stopped:
				return
			}

		case peer.Connecting:
			switch {
			case turn:
			case urgent:
				c.pool.budget.reserve(clk.Now(), true) // counted, not delayed
			default:
				if !await() {
					return
				}
			}
			turn, urgent = false, false
			start := clk.Now()
			var err error
			conn, w, err = c.connect()
			if c.ctx.Err() != nil {
				return
			}
			if err != nil {
				fail(start, err) // the backoff counts from the connect's start, as gRPC's
				continue
			}
			if w.peerLeaving() {
				// Its handshake said it is leaving: no call goes to it.
				conn.Close()
				conn, w = nil, nil
				left(start)
				continue
			}
			readyAt = clk.Now()
			if !warm {
				c.readySince.Store(readyAt.UnixNano())
			}
			c.tch.Store(c.pool.tch.RootPeers().GetOrAdd(c.hostPort))
			c.m.Connects.Inc(1)
			enter(peer.Ready)

		case peer.Ready:
			var tick <-chan time.Time
			var t clock.Timer
			if hc.Interval > 0 {
				t = clk.NewTimer(hc.Interval)
				tick = t.C()
			}
			wanted := false
			select {
			case <-w.closed:
			case <-c.kick:
				if conn.IsActive() {
					// A false alarm: the connection is fine. Look the
					// tchannel-go peer up again in case the caller's was
					// one tchannel-go had dropped.
					c.tch.Store(c.pool.tch.RootPeers().GetOrAdd(c.hostPort))
					c.publish(peer.Ready)
					stopTimer(t)
					continue
				}
				wanted = true // Lost: a call found it closing
			case <-w.drained():
				// The server asked this connection to drain. tchannel-go's
				// close lets the calls on it finish and fails new ones
				// before they are sent, which then go elsewhere; only the
				// client closing leaves no call on the wire in doubt.
				stopTimer(t)
				leaving := w.peerLeaving()
				misses, failures = 0, 0
				if leaving {
					// Out of choice before the close: a call that chose
					// the peer between the two would find its connection
					// closed, and fail as if the peer had failed.
					left(clk.Now())
				}
				conn.Close()
				conn, w = nil, nil
				if leaving {
					continue
				}
				// Only this connection: the server is warm, and the next
				// call that wants it makes a new one.
				warm = true
				enter(peer.Idle)
				continue
			case <-tick:
				if c.ping(hc.Timeout) {
					misses = 0
					continue
				}
				if c.ctx.Err() != nil {
					return
				}
				if misses++; misses < hc.Failures {
					continue
				}
				// The peer stopped answering: close the connection (the
				// calls on it end by their deadlines) and back off.
				conn.Close()
				conn, w, misses = nil, nil, 0
				failures = 0 // it served; the backoff starts afresh
				fail(clk.Now(), fmt.Errorf("%d health-check pings in a row went unanswered within %v; the connection was closed", hc.Failures, hc.Timeout))
				continue
			case <-stopped:
				stopTimer(t)
				return
			}
			stopTimer(t)
			misses = 0
			now := clk.Now()
			short := now.Sub(readyAt) < c.pool.cfg.Backoff.Initial
			if !short {
				// It served: a failure now starts the backoff afresh, as
				// gRPC resets it once a connection is ready. One that
				// dies young keeps counting, so that a peer accepting
				// and dropping connections is not redialled in a loop.
				failures = 0
			}
			next, failed := afterClose(w, short)
			conn, w = nil, nil
			warm = failed == nil && next == peer.Idle
			switch {
			case failed != nil:
				fail(now, failed)
			case next == peer.Idle && wanted:
				urgent = true // a call found it closing
				enter(peer.Connecting)
			default:
				enter(next)
			}

		case peer.TransientFailure:
			t := clk.NewTimerAt(retryAt)
			select {
			case <-t.C():
				// The budget's turn is awaited here, so that calls fail
				// fast meanwhile rather than wait for a connect.
				if !await() {
					return
				}
				turn = true
				enter(peer.Connecting)
			case <-c.kick: // calls cannot hurry a backoff
				t.Stop()
			case <-stopped:
				t.Stop()
				return
			}

		default:
			return
		}
	}
}

// connect dials and handshakes once, bounded by the pool's timeout; a stop
// aborts it at once.
func (c *Conn) connect() (*tchannel.Connection, *watch, error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.pool.cfg.Timeout)
	defer cancel()
	w := newWatch(&c.pool.making)
	// A handshake reads with the deadline as its only bound: close the
	// socket to end it when the connector stops.
	defer context.AfterFunc(c.ctx, w.abort)()
	conn, err := c.pool.tch.Connect(context.WithValue(ctx, watchKey{}, w), c.hostPort)
	w.made()
	if err != nil {
		return nil, nil, connectError(err, w.dialed(), ctx.Err() != nil || isTimeout(err), c.pool.cfg.Timeout)
	}
	return conn, w, nil
}

// isTimeout reports whether err says a deadline passed: tchannel-go's
// handshake returns its own timeout error, a moment before the connect's
// context reports its deadline.
func isTimeout(err error) bool {
	var (
		se tchannel.SystemError
		ne net.Error
	)
	switch {
	case errors.As(err, &se):
		return se.Code() == tchannel.ErrCodeTimeout
	case errors.As(err, &ne):
		return ne.Timeout()
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// connectError is the cause of a failed connect whose error was err: the
// dial's own error when the TCP connection was not made (a *net.OpError:
// refused, unreachable, timed out), else what went wrong in the TChannel
// handshake; timedOut says the connect's deadline passed (a stop of the
// connector ends it too, but its error is never looked at). A tchannel-go
// system error is kept as text only: its code (a timeout, say) is not the
// code of the calls that fail for want of the connection.
func connectError(err error, dialed, timedOut bool, timeout time.Duration) error {
	var se tchannel.SystemError
	switch {
	case !dialed && errors.As(err, &se): // tchannel-go's own, for a dial that timed out
		if timedOut {
			return fmt.Errorf("TCP dial timed out after %v: the peer did not answer", timeout)
		}
		return fmt.Errorf("TCP dial failed: %v", err)
	case !dialed:
		return err
	case timedOut:
		return fmt.Errorf("TChannel handshake timed out after %v: the peer accepted the TCP connection but did not complete the handshake", timeout)
	case errors.As(err, &se):
		return fmt.Errorf("TChannel handshake failed: %v", err)
	}
	return fmt.Errorf("TChannel handshake failed: %w", err)
}

// ping sends one TChannel ping to the peer and reports whether it was
// answered within timeout. It goes over the peer's established connection:
// if there is none, it fails at once (callers' dials are refused).
func (c *Conn) ping(timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(c.ctx, timeout)
	defer cancel()
	return c.pool.tch.Ping(ctx, c.hostPort) == nil
}

func stopTimer(t clock.Timer) {
	if t != nil {
		t.Stop()
	}
}

// afterClose decides the state that follows the end of a Ready connection
// and whether the end counts as a failed connect: failed is then its cause,
// else nil. short reports that it ended within the backoff's initial
// interval of its handshake.
func afterClose(w *watch, short bool) (next peer.State, failed error) {
	var pe *tframe.ProtocolError
	remote := w.remoteErr()
	switch {
	case short: // accepted, then dropped: not a working peer
		if remote != nil {
			return peer.TransientFailure, fmt.Errorf("the connection ended just after its handshake: %w", remote)
		}
		return peer.TransientFailure, errors.New("the connection was closed just after its handshake")
	case errors.As(remote, &pe):
		// It sent a frame that breaks the protocol: a broken or hostile
		// peer, reconnected to on the backoff's schedule, not at once.
		return peer.TransientFailure, fmt.Errorf("the peer broke the TChannel protocol: %w", remote)
	case remote != nil:
		// The peer ended it (closed or reset) after serving: reconnect
		// now, as gRPC does; if the peer is gone the connect fails and
		// the backoff starts.
		return peer.Connecting, nil
	}
	// Closed in this process while healthy: tchannel-go's idle sweep, or
	// someone closing it through the channel. Connect again when a call
	// wants it.
	return peer.Idle, nil
}

// Failure is why a peer's connection failed the last time: a connect that
// did not succeed (the dial refused or timed out, the TChannel handshake
// failed or timed out), or a connection that died young, broke the
// protocol or stopped answering health checks.
type Failure struct {
	// Err is the cause. A dial's error is kept as it is, so that
	// errors.Is(err, syscall.ECONNREFUSED) and errors.As to *net.OpError
	// see it; a handshake's is described in its text.
	Err error
	// At is when it happened, on the pool's clock.
	At time.Time
}
