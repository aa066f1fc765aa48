package connlimit

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// harness is a Listener on 127.0.0.1 on a fake clock, recording the
// connections it closes.
type harness struct {
	t   *testing.T
	l   *Listener
	clk *clock.Fake

	mu     sync.Mutex
	closed map[*Conn]Reason
}

func listen(t *testing.T, cfg Config) *harness {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, clk: clock.NewFake(time.Unix(1000, 0)), closed: map[*Conn]Reason{}}
	cfg.Clock = h.clk
	cfg.OnClose = func(c *Conn, why Reason, _ error) {
		h.mu.Lock()
		h.closed[c] = why
		h.mu.Unlock()
	}
	l, err := Listen(inner, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.l = l
	t.Cleanup(func() { l.Close() })
	return h
}

// dial connects a client socket, and returns it with the server side's
// Conn once Accept returned it.
func (h *harness) dial() (net.Conn, *Conn) {
	h.t.Helper()
	client, err := net.Dial("tcp", h.l.Addr().String())
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { client.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := h.l.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	nc := testwait.Recv(h.t, accepted, "Accept")
	h.t.Cleanup(func() { nc.Close() })
	return client, nc.(*Conn)
}

// connect connects a client socket and waits until the Listener holds it,
// without accepting it.
func (h *harness) connect(want int) net.Conn {
	h.t.Helper()
	client, err := net.Dial("tcp", h.l.Addr().String())
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { client.Close() })
	testwait.Until(h.t, "the listener to hold the new connection", func() bool { return h.l.Len() == want })
	return client
}

func (h *harness) reason(c *Conn) Reason {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed[c]
}

// sweep moves the fake clock by d, one sweep tick at a time, and waits for
// each sweep to finish (the sweeper has armed its next tick).
func (h *harness) sweep(d, tick time.Duration) {
	h.t.Helper()
	for moved := time.Duration(0); moved < d; moved += tick {
		testwait.Timers(h.t, h.clk, 1)
		h.clk.Add(tick)
	}
	testwait.Timers(h.t, h.clk, 1)
}

// closedByServer reports whether the server closed the client's socket.
func closedByServer(t *testing.T, client net.Conn) {
	t.Helper()
	client.SetReadDeadline(time.Now().Add(testwait.Limit))
	if _, err := client.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("read from a connection the server should have closed: %v", err)
	}
}

func isReset(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne) && !ne.Timeout()
}

func TestEvictsTheLeastUsefulAtTheCap(t *testing.T) {
	h := listen(t, Config{MaxConns: 3, IdleTimeout: -1, WriteTimeout: -1})
	_, fresh := h.dial()         // open, never served
	_, served := h.dial()        // served a call, then idle
	busyClient, busy := h.dial() // a call in flight
	served.Active()
	busy.Begin()
	defer busy.End()

	h.dial() // the cap: the connection that never served goes
	if got := h.reason(fresh); got != Evicted {
		t.Fatalf("the never-served connection: closed for %v, want evicted", got)
	}
	if h.reason(served) != 0 || h.reason(busy) != 0 {
		t.Fatal("a connection that served was evicted before one that never did")
	}

	_, fourth := h.dial()
	h.dial() // the cap again: the fourth, new as it is, never served either
	if got := h.reason(fourth); got != Evicted {
		t.Fatalf("the fourth connection: closed for %v, want evicted", got)
	}
	if h.reason(served) != 0 {
		t.Fatal("a serving connection was evicted while one that never served remained")
	}
	if h.reason(busy) != 0 {
		t.Fatal("a connection with a call in flight was evicted")
	}
	if _, err := busyClient.Write([]byte("x")); err != nil {
		t.Fatalf("the busy connection's client: %v", err)
	}
}

func TestEvictsServingConnectionsLongestIdleFirst(t *testing.T) {
	h := listen(t, Config{MaxConns: 2, IdleTimeout: -1, WriteTimeout: time.Hour})
	_, older := h.dial()
	_, newer := h.dial()
	older.Active()
	h.sweep(time.Second, time.Second) // the activity clock moves on
	newer.Active()
	h.dial()
	if h.reason(older) != Evicted || h.reason(newer) != 0 {
		t.Fatalf("evicted: older %v, newer %v; want the longer idle one", h.reason(older), h.reason(newer))
	}
}

