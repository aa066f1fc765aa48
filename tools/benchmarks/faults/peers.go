package faults

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/testnet"
	"github.com/sluice-rpc/sluice/tools/internal/fleet"
)

// maxEvents bounds the times an events log keeps (24 MiB); beyond it the
// log only counts (Result.Truncated).
const maxEvents = 1 << 20

// events is a log of timestamped occurrences: connection attempts,
// accepted connections, handler executions. A nil log counts nothing.
type events struct {
	mu    sync.Mutex
	times []time.Time
	n     int
}

// add records one occurrence at t.
func (e *events) add(t time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n++
	if len(e.times) < maxEvents {
		e.times = append(e.times, t)
	}
}

// now records one occurrence now.
func (e *events) now() { e.add(time.Now()) }

// countSince returns how many occurrences were recorded, how many of the
// kept ones were at or after t, and whether times were dropped (then that
// count is a lower bound).
func (e *events) countSince(t time.Time) (all, since int, truncated bool) {
	if e == nil {
		return 0, 0, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, at := range e.times {
		if !at.Before(t) {
			since++
		}
	}
	return e.n, since, e.n > len(e.times)
}

// reset forgets everything.
func (e *events) reset() {
	if e != nil {
		e.mu.Lock()
		e.times, e.n = nil, 0
		e.mu.Unlock()
	}
}

// point is one peer of a run: its address, the client's connection
// attempts to it, and the connections accepted and handler executions
// behind it.
type point struct {
	addr                  string
	dials, accepts, execs events
}

// peers are the three peers of a run and its fault.
type peers struct {
	points []*point
	// faulty is the index of the failing peer; -1 when all three fail
	// alike or none does.
	faulty int
	// errs picks the calls the erroring peer fails (Erroring only).
	errs *erratic
	// inject applies a mid-run fault (nil: there from the start); after
	// runs once the load is over, before the client closes.
	inject, after func() error
	closers       fleet.Closers
}

// startPeers starts the peers of scenario s: the failing ones first, then
// good servers up to three.
func startPeers(s Scenario) (_ *peers, err error) {
	f := &peers{faulty: -1}
	defer func() {
		if err != nil {
			f.closers.Close()
		}
	}()
	switch s {
	case None, Declined, Busy:
	case Refused:
		for range 3 {
			addr, err := refusedAddr()
			if err != nil {
				return nil, err
			}
			f.points = append(f.points, &point{addr: addr})
		}
	case AcceptClose:
		for range 3 {
			if err := f.listen(false); err != nil {
				return nil, err
			}
		}
	case BlackHole:
		f.faulty, err = 0, f.listen(true)
	case Reset, Latency, Bandwidth, Stall:
		err = f.startProxied(s)
	case Erroring:
		f.errs, f.faulty = newErratic(), 0
		_, err = f.startServer(f.errs)
	case Kill, Freeze:
		p := &point{}
		c, err := startChild(&p.accepts, &p.execs)
		if err != nil {
			return nil, err
		}
		p.addr = c.Addr
		f.points, f.faulty = append(f.points, p), 0
		f.closers = append(f.closers, c.close)
		f.inject = c.kill
		if s == Freeze {
			f.inject, f.after = c.freeze, c.thaw
		}
	default:
		return nil, fmt.Errorf("faults: Scenario is %q, must be one of %s", s, scenarioList())
	}
	for err == nil && len(f.points) < 3 {
		_, err = f.startServer(nil)
	}
	if err != nil {
		return nil, err
	}
	return f, nil
}

// listen adds testnet's accept-close listener, or with hold its black
// hole (it reads and discards), as a point.
func (f *peers) listen(hold bool) error {
	p := &point{}
	l, err := testnet.Listen(hold, p.accepts.now)
	if err != nil {
		return fmt.Errorf("faults: %w", err)
	}
	p.addr = l.Addr()
	f.closers.Add(func() { l.Close() })
	f.points = append(f.points, p)
	return nil
}

// startServer starts a server and adds it as a point: a good one, or with
// errs not nil one that fails the calls errs picks.
func (f *peers) startServer(errs *erratic) (*point, error) {
	p := &point{}
	s, err := startServer(p.accepts.now, p.execs.now, errs)
	if err != nil {
		return nil, err
	}
	p.addr = s.HostPort()
	f.closers.Add(s.Close)
	f.points = append(f.points, p)
	return p, nil
}

// dial is the client's Dialer: it records each connection attempt at the
// peer dialed, whatever its outcome, and dials only 127.0.0.1.
func (f *peers) dial(ctx context.Context, network, hostPort string) (net.Conn, error) {
	for _, p := range f.points {
		if p.addr == hostPort {
			p.dials.now()
		}
	}
	if host, _, err := net.SplitHostPort(hostPort); err != nil || host != loopback {
		return nil, fmt.Errorf("faults: refusing to dial %s: the fault suite only targets %s", hostPort, loopback)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, hostPort)
}

// sum adds up the logs of kind over the points: all, since t, truncated.
func (f *peers) sum(kind func(*point) *events, t time.Time) (all, since int, truncated bool) {
	for _, p := range f.points {
		a, s, tr := kind(p).countSince(t)
		all, since, truncated = all+a, since+s, truncated || tr
	}
	return all, since, truncated
}

// refusedAddr returns a host:port on 127.0.0.1 that nothing listens on: a
// port just handed out and closed again.
func refusedAddr() (string, error) {
	l, err := testnet.Listen(false, nil)
	if err != nil {
		return "", fmt.Errorf("faults: %w", err)
	}
	l.Close()
	return l.Addr(), nil
}
