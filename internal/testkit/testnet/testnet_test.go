package testnet

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
)

func TestFaultPoints(t *testing.T) {
	if _, err := net.Dial("tcp", Refused(t)); err == nil {
		t.Fatal("a connect to the refused address succeeded")
	}

	ac := AcceptClose(t)
	c, err := net.Dial("tcp", ac.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read from an accept-close listener: %v, want EOF", err)
	}
	if ac.Accepts() != 1 {
		t.Fatalf("%d accepts, want 1", ac.Accepts())
	}

	bh := BlackHole(t)
	c2, err := net.Dial("tcp", bh.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	testwait.Until(t, "the black hole to accept", func() bool { return bh.Accepts() == 1 })
	c2.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	var ne net.Error
	if _, err := c2.Read(make([]byte, 1)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read from a black hole: %v, want a timeout", err)
	}
}

func TestProxyForwardsUntilStopped(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	p := StartProxy(t, echo.Addr().String())
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("read %q, %v through the proxy; want ping", buf, err)
	}
	p.Stop()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(buf); !errors.Is(err, io.EOF) {
		t.Fatalf("read after Stop: %v, want EOF (the connection cut)", err)
	}
	if _, err := net.Dial("tcp", p.Addr()); err == nil {
		t.Fatal("a connect to a stopped proxy succeeded")
	}
	p.Stop() // again: nothing
}
