package hostile

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

// Bounds on an attacker child's steps.
const (
	readyLimit       = 5 * time.Minute  // to open connections or send requests
	leaveLimit       = time.Minute      // to close them and report
	dialTimeout      = 10 * time.Second // one connect
	handshakeTimeout = 10 * time.Second // one init exchange
	dialers          = 64               // connects an attacker child makes at once
)

const probeName = "new client during the attack"

func runStallHandshaken(e *env) error   { return e.stall("stall", e.t.Addr, true, probeName) }
func runStallPrehandshake(e *env) error { return e.stall("stall", e.t.Addr, false, probeName) }

// runDebugIdle holds idle keep-alive connections to the server's debug
// listener while a new client makes TChannel calls to the same process,
// whose descriptors the two listeners share.
func runDebugIdle(e *env) error {
	if e.t.DebugURL == "" {
		return errors.New("debug-idle attacks the server's debug listener: give its --debug-url")
	}
	u, err := url.Parse(e.t.DebugURL)
	if err != nil || u.Host == "" {
		return fmt.Errorf("debug-idle: the debug listener's URL %q names no host:port", e.t.DebugURL)
	}
	return e.stall("http-idle", u.Host, false, "new TChannel client during the attack")
}

// stall holds e.p.conns connections to addr (attacker children of kind)
// for e.p.hold while a new client calls every probeEvery.
func (e *env) stall(kind, addr string, handshake bool, probe string) error {
	start := time.Now()
	attackers, err := e.holdConns(kind, addr, handshake)
	if err != nil {
		return err
	}
	stop := e.startLoad("the new client", float64(time.Second)/float64(probeEvery), 16)
	err = e.pause(e.p.hold)
	e.r.Probe = stop()
	e.leaveAll(attackers, start)
	err = e.end(err, e.p.settle)
	e.connFigures()
	e.r.fig(probe, "%s", e.r.Probe)
	return err
}

// holdConns starts attacker children of kind holding e.p.conns
// connections to addr, at most perChild each, waits until they are open
// and records them in e.r.Conns.
func (e *env) holdConns(kind, addr string, handshake bool) ([]*attacker, error) {
	start, n := time.Now(), e.p.conns
	children := (n + perChild - 1) / perChild
	var attackers []*attacker
	for i := range children {
		share := n / children
		if i < n%children {
			share++
		}
		a, _, err := e.attacker(job{Kind: kind, Target: addr, Conns: share, Handshake: handshake, Workers: dialers}, "", 0)
		if err != nil {
			return nil, err
		}
		attackers = append(attackers, a)
	}
	c := &Conns{Wanted: n}
	e.r.Conns = c
	for _, a := range attackers {
		ev, err := a.next("ready", readyLimit)
		if err != nil {
			return nil, err
		}
		c.Opened += ev.Opened
		c.Early += ev.Closed
		c.Failed += ev.Failed
		e.r.note("attacker", ev.Note)
	}
	c.ReadyIn = millis.Duration(time.Since(start))
	e.logf("%s", c)
	return attackers, nil
}

// leaveAll has the attackers close their connections at once and records
// when, from start, the server had closed some before. Closes seen after
// are the children's own.
func (e *env) leaveAll(attackers []*attacker, start time.Time) {
	leftAt := time.Now()
	for _, a := range attackers {
		a.CloseStdin()
	}
	var closes []time.Duration
	for _, a := range attackers {
		e.leave(a)
		a.mu.Lock()
		for _, t := range a.closes {
			if t.Before(leftAt) {
				closes = append(closes, t.Sub(start))
			}
		}
		a.mu.Unlock()
	}
	if c := e.r.Conns; c != nil && len(closes) > 0 {
		slices.Sort(closes)
		c.Closed = len(closes)
		c.First, c.Median, c.Last = millis.Duration(closes[0]), millis.Duration(closes[len(closes)/2]), millis.Duration(closes[len(closes)-1])
	}
}

func (e *env) connFigures() {
	e.r.fig("attacker connections", "%s", e.r.Conns)
	e.r.fig("closed by the server", "%s", e.r.Conns.closedString())
}

