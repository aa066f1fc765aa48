// Package testnet gives tests TCP fault points on 127.0.0.1: an address
// nothing listens on, listeners that accept connections and close them at
// once or hold them without a word (a black hole for TChannel's
// handshake), counting what they accept, and a proxy whose connections can
// be cut. Everything stops with the test.
package testnet

import (
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
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// Listener accepts TCP connections on 127.0.0.1 and counts them.
type Listener struct {
	addr    string
	accepts atomic.Int64
}

// Addr returns the listener's host:port.
func (l *Listener) Addr() string { return l.addr }

// Accepts returns how many connections it has accepted.
func (l *Listener) Accepts() int64 { return l.accepts.Load() }

// AcceptClose starts a listener that closes every connection as soon as it
// accepts it: TCP connects, TChannel's handshake fails.
func AcceptClose(t testing.TB) *Listener { return start(t, false) }

// BlackHole starts a listener that holds every connection it accepts open
// and never sends a byte: TChannel's handshake never completes.
func BlackHole(t testing.TB) *Listener { return start(t, true) }

func start(t testing.TB, hold bool) *Listener {
	t.Helper()
	nl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &Listener{addr: nl.Addr().String()}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := nl.Accept()
			if err != nil {
				return // closed by the cleanup
			}
			l.accepts.Add(1)
			if !hold {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		nl.Close()
		wg.Wait()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return l
}

// Proxy forwards TCP connections from its own address on 127.0.0.1 to a
// target until Stop cuts them: a network partition between a client and
// the target. Cut closes the connections open and goes on forwarding new
// ones; HoldNext makes it hold new connections without a word, as a
// target too busy to answer would.
type Proxy struct {
	addr string
	nl   net.Listener
	hold atomic.Int64 // connections still to hold (HoldNext)
	wg   sync.WaitGroup
	mu   sync.Mutex
	// conns are the open connections, both sides; nil once stopped.
	conns map[net.Conn]struct{}
}

// StartProxy starts a proxy to target (host:port); it stops with the test.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	nl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{addr: nl.Addr().String(), nl: nl, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			in, err := nl.Accept()
			if err != nil {
				return // stopped
			}
			if p.takeHold() {
				if !p.track(in, nil) {
					return
				}
				continue // held open, unanswered, until Cut or Stop
			}
			// A bounded dial: a target that drops SYNs must not hold the
			// accept loop, and Stop with it, for the OS's connect timeout.
			out, err := net.DialTimeout("tcp", target, 5*time.Second)
			if err != nil {
				in.Close()
				continue
			}
			if !p.track(in, out) {
				return
			}
			p.wg.Add(2)
			go p.pipe(out, in)
			go p.pipe(in, out)
		}
	}()
	t.Cleanup(p.Stop)
	return p
}

// Addr returns the proxy's host:port.
func (p *Proxy) Addr() string { return p.addr }

// Cut closes every connection open through the proxy (both sides); new
// ones are forwarded (or held) as before.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

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
func (p *Proxy) Stop() {
	p.nl.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

// track records a connection's two sides (out nil for a held one), or
// closes them if the proxy has stopped.
func (p *Proxy) track(in, out net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		in.Close()
		if out != nil {
			out.Close()
		}
		return false
	}
	p.conns[in] = struct{}{}
	if out != nil {
		p.conns[out] = struct{}{}
	}
	return true
}

// pipe copies from src to dst until either side closes, then closes both.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	io.Copy(dst, src)
	dst.Close()
	src.Close()
	p.mu.Lock()
	if p.conns != nil {
		delete(p.conns, dst)
		delete(p.conns, src)
	}
	p.mu.Unlock()
}