func TestRefusesWhenEveryConnectionIsBusy(t *testing.T) {
	h := listen(t, Config{MaxConns: 1, IdleTimeout: -1, WriteTimeout: -1})
	_, c := h.dial()
	c.Begin()
	defer c.End()
	client, err := net.Dial("tcp", h.l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	closedByServer(t, client)
	if h.reason(c) != 0 {
		t.Fatal("the busy connection was evicted")
	}
	if h.l.Len() != 1 {
		t.Fatalf("the listener holds %d connections, want 1", h.l.Len())
	}
}

func TestClosesIdleConnections(t *testing.T) {
	const idle = 4 * time.Second // ticks of 1 s
	h := listen(t, Config{IdleTimeout: idle, WriteTimeout: -1})
	client, quiet := h.dial()
	_, active := h.dial()
	_, busy := h.dial()
	busy.Begin()
	h.sweep(3*time.Second, time.Second)
	active.Active()
	h.sweep(time.Second, time.Second)
	if h.reason(quiet) != Idle {
		t.Fatalf("a connection idle for %v: closed for %v, want idle", idle, h.reason(quiet))
	}
	closedByServer(t, client)
	if h.reason(active) != 0 || h.reason(busy) != 0 {
		t.Fatal("a connection active 1 s ago, or busy, was closed")
	}
	h.sweep(3*time.Second, time.Second)
	if h.reason(active) != Idle {
		t.Fatal("the connection active 4 s ago was not closed")
	}
	if h.reason(busy) != 0 {
		t.Fatal("a connection with a call in flight was closed as idle")
	}
	busy.End()
	h.sweep(4*time.Second, time.Second)
	if h.reason(busy) != Idle {
		t.Fatal("the connection whose call ended 4 s ago was not closed")
	}
}

func TestClosesConnectionsWhoseWritesStall(t *testing.T) {
	h := listen(t, Config{IdleTimeout: -1, WriteTimeout: 4 * time.Second})
	_, c := h.dial() // its client never reads
	wrote := make(chan error, 1)
	go func() {
		_, err := c.Write(make([]byte, 64<<20)) // far more than the socket buffers
		wrote <- err
	}()
	testwait.Until(t, "the write to block", func() bool { return c.wgen.Load()%2 == 1 })
	h.sweep(5*time.Second, time.Second)
	if err := testwait.Recv(t, wrote, "the stalled write to fail"); err == nil {
		t.Fatal("the stalled write succeeded")
	}
	if h.reason(c) != WriteStalled {
		t.Fatalf("closed for %v, want write_stalled", h.reason(c))
	}
}

// gateLine is a gate that passes a connection once it has sent a line.
func gateLine(c *Conn) (net.Conn, error) {
	b := make([]byte, 1)
	for {
		if _, err := c.Read(b); err != nil {
			return nil, err
		}
		if b[0] == '\n' {
			return c, nil
		}
	}
}

func TestGate(t *testing.T) {
	h := listen(t, Config{Gate: gateLine, GateTimeout: 200 * time.Millisecond, IdleTimeout: -1, WriteTimeout: -1})
	silent := h.connect(1)
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := h.l.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	talker, err := net.Dial("tcp", h.l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer talker.Close()
	talker.Write([]byte("hello\n"))
	c := testwait.Recv(t, accepted, "Accept of the connection that passed the gate")
	defer c.Close()
	closedByServer(t, silent) // at GateTimeout
	testwait.Until(t, "the silent connection to be reported", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, r := range h.closed {
			if r == GateTimeout {
				return true
			}
		}
		return false
	})
	if h.l.Len() != 1 {
		t.Fatalf("the listener holds %d connections, want 1", h.l.Len())
	}
}

func TestPendingConnectionsGoFirst(t *testing.T) {
	h := listen(t, Config{MaxConns: 2, Gate: gateLine, GateTimeout: time.Hour, IdleTimeout: -1, WriteTimeout: -1})
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := h.l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	talker, err := net.Dial("tcp", h.l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer talker.Close()
	talker.Write([]byte("hi\n"))
	open := testwait.Recv(t, accepted, "Accept").(*Conn)
	defer open.Close()
	silent := h.connect(2)
	h.connect(2) // at the cap: the pending silent one goes, not the open one
	closedByServer(t, silent)
	if h.reason(open) != 0 {
		t.Fatal("an open connection was evicted before a pending one")
	}
}

func TestCloseEndsPendingConnectionsAndAccept(t *testing.T) {
	h := listen(t, Config{Gate: gateLine, GateTimeout: time.Hour})
	silent := h.connect(1)
	errc := make(chan error, 1)
	go func() {
		_, err := h.l.Accept()
		errc <- err
	}()
	h.l.Close()
	if err := testwait.Recv(t, errc, "Accept to return"); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
	}
	closedByServer(t, silent)
}

func TestDefaultMaxConns(t *testing.T) {
	if n := DefaultMaxConns(); n < 64 || n != max(64, descriptorLimit()/2) {
		t.Fatalf("DefaultMaxConns() = %d with a descriptor limit of %d", n, descriptorLimit())
	}
	if err := (Config{MaxConns: -1}).Validate(); err == nil {
		t.Fatal("MaxConns -1 validated")
	}
}

// A Conn gives the socket's raw connection, for code that sets socket
// options (tchannel-go logs an error for a connection without it).
func TestConnExposesTheSocket(t *testing.T) {
	h := listen(t, Config{IdleTimeout: -1, WriteTimeout: -1})
	_, c := h.dial()
	if _, err := c.SyscallConn(); err != nil {
		t.Fatalf("SyscallConn: %v", err)
	}
}

// drainHarness is a Listener whose Conns can be asked to close
// (SetDrain), each answering as canAsk says; asked counts the asks.
type drainHarness struct {
	*harness
	mu     sync.Mutex
	asked  map[*Conn]int
	canAsk atomic.Bool
}

func listenDrainable(t *testing.T, cfg Config) *drainHarness {
	d := &drainHarness{asked: map[*Conn]int{}}
	d.canAsk.Store(true)
	cfg.Gate = func(c *Conn) (net.Conn, error) {
		c.SetDrain(func() bool {
			if !d.canAsk.Load() {
				return false
			}
			d.mu.Lock()
			d.asked[c]++
			d.mu.Unlock()
			return true
		})
		return c, nil
	}
	d.harness = listen(t, cfg)
	return d
}

func (d *drainHarness) timesAsked(c *Conn) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.asked[c]
}