// childHold is the attacker child of "stall" (holding connections after
// the handshake if j.Handshake, or none) and "http-idle" (after one
// keep-alive GET answered): it opens j.Conns connections, j.Workers at a
// time, reports "ready" and each held one the server closes, and closes
// them when told to leave.
func childHold(ctx context.Context, j job, out *emitter, leave context.Context) error {
	var (
		mu                    sync.Mutex
		conns                 []net.Conn
		failed, notHandshaken int
		firstErr              error
		leaving               atomic.Bool
		early, closed, next   atomic.Int64
		readers               sync.WaitGroup
	)
	request := "GET /debug/pprof/cmdline HTTP/1.1\r\nHost: " + j.Target + "\r\n\r\n"
	// ready readies a connection; a timeout leaves it held, not ready.
	ready := func(c net.Conn, r *bufio.Reader) error {
		if j.Kind == "stall" {
			if !j.Handshake {
				return nil
			}
			return (&rawConn{Conn: c, r: r}).handshake(handshakeTimeout)
		}
		c.SetDeadline(time.Now().Add(handshakeTimeout))
		defer c.SetDeadline(time.Time{})
		if _, err := io.WriteString(c, request); err != nil {
			return err
		}
		res, err := http.ReadResponse(r, nil)
		if err == nil {
			_, err = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
		if isTimeout(err) {
			return errors.New("no answer within the handshake timeout") // not held
		}
		return err
	}
	workers(j.Workers, func() {
		for next.Add(1) <= int64(j.Conns) {
			d := net.Dialer{Timeout: dialTimeout}
			c, err := d.DialContext(ctx, "tcp", j.Target)
			if err != nil {
				mu.Lock()
				failed++
				firstErr = cmp.Or(firstErr, err)
				mu.Unlock()
				continue
			}
			r := bufio.NewReader(c)
			if err := ready(c, r); isTimeout(err) {
				mu.Lock()
				notHandshaken++
				mu.Unlock()
			} else if err != nil {
				early.Add(1)
				out.emit(event{Ev: "closed"})
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			readers.Go(func() {
				io.Copy(io.Discard, r) // until the connection ends
				if !leaving.Load() {
					closed.Add(1)
					out.emit(event{Ev: "closed"})
				}
			})
		}
	})
	ev := event{Ev: "ready", Opened: len(conns), Failed: failed, Closed: int(early.Load())}
	if j.Kind == "stall" {
		ev.Closed += int(closed.Load())
	}
	if notHandshaken > 0 {
		ev.Note = fmt.Sprintf("%d connections open but never handshaken (no init res within %v)", notHandshaken, handshakeTimeout)
	}
	if firstErr != nil {
		ev.Note = joinNote(ev.Note, fmt.Sprintf("first failed connect: %v", firstErr))
	}
	out.emit(ev)
	<-leave.Done()
	leaving.Store(true)
	for _, c := range conns {
		c.Close()
	}
	readers.Wait()
	out.emit(event{Ev: "done", Opened: len(conns), Closed: int(early.Load() + closed.Load())})
	return nil
}

// runConnectReset has an attacker child connect and reset (SO_LINGER 0)
// as fast as it can for e.p.resetFor, beside the side client.
func runConnectReset(e *env) error {
	p := e.p
	e.startSide()
	_, done, err := e.attacker(job{Kind: "reset", Target: e.t.Addr, For: p.resetFor, Workers: p.resetWorkers}, "done", p.resetFor+leaveLimit)
	if err != nil {
		return err
	}
	if err := e.end(nil, p.settle); err != nil {
		return err
	}
	e.r.fig("connects", "%d in %s (%.0f/s) from %d goroutines, %d failed", done.Sent, sec(p.resetFor),
		float64(done.Sent)/p.resetFor.Seconds(), p.resetWorkers, done.Failed)
	e.r.note("attacker", done.Note)
	e.sideFigure()
	return nil
}

func childReset(ctx context.Context, j job, out *emitter, leave context.Context) error {
	ctx, cancel := context.WithTimeout(leave, j.For)
	defer cancel()
	var connects, failed atomic.Int64
	var firstErr atomic.Value
	workers(j.Workers, func() {
		d := net.Dialer{Timeout: time.Second}
		for ctx.Err() == nil {
			c, err := d.DialContext(ctx, "tcp", j.Target)
			if err != nil {
				if ctx.Err() == nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
				continue
			}
			c.(*net.TCPConn).SetLinger(0)
			c.Close()
			connects.Add(1)
		}
	})
	done := event{Ev: "done", Sent: connects.Load(), Failed: int(failed.Load())}
	if s, ok := firstErr.Load().(string); ok {
		done.Note = "first failed connect: " + s
	}
	out.emit(done)
	<-leave.Done()
	return nil
}

func workers(n int, f func()) {
	var wg sync.WaitGroup
	for range max(1, n) {
		wg.Go(f)
	}
	wg.Wait()
}
