package faults

import (
	"fmt"
	"net"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/testnet"
)

// loopback is the only address the suite listens on or dials.
const loopback = "127.0.0.1"

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

// startFaultPoint starts testnet's accept-close listener, or with hold its
// black hole, recording its accepts in accepts.
func startFaultPoint(hold bool, accepts *events) (*testnet.Listener, error) {
	l, err := testnet.Listen(hold, func() { accepts.add(time.Now()) })
	if err != nil {
		return nil, fmt.Errorf("faults: %w", err)
	}
	return l, nil
}

// refusedAddr returns a host:port on 127.0.0.1 that nothing listens on: a
// port the kernel handed out a moment ago and that was closed again.
// Connecting to it is refused at once. (Another process could take the port
// in between; on a test machine that is vanishingly rare.)
func refusedAddr() (string, error) {
	l, err := testnet.Listen(false, nil)
	if err != nil {
		return "", fmt.Errorf("faults: %w", err)
	}
	l.Close()
	return l.Addr(), nil
}
