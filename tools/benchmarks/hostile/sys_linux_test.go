package hostile

import (
	"net"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
)

// serverClosed sees the server close a connection without reading from it.
func TestServerClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	s.Write([]byte("unread"))
	if closed, err := serverClosed(c); err != nil || closed {
		t.Fatalf("an open connection: serverClosed = %v, %v; want false", closed, err)
	}
	s.Close()
	testwait.Until(t, "serverClosed to see the server close the connection", func() bool {
		closed, err := serverClosed(c)
		return err == nil && closed
	})
}

// serverClosed sees the server close a connection whose client never
// reads, though the server's FIN waits behind the unread data.
func TestServerClosedBehindUnreadData(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d := net.Dialer{Control: smallReceiveBuffer(4096)}
	c, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	// Fill the client's window and the server's send buffer.
	s.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
	for {
		if _, err := s.Write(make([]byte, 64<<10)); err != nil {
			break
		}
	}
	s.Close()
	testwait.Until(t, "serverClosed to see the server close the connection", func() bool {
		closed, err := serverClosed(c)
		return err == nil && closed
	})
}
