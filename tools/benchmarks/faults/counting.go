package faults

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/testnet"
)

// maxEvents bounds the times an events log keeps (24 MiB); beyond it the
// log only counts, and countSince undercounts (Result.Truncated says so).
const maxEvents = 1 << 20

// events is a log of timestamped occurrences of one kind at one place:
// connection attempts, accepted connections, handler executions. It is
// safe for concurrent use; the zero value is empty, and a nil log counts
// nothing.
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

// count returns how many occurrences were recorded.
func (e *events) count() int {
	n, _, _ := e.countSince(time.Time{})
	return n
}

// countSince returns how many occurrences were recorded, how many of the
// kept ones happened at or after t, and whether the log dropped times
// (then that count is a lower bound).
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

// reset forgets everything, freeing the kept times.
func (e *events) reset() {
	if e != nil {
		e.mu.Lock()
		e.times, e.n = nil, 0
		e.mu.Unlock()
	}
}

// sumSince adds up countSince over logs.
func sumSince(logs []*events, t time.Time) (all, since int, truncated bool) {
	for _, e := range logs {
		a, s, tr := e.countSince(t)
		all, since, truncated = all+a, since+s, truncated || tr
	}
	return all, since, truncated
}

// dialer is the client's tchannel.ChannelOptions.Dialer: it records every
// TCP connection attempt per host:port, whatever its outcome (nothing
// listens at a refused peer to count them), and dials only 127.0.0.1.
type dialer struct {
	mu    sync.Mutex
	dials map[string]*events
	net   net.Dialer
}

func newDialer() *dialer { return &dialer{dials: map[string]*events{}} }

// DialContext records the attempt, then dials hostPort if it is on
// 127.0.0.1 and refuses otherwise.
func (d *dialer) DialContext(ctx context.Context, network, hostPort string) (net.Conn, error) {
	d.of(hostPort).now()
	if host, _, err := net.SplitHostPort(hostPort); err != nil || host != loopback {
		return nil, fmt.Errorf("faults: refusing to dial %s: the fault suite only targets %s", hostPort, loopback)
	}
	return d.net.DialContext(ctx, network, hostPort)
}

// of returns hostPort's log of attempts.
func (d *dialer) of(hostPort string) *events {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dials[hostPort] == nil {
		d.dials[hostPort] = &events{}
	}
	return d.dials[hostPort]
}

// total returns the attempts to every address, those at or after since,
// and whether that count is a lower bound.
func (d *dialer) total(since time.Time) (all, after int, truncated bool) {
	d.mu.Lock()
	var logs []*events
	for _, e := range d.dials {
		logs = append(logs, e)
	}
	d.mu.Unlock()
	return sumSince(logs, since)
}

// reset forgets every attempt.
func (d *dialer) reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dials = map[string]*events{}
}

// startFaultPoint starts testnet's accept-close listener, or with hold its
// black hole (it reads and discards), recording its accepts.
func startFaultPoint(hold bool, accepts *events) (*testnet.Listener, error) {
	l, err := testnet.Listen(hold, accepts.now)
	if err != nil {
		return nil, fmt.Errorf("faults: %w", err)
	}
	return l, nil
}

// refusedAddr returns a host:port on 127.0.0.1 that nothing listens on: a
// port the kernel handed out a moment ago, closed again, so a connection
// to it is refused at once.
func refusedAddr() (string, error) {
	l, err := testnet.Listen(false, nil)
	if err != nil {
		return "", fmt.Errorf("faults: %w", err)
	}
	l.Close()
	return l.Addr(), nil
}
