package faults

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/testnet"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
)

// readBound bounds a test's read from a fault point that should answer, or
// close, at once.
const readBound = 5 * time.Second

func TestRefusedAddrRefuses(t *testing.T) {
	addr, err := refusedAddr()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(addr, loopback+":") {
		t.Fatalf("refusedAddr = %s, want an address on %s", addr, loopback)
	}
	c, err := net.DialTimeout("tcp", addr, readBound)
	if err == nil {
		c.Close()
		t.Fatalf("dial %s succeeded, want connection refused", addr)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial %s: %v, want connection refused", addr, err)
	}
}

func TestAcceptCloserCountsAndCloses(t *testing.T) {
	var accepts events
	a, err := testnet.Listen(false, accepts.now)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for i := 0; i < 3; i++ {
		c, err := net.DialTimeout("tcp", a.Addr(), readBound)
		if err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(readBound))
		if n, err := c.Read(make([]byte, 1)); n != 0 || (err != io.EOF && !errors.Is(err, syscall.ECONNRESET)) {
			t.Errorf("read from the accept-close listener: %d bytes, %v; want EOF or a reset", n, err)
		}
		c.Close()
	}
	testwait.Until(t, "3 accepts counted", func() bool { return accepts.count() == 3 })
}

func TestBlackHoleAcceptsAndNeverAnswers(t *testing.T) {
	var accepts events
	b, err := testnet.Listen(true, accepts.now)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", b.Addr(), readBound)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("a TChannel init request, say")); err != nil {
		t.Fatal(err)
	}
	// Silence is the behaviour under test: a read must time out.
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	var ne net.Error
	if _, err := c.Read(make([]byte, 1)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("read from the black hole: %v, want a timeout", err)
	}
	testwait.Until(t, "1 accept counted", func() bool { return accepts.count() == 1 })
	b.Close() // closes the held connection
	c.SetReadDeadline(time.Now().Add(readBound))
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("read after Close: %v, want the connection closed", err)
	}
}

func TestDialerCountsEveryAttemptAndDialsOnlyLoopback(t *testing.T) {
	addr, err := refusedAddr()
	if err != nil {
		t.Fatal(err)
	}
	p := &point{addr: addr}
	f := &peers{points: []*point{p}}
	ctx, cancel := context.WithTimeout(context.Background(), readBound)
	defer cancel()
	start := time.Now()
	for i := 0; i < 2; i++ {
		if c, err := f.dial(ctx, "tcp", addr); err == nil {
			c.Close()
			t.Fatalf("dial %s succeeded, want refused", addr)
		}
	}
	_, err = f.dial(ctx, "tcp", "192.0.2.1:4040")
	if err == nil || !strings.Contains(err.Error(), "only targets 127.0.0.1") {
		t.Errorf("dial 192.0.2.1:4040: %v, want a refusal naming 127.0.0.1", err)
	}
	all, after, truncated := p.dials.countSince(start)
	if all != 2 || after != 2 || truncated {
		t.Errorf("%d attempts to %s, %d since the start, truncated %v; want 2, all counted", all, addr, after, truncated)
	}
}

func TestEventsCountSince(t *testing.T) {
	var e events
	t0 := time.Now()
	for i := 0; i < 5; i++ {
		e.add(t0.Add(time.Duration(i) * time.Second))
	}
	if _, n, tr := e.countSince(t0.Add(2 * time.Second)); n != 3 || tr {
		t.Errorf("countSince(t0+2s) = %d, %v; want 3, false", n, tr)
	}
	e.reset()
	if e.count() != 0 {
		t.Errorf("count after reset = %d", e.count())
	}
	var nilLog *events
	if nilLog.count() != 0 {
		t.Error("a nil log counts something")
	}
}

// count returns how many occurrences were recorded.
func (e *events) count() int {
	n, _, _ := e.countSince(time.Time{})
	return n
}