// An idle connection whose client can be asked is asked, once, and left
// open: counted until its client closes it, or closed DrainWait later; a
// call in flight keeps it open past that. One whose client cannot be
// asked is closed.
func TestAsksIdleConnectionsToClose(t *testing.T) {
	const idle = 4 * time.Second
	d := listenDrainable(t, Config{IdleTimeout: idle, WriteTimeout: -1})
	client, quiet := d.dial()
	_, closes := d.dial()
	_, busy := d.dial()
	d.sweep(idle, time.Second)
	for _, c := range []*Conn{quiet, closes, busy} {
		if n := d.timesAsked(c); n != 1 || d.reason(c) != 0 {
			t.Fatalf("an idle connection: asked %d times, closed for %v; want asked once, open", n, d.reason(c))
		}
	}
	if n := d.l.Len(); n != 3 {
		t.Fatalf("the listener holds %d connections, want the 3 draining", n)
	}
	closes.Close() // its client closed it: the server's reader sees that
	if got := d.reason(closes); got != Idle {
		t.Fatalf("a drained connection its client closed: reported %v, want idle", got)
	}
	busy.Begin() // a call its client sent before it read the ask
	d.sweep(DrainWait, time.Second)
	if d.reason(quiet) != Idle {
		t.Fatalf("a connection asked %v ago: closed for %v, want idle", DrainWait, d.reason(quiet))
	}
	closedByServer(t, client)
	if d.reason(busy) != 0 {
		t.Fatal("a draining connection with a call in flight was closed")
	}
	busy.End()
	d.sweep(time.Second, time.Second)
	if d.reason(busy) != Idle || d.timesAsked(busy) != 1 {
		t.Fatalf("the draining connection whose call ended: closed for %v, asked %d times; want idle, once", d.reason(busy), d.timesAsked(busy))
	}
	if n := d.l.Len(); n != 0 {
		t.Fatalf("the listener holds %d connections, want none", n)
	}

	d.canAsk.Store(false)
	_, plain := d.dial()
	d.sweep(idle, time.Second)
	if d.reason(plain) != Idle {
		t.Fatalf("an idle connection whose client cannot be asked: closed for %v, want idle at once", d.reason(plain))
	}
}

