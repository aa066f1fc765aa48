// Package testnet gives tests TCP fault points on 127.0.0.1: an address
// nothing listens on, listeners that accept connections and close them at
// once or hold them without a word (a black hole for TChannel's
// handshake), counting what they accept, and a proxy whose connections can
// be cut. Everything stops with the test; Listen starts the listeners
// outside one (the fault suite of tools/benchmarks/faults).
package testnet

import (
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Refused returns an address on 127.0.0.1 where nothing listens: a port
// the kernel handed out a moment ago and that was closed again, so that a
// connect to it is refused at once.
func Refused(t testing.TB) string {
	t.Helper()
	nl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testnet: listen on 127.0.0.1:0: %v", err)
	}
	defer nl.Close()
	return nl.Addr().String()
}

// Listener accepts TCP connections on 127.0.0.1, counts them and serves
// each on its own goroutine until Close.
type Listener struct {
	nl       net.Listener
	serve    func(*Listener, net.Conn) // returns when done with the connection
	onAccept func()
	accepts  atomic.Int64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{} // open; nil once closed
}

// Addr returns the listener's host:port.
func (l *Listener) Addr() string { return l.nl.Addr().String() }

// Accepts returns how many connections it has accepted.
func (l *Listener) Accepts() int64 { return l.accepts.Load() }

// AcceptClose starts a listener that closes every connection as soon as it
// accepts it: TCP connects, TChannel's handshake fails.
func AcceptClose(t testing.TB) *Listener {
	return must(t, func() (*Listener, error) { return Listen(false, nil) })
}

// BlackHole starts a listener that holds every connection it accepts open
// and never sends a byte: TChannel's handshake never completes.
func BlackHole(t testing.TB) *Listener {
	return must(t, func() (*Listener, error) { return Listen(true, nil) })
}

// must starts a listener for t, stopped with the test.
func must(t testing.TB, start func() (*Listener, error)) *Listener {
	t.Helper()
	l, err := start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// Listen starts, outside a test, a BlackHole (hold) or an AcceptClose
// listener that also calls onAccept, when not nil, for each connection it
// accepts. A black hole reads and discards what a connection sends until
// its client closes it. Close stops the listener.
func Listen(hold bool, onAccept func()) (*Listener, error) {
	serve := func(*Listener, net.Conn) {}
	if hold {
		serve = discard
	}
	return listen(serve, onAccept)
}

func discard(_ *Listener, c net.Conn) { io.Copy(io.Discard, c) } // until either side closes c

func listen(serve func(*Listener, net.Conn), onAccept func()) (*Listener, error) {
	nl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("testnet: listen on 127.0.0.1:0: %w", err)
	}
	l := &Listener{nl: nl, serve: serve, onAccept: onAccept, conns: map[net.Conn]struct{}{}}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			c, err := nl.Accept()
			if err != nil {
				return // closed
			}
			l.accepts.Add(1)
			if l.onAccept != nil {
				l.onAccept()
			}
			if !l.track(c) {
				return
			}
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				defer l.untrack(c)
				l.serve(l, c)
			}()
		}
	}()
	return l, nil
}

// track records an open connection, or closes it if the listener is closed.
func (l *Listener) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conns == nil {
		c.Close()
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

// untrack closes a connection and forgets it.
func (l *Listener) untrack(c net.Conn) {
	c.Close()
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

// cut closes every open connection; stop also ends the listener's
// accepting for good.
func (l *Listener) cut(stop bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.conns {
		c.Close()
	}
	if stop {
		l.nl.Close()
		l.conns = nil
	}
}

// Close stops accepting, closes every open connection and waits for the
// listener's goroutines; later calls do nothing.
func (l *Listener) Close() {
	l.cut(true)
	l.wg.Wait()
}

// Proxy forwards TCP connections from its own address on 127.0.0.1 to a
// target until Stop cuts them: a network partition between a client and
// the target. Cut closes the connections open and goes on forwarding new
// ones; HoldNext makes it hold new connections without a word, as a
// target too busy to answer would.
type Proxy struct {
	*Listener
	target string
	hold   atomic.Int64 // connections still to hold (HoldNext)
}

// StartProxy starts a proxy to target (host:port); it stops with the test.
func StartProxy(t testing.TB, target string) *Proxy {
	p := &Proxy{target: target}
	p.Listener = must(t, func() (*Listener, error) { return listen(p.forward, nil) })
	return p
}

// forward serves one connection accepted: holds it (HoldNext) or pipes it
// to and from a new connection to the target.
func (p *Proxy) forward(l *Listener, in net.Conn) {
	if p.takeHold() {
		discard(l, in) // held open, unanswered, until Cut or Stop
		return
	}
	// A bounded dial: a target that drops SYNs must not hold Stop for the
	// OS's connect timeout.
	out, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil || !l.track(out) {
		return
	}
	defer l.untrack(out)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		io.Copy(out, in)
		out.Close()
		in.Close()
	}()
	io.Copy(in, out)
}

// Cut closes every connection open through the proxy (both sides); new
// ones are forwarded (or held) as before.
func (p *Proxy) Cut() { p.cut(false) }

// HoldNext makes the proxy hold the next n connections it accepts: open,
// never forwarded, never answered, until Cut or Stop. Later ones are
// forwarded.
func (p *Proxy) HoldNext(n int) { p.hold.Store(int64(n)) }

// takeHold reports whether a connection just accepted is to be held,
// counting it off HoldNext's.
func (p *Proxy) takeHold() bool {
	for {
		n := p.hold.Load()
		if n <= 0 {
			return false
		}
		if p.hold.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// Stop closes the proxy's listener and every connection through it, and
// waits for its goroutines; later calls do nothing.
func (p *Proxy) Stop() { p.Close() }
