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

// dial is the client's tchannel.ChannelOptions.Dialer: it records each
// TCP connection attempt at the peer dialed, whatever its outcome (nothing
// listens at a refused peer to count them), and dials only 127.0.0.1.
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
