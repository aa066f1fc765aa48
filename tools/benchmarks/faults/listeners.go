package faults

import (
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// loopback is the only address the suite listens on or dials.
const loopback = "127.0.0.1"

// listen opens a TCP listener on a free port of 127.0.0.1.
func listen() (net.Listener, error) {
	ln, err := net.Listen("tcp", loopback+":0")
	if err != nil {
		return nil, fmt.Errorf("faults: listen on %s:0: %w", loopback, err)
	}
	return ln, nil
}

// countingListener is a net.Listener that reports every connection it
// accepts to onAccept. Servers serve on one, so the accepts are counted where
// they happen, whatever path the client dialed by.
type countingListener struct {
	net.Listener
	onAccept func()
}

// Accept waits for the next connection and reports it.
func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.onAccept()
	}
	return c, err
}

// refusedAddr returns a host:port on 127.0.0.1 that nothing listens on: a
// port the kernel handed out a moment ago and that was closed again.
// Connecting to it is refused at once. (Another process could take the port
// in between; on a test machine that is vanishingly rare.)
func refusedAddr() (string, error) {
	ln, err := listen()
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return "", fmt.Errorf("faults: close the listener that picked a refused port: %w", err)
	}
	return addr, nil
}

// acceptCloser is a listener that accepts every connection and closes it at
// once: TCP connects, TChannel's handshake fails. It counts its accepts.
type acceptCloser struct {
	ln      net.Listener
	accepts *events
	done    chan struct{}
}

// startAcceptCloser starts an acceptCloser on a free port of 127.0.0.1.
func startAcceptCloser(accepts *events) (*acceptCloser, error) {
	ln, err := listen()
	if err != nil {
		return nil, err
	}
	a := &acceptCloser{ln: ln, accepts: accepts, done: make(chan struct{})}
	go a.loop()
	return a, nil
}

func (a *acceptCloser) loop() {
	defer close(a.done)
	for {
		c, err := a.ln.Accept()
		if err != nil {
			return // closed
		}
		a.accepts.add(time.Now())
		c.Close()
	}
}

// Addr returns the listener's host:port.
func (a *acceptCloser) Addr() string { return a.ln.Addr().String() }

// Close stops accepting and waits for the accept loop to end.
func (a *acceptCloser) Close() {
	a.ln.Close()
	<-a.done
}

// blackHole is a listener that accepts TCP connections and never answers:
// it reads and discards whatever arrives, so a TChannel handshake sent to it
// never completes. It counts its accepts and holds each connection until
// the client closes it or the blackHole is closed.
type blackHole struct {
	ln      net.Listener
	accepts *events

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// startBlackHole starts a blackHole on a free port of 127.0.0.1.
func startBlackHole(accepts *events) (*blackHole, error) {
	ln, err := listen()
	if err != nil {
		return nil, err
	}
	b := &blackHole{ln: ln, accepts: accepts, conns: map[net.Conn]struct{}{}}
	b.wg.Add(1)
	go b.loop()
	return b, nil
}

func (b *blackHole) loop() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return // closed
		}
		b.accepts.add(time.Now())
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			c.Close()
			return
		}
		b.conns[c] = struct{}{}
		b.wg.Add(1)
		b.mu.Unlock()
		go func() {
			defer b.wg.Done()
			io.Copy(io.Discard, c) // until the client or Close closes it
			c.Close()
			b.mu.Lock()
			delete(b.conns, c)
			b.mu.Unlock()
		}()
	}
}

// Addr returns the listener's host:port.
func (b *blackHole) Addr() string { return b.ln.Addr().String() }

// Close stops accepting, closes every held connection and waits for the
// blackHole's goroutines to end.
func (b *blackHole) Close() {
	b.mu.Lock()
	b.closed = true
	b.ln.Close()
	for c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}
