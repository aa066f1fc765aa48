package hostile

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

// Bounds on an attacker child's steps.
const (
	// readyLimit bounds the wait for attackers to open their connections
	// or send their requests.
	readyLimit = 5 * time.Minute
	// leaveLimit bounds the wait for an attacker to close its connections
	// and report.
	leaveLimit = time.Minute
	// dialTimeout bounds one connect; handshakeTimeout one init exchange.
	dialTimeout      = 10 * time.Second
	handshakeTimeout = 10 * time.Second
	// dialers is how many connects an attacker child makes at once.
	dialers = 64
)

func runStallHandshaken(e *env) error   { return e.stall(e.t.Addr, true) }
func runStallPrehandshake(e *env) error { return e.stall(e.t.Addr, false) }

// stall holds e.p.conns connections to addr, split across attacker
// children, for e.p.hold once they are open, while a new client calls
// every e.p.probeEvery; then the attackers leave. With handshake, each
// connection completes the TChannel init handshake first; without, it
// sends nothing at all.
func (e *env) stall(addr string, handshake bool) error {
	p := e.p
	e.before()
	s := e.sample()
	start := time.Now()
	attackers, err := e.holdConns(addr, "", p.conns, handshake)
	defer func() {
		for _, a := range attackers {
			a.stop()
		}
	}()
	if err != nil {
		e.peaks(s)
		return err
	}
	c := e.r.Conns
	c.ReadyIn = millis.Duration(time.Since(start))
	e.logf("%s", c)

	return e.holdWhileProbed(attackers, start, s, "new client during the attack")
}

// holdWhileProbed is the end of an attack whose attackers hold
// connections: it keeps them for e.p.hold while a new client calls every
// e.p.probeEvery, lets them leave, waits e.p.settle and records the
// figures, the new client's under name.
func (e *env) holdWhileProbed(attackers []*attacker, start time.Time, s *sampler, name string) error {
	p := e.p
	stop := make(chan struct{})
	probe := make(chan *Load, 1)
	go func() {
		l, err := runLoad(e.ctx, e.t.Addr, loadSpec{rate: float64(time.Second) / float64(p.probeEvery), deadline: p.deadline, payload: 16}, stop)
		if err != nil {
			e.r.problem("the new client: %v", err)
		}
		probe <- l
	}()
	err := e.pause(p.hold)
	close(stop)
	e.r.Probe = <-probe
	e.leave(attackers, start)
	e.peaks(s)
	if err == nil {
		err = e.pause(p.settle)
	}
	e.after()
	e.connFigures()
	e.r.fig(name, "%s", e.r.Probe)
	return err
}

// holdConns starts attacker children holding n connections to addr from
// source, at most perChild each, and waits until they are open. It
// records them in e.r.Conns.
func (e *env) holdConns(addr, source string, n int, handshake bool) ([]*attacker, error) {
	children := (n + perChild - 1) / perChild
	var attackers []*attacker
	for i := 0; i < children; i++ {
		share := n / children
		if i < n%children {
			share++
		}
		a, err := startAttacker(job{Kind: "stall", Target: addr, Source: source, Conns: share, Handshake: handshake, Workers: dialers})
		if err != nil {
			return attackers, err
		}
		attackers = append(attackers, a)
	}
	c := &Conns{Wanted: n}
	e.r.Conns = c
	for _, a := range attackers {
		ev, err := a.next("ready", readyLimit, nil)
		if err != nil {
			return attackers, err
		}
		c.Opened += ev.Opened
		c.Early += ev.Closed
		c.Failed += ev.Failed
		if ev.Note != "" {
			e.r.fig("attacker", "%s", ev.Note)
		}
	}
	return attackers, nil
}

// leave has the attackers close their connections, all at once, and
// records when the server had closed some before (from start). Closes the
// children see after they were told to leave are theirs, not the
// server's: one child closing its connections frees the server to do
// things to the other's.
func (e *env) leave(attackers []*attacker, start time.Time) {
	leftAt := time.Now()
	for _, a := range attackers {
		a.p.CloseStdin()
	}
	var closes []time.Duration
	for _, a := range attackers {
		if _, err := a.leave(leaveLimit); err != nil {
			e.r.problem("an attacker leaving: %v", err)
		}
		for _, t := range a.closeTimes() {
			if t.Before(leftAt) {
				closes = append(closes, t.Sub(start))
			}
		}
	}
	if c := e.r.Conns; c != nil && len(closes) > 0 {
		slices.Sort(closes)
		c.Closed = len(closes)
		c.First, c.Median, c.Last = millis.Duration(closes[0]), millis.Duration(closes[len(closes)/2]), millis.Duration(closes[len(closes)-1])
	}
}

// connFigures appends the attacker's connections' figures.
func (e *env) connFigures() {
	c := e.r.Conns
	if c == nil {
		return
	}
	e.r.fig("attacker connections", "%s", c)
	e.r.fig("closed by the server", "%s", c.closedString())
}

// childStall is the attacker child of the stall attacks: it opens
// j.Conns connections (completing the handshake if j.Handshake), reports
// "ready", reports each one the server closes, and closes them all when
// told to leave.
func childStall(ctx context.Context, j job, out *emitter, leave <-chan struct{}) error {
	var (
		mu            sync.Mutex
		conns         []net.Conn
		failed        int
		notHandshaken int
		leaving       atomic.Bool
		readers       sync.WaitGroup
		closed        atomic.Int64
		firstErr      error
	)
	watch := func(c net.Conn, r *bufio.Reader) {
		readers.Add(1)
		go func() {
			defer readers.Done()
			buf := make([]byte, 512)
			for {
				var err error
				if r != nil && r.Buffered() > 0 {
					_, err = r.Read(buf)
				} else {
					_, err = c.Read(buf)
				}
				if err != nil {
					if !leaving.Load() {
						closed.Add(1)
						out.emit(event{Ev: "closed"})
					}
					return
				}
			}
		}()
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < max(1, j.Workers); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(j.Conns) {
				dctx, cancel := context.WithTimeout(ctx, dialTimeout)
				rc, err := dialRaw(dctx, j.Target, j.Source)
				cancel()
				if err != nil {
					mu.Lock()
					failed++
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					continue
				}
				var r *bufio.Reader
				if j.Handshake {
					if err := rc.handshake(handshakeTimeout); err != nil {
						if !isTimeout(err) {
							// The server closed it or refused the
							// handshake: it is not held.
							closed.Add(1)
							out.emit(event{Ev: "closed"})
							rc.Close()
							continue
						}
						mu.Lock()
						notHandshaken++
						mu.Unlock()
					}
					r = rc.r
				}
				mu.Lock()
				conns = append(conns, rc.Conn)
				mu.Unlock()
				watch(rc.Conn, r)
			}
		}()
	}
	wg.Wait()
	ready := event{Ev: "ready", Opened: len(conns), Failed: failed, Closed: int(closed.Load())}
	var notes []string
	if notHandshaken > 0 {
		notes = append(notes, fmt.Sprintf("%d connections open but never handshaken (no init res within %v)", notHandshaken, handshakeTimeout))
	}
	if firstErr != nil {
		notes = append(notes, fmt.Sprintf("first failed connect: %v", firstErr))
	}
	ready.Note = strings.Join(notes, "; ")
	out.emit(ready)
	<-leave
	leaving.Store(true)
	for _, c := range conns {
		c.Close()
	}
	readers.Wait()
	out.emit(event{Ev: "done", Opened: len(conns), Closed: int(closed.Load())})
	return nil
}
