// Package testnet gives tests TCP fault points on 127.0.0.1: an address
// nothing listens on, and listeners that accept connections and close them
// at once or hold them without a word (a black hole for TChannel's
// handshake), counting what they accept. Everything stops with the test.
package testnet

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
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