// At the cap, an evicted connection whose client can be asked is asked and
// leaves the count at once; beyond MaxConns/16 draining (at least 8), the
// next is closed.
func TestAsksEvictedConnectionsToClose(t *testing.T) {
	d := listenDrainable(t, Config{MaxConns: 2, IdleTimeout: -1, WriteTimeout: -1})
	_, first := d.dial()
	_, second := d.dial()
	first.Active()
	d.sweep(time.Second, time.Second) // the activity clock moves on
	second.Active()
	_, third := d.dial() // the cap: first, the longer idle, is asked
	if d.timesAsked(first) != 1 || d.reason(first) != 0 {
		t.Fatalf("the evicted connection: asked %d times, closed for %v; want asked, open", d.timesAsked(first), d.reason(first))
	}
	if n := d.l.Len(); n != 3 {
		t.Fatalf("the listener holds %d connections, want 2 and 1 draining", n)
	}
	// Each socket more at the cap evicts the newest, never served: asked,
	// until minDraining are draining.
	newest := third
	for i := 1; i < minDraining; i++ {
		_, next := d.dial()
		if d.timesAsked(newest) != 1 || d.reason(newest) != 0 {
			t.Fatalf("eviction %d: asked %d times, closed for %v; want asked, open", i+1, d.timesAsked(newest), d.reason(newest))
		}
		newest = next
	}
	if n := d.l.Len(); n != 2+minDraining {
		t.Fatalf("the listener holds %d connections, want 2 and %d draining", n, minDraining)
	}
	d.dial() // the cap again, with the draining at their bound: the newest is closed
	if d.reason(newest) != Evicted || d.timesAsked(newest) != 0 {
		t.Fatalf("the eviction past the bound: closed for %v, asked %d times; want evicted at once", d.reason(newest), d.timesAsked(newest))
	}
	if d.reason(second) != 0 {
		t.Fatalf("a serving connection was evicted before one that never served: %v", d.reason(second))
	}
	d.sweep(DrainWait, time.Second)
	if d.reason(first) != Evicted {
		t.Fatalf("the connection asked %v ago: closed for %v, want evicted", DrainWait, d.reason(first))
	}
}

// trickle is a write loop of 64 KB writes on a Conn over a pipe, the way
// tchannel-go writes frames, and the pipe's other end, which the test
// reads from: every write waits for the reader.
type trickle struct {
	t      *testing.T
	c      *Conn
	reader net.Conn
}

func startTrickle(t *testing.T) *trickle {
	a, b := net.Pipe()
	c := &Conn{Conn: a, idx: -1}
	done := make(chan struct{})
	go func() {
		defer close(done)
		chunk := make([]byte, 64<<10)
		for {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		a.Close()
		b.Close()
		<-done
	})
	tr := &trickle{t: t, c: c, reader: b}
	tr.blocked(0)
	return tr
}

// read takes n bytes (a multiple of the writes' size) and waits until the
// writer is blocked in its next write.
func (tr *trickle) read(n int) {
	tr.t.Helper()
	want := tr.c.wrote.Load() + int64(n)
	if _, err := io.ReadFull(tr.reader, make([]byte, n)); err != nil {
		tr.t.Fatal(err)
	}
	tr.blocked(want)
}

func (tr *trickle) blocked(wrote int64) {
	tr.t.Helper()
	testwait.Until(tr.t, "the writer to block in its next write", func() bool {
		return tr.c.wrote.Load() == wrote && tr.c.wgen.Load()%2 == 1
	})
}

// A peer that takes a little now and then keeps each write moving, but
// its writes wait throughout WriteTimeout: under MinReadRate it is
// stalled, by its progress over that time; one that reads at the pace is
// not.
func TestWritesStallByProgressOverTime(t *testing.T) {
	const (
		timeout = int64(30 * time.Second)
		rate    = 128 << 10
		step    = int64(5 * time.Second)
	)
	for _, tc := range []struct {
		name    string
		perStep int   // bytes read each 5 s
		rate    int64 // MinReadRate
		stalled bool
	}{
		{"trickle", 256 << 10, rate, true},    // 51 KiB/s
		{"at the pace", 1 << 20, rate, false}, // 205 KiB/s
		{"trickle, no pace asked", 256 << 10, -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := startTrickle(t)
			now, stalled := int64(time.Second), false
			for range 2 * timeout / step {
				// A sweep a second, each finding the writer blocked.
				for range step / int64(time.Second) {
					stalled = stalled || tr.c.writeStalled(now, timeout, tc.rate)
					now += int64(time.Second)
				}
				tr.read(tc.perStep)
			}
			if stalled != tc.stalled {
				t.Fatalf("stalled = %v, want %v", stalled, tc.stalled)
			}
		})
	}
}
