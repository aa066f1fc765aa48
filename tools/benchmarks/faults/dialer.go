package faults

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"
)

// dialer is the client's tchannel.ChannelOptions.Dialer: it records every
// TCP connection attempt per host:port, whatever its outcome, and dials only
// 127.0.0.1. Nothing listens at a refused peer to count its connection
// attempts; the dialer counts them at the client.
type dialer struct {
	mu    sync.Mutex
	dials map[string]*events
	net   net.Dialer
}

func newDialer() *dialer { return &dialer{dials: map[string]*events{}} }

// DialContext records the attempt, then dials hostPort if it is on
// 127.0.0.1 and refuses otherwise.
func (d *dialer) DialContext(ctx context.Context, network, hostPort string) (net.Conn, error) {
	d.of(hostPort).add(time.Now())
	host, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		return nil, fmt.Errorf("faults: dial %q: %w", hostPort, err)
	}
	if host != loopback {
		return nil, fmt.Errorf("faults: refusing to dial %s: the fault suite only targets %s", hostPort, loopback)
	}
	return d.net.DialContext(ctx, network, hostPort)
}

// of returns hostPort's log of attempts.
func (d *dialer) of(hostPort string) *events {
	d.mu.Lock()
	defer d.mu.Unlock()
	e := d.dials[hostPort]
	if e == nil {
		e = &events{}
		d.dials[hostPort] = e
	}
	return e
}

// total returns the attempts to every address, and those at or after
// since (and whether that count is a lower bound).
func (d *dialer) total(since time.Time) (all, after int, truncated bool) {
	d.mu.Lock()
	logs := make([]*events, 0, len(d.dials))
	for _, e := range d.dials {
		logs = append(logs, e)
	}
	d.mu.Unlock()
	for _, e := range logs {
		all += e.count()
		n, tr := e.countSince(since)
		after += n
		truncated = truncated || tr
	}
	return all, after, truncated
}

// reset forgets every attempt.
func (d *dialer) reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dials = map[string]*events{}
}
