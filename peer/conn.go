package peer

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/stats"
	"github.com/uber/tchannel-go"
)

// Conn is the connector of one host:port: a goroutine that makes and
// watches the one connection a Pool keeps to it, and the State that peer
// choice reads. Make one with Pool.Acquire.
type Conn struct {
	pool     *Pool
	hostPort string
	m        *stats.Conn

	// tch is the tchannel-go peer holding the connection. tchannel-go
	// drops a peer from its root list when its last connection closes and
	// makes a new one for the next, so it is looked up after each connect.
	tch atomic.Pointer[tchannel.Peer]

	state atomic.Uint32 // a State
	kick  chan struct{} // a call wants a connection, or found it gone

	ctx   context.Context // ends when the connector is stopped
	stop  context.CancelFunc
	close atomic.Bool // on stop, close the connection too (Release)
	refs  int         // guarded by pool.mu
}

func newConn(p *Pool, hostPort string, tch *tchannel.Peer) *Conn {
	c := &Conn{pool: p, hostPort: hostPort, m: p.rec.Conn(hostPort), kick: make(chan struct{}, 1)}
	c.tch.Store(tch)
	c.ctx, c.stop = context.WithCancel(p.ctx)
	c.m.State.Update(float64(Idle))
	return c
}

// HostPort returns the address the connector connects to.
func (c *Conn) HostPort() string { return c.hostPort }

// State returns the connection's state now.
func (c *Conn) State() State { return State(c.state.Load()) }

// TChannel returns the tchannel-go peer whose connections calls use.
func (c *Conn) TChannel() *tchannel.Peer { return c.tch.Load() }

// Connect asks an Idle connector to connect; in any other state it does
// nothing. It never blocks.
func (c *Conn) Connect() {
	if c.State() == Idle {
		c.poke()
	}
}

// Lost reports that an attempt found no usable connection although the
// state was Ready (the connection was closing). The connector stops
// offering the peer at once and finds out what happened; calls wait for it
// or go elsewhere.
func (c *Conn) Lost() {
	if c.state.CompareAndSwap(uint32(Ready), uint32(Connecting)) {
		c.changed(Connecting)
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

func (c *Conn) set(s State) {
	if State(c.state.Swap(uint32(s))) != s {
		c.changed(s)
	}
}

func (c *Conn) changed(s State) {
	c.m.State.Update(float64(s))
	c.pool.notify()
}

// run is the connector: one goroutine per Conn, from Acquire until Release
// or Close.
func (c *Conn) run() {
	defer c.pool.wg.Done()
	var (
		conn     *tchannel.Connection // the connection while Ready
		w        *watch               // its socket
		failures int                  // failed connects in a row
		retryAt  time.Time            // when TransientFailure ends
		readyAt  time.Time            // when conn's handshake completed
	)
	defer func() {
		if conn != nil && c.close.Load() {
			conn.Close() // graceful: the calls on it finish first
		}
		c.set(Shutdown)
	}()
	clk, stopped := c.pool.clk, c.ctx.Done()
	fail := func(since time.Time) {
		failures++
		c.m.Failures.Inc(1)
		retryAt = since.Add(c.pool.backoff(failures))
		c.set(TransientFailure)
	}
	for {
		switch c.State() {
		case Idle:
			select {
			case <-c.kick:
				c.set(Connecting)
			case <-stopped:
				return
			}

		case Connecting:
			start := clk.Now()
			var err error
			conn, w, err = c.connect()
			if c.ctx.Err() != nil {
				return
			}
			if err != nil {
				fail(start) // the backoff counts from the connect's start, as gRPC's
				continue
			}
			readyAt = clk.Now()
			c.tch.Store(c.pool.tch.RootPeers().GetOrAdd(c.hostPort))
			c.m.Connects.Inc(1)
			c.set(Ready)

		case Ready:
			wanted := false
			select {
			case <-w.closed:
			case <-c.kick:
				if conn.IsActive() {
					c.set(Ready) // a stale alarm: the connection is fine
					continue
				}
				wanted = true // Lost: a call found it closing
			case <-stopped:
				return
			}
			now := clk.Now()
			next, failed := afterClose(conn, w, now.Sub(readyAt) < c.pool.cfg.Backoff.Initial)
			conn, w = nil, nil
			switch {
			case failed:
				fail(now)
			case next == Idle && wanted:
				failures = 0
				c.set(Connecting)
			default:
				failures = 0
				c.set(next)
			}

		case TransientFailure:
			t := clk.NewTimerAt(retryAt)
			select {
			case <-t.C():
				c.set(Connecting)
			case <-c.kick: // calls cannot hurry a backoff
				t.Stop()
			case <-stopped:
				t.Stop()
				return
			}

		case Shutdown:
			return
		}
	}
}

// connect dials and handshakes once, bounded by the pool's timeout; a stop
// aborts it at once.
func (c *Conn) connect() (*tchannel.Connection, *watch, error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.pool.cfg.Timeout)
	defer cancel()
	w := newWatch()
	// A handshake reads with the deadline as its only bound: close the
	// socket to end it when the connector stops.
	defer context.AfterFunc(c.ctx, w.abort)()
	conn, err := c.pool.tch.Connect(context.WithValue(ctx, watchKey{}, w), c.hostPort)
	if err != nil {
		return nil, nil, err
	}
	return conn, w, nil
}

// afterClose decides the state that follows the end of a Ready connection
// and whether the end counts as a failed connect. short reports that it
// ended within the backoff's initial interval of its handshake.
func afterClose(conn *tchannel.Connection, w *watch, short bool) (next State, failed bool) {
	remote := w.remoteErr()
	switch {
	case healthChecksFailed(conn):
		return TransientFailure, true // the peer stopped answering pings
	case remote != nil && !errors.Is(remote, io.EOF):
		return TransientFailure, true // reset or broken
	case short:
		return TransientFailure, true // accepted, then dropped: not a working peer
	case remote != nil:
		return Connecting, false // the peer closed it after serving: reconnect now
	}
	// Closed in this process while healthy: tchannel-go's idle sweep, or
	// someone closing it through the channel. Connect again when a call
	// wants it.
	return Idle, false
}

// healthChecksFailed reports whether the last of tchannel-go's health
// checks on conn failed: the checks close a connection after
// FailuresToClose failures in a row.
func healthChecksFailed(conn *tchannel.Connection) bool {
	h := conn.IntrospectState(&tchannel.IntrospectionOptions{}).HealthChecks
	return len(h) > 0 && !h[len(h)-1]
}
