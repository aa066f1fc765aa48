package tchconn

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/connlimit"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/internal/tframe"
	"github.com/uber/tchannel-go"
)

// TestAnswersOwedAreBounded has a peer send echo calls of 60 KB and never
// read: once the answers waiting to be written reach MaxAnswerBytes, its
// calls are refused before any handler runs, while another client, under
// its share, is still served; the peer's charge goes when it does.
func TestAnswersOwedAreBounded(t *testing.T) {
	const max = 2 << 20
	s := startServer(t, Limits{MaxAnswerBytes: max, StallTimeout: -1})
	hog := dial(t, s.addr())
	hog.Conn.(*net.TCPConn).SetReadBuffer(16 << 10)
	hog.Handshake()
	body := make([]byte, 60<<10)
	go func() {
		// Far more answers than the sockets' buffers take. The writes
		// stop when the server stops reading, or fail when the test
		// closes the connection.
		hog.SetWriteDeadline(time.Now().Add(testwait.Limit))
		for i := range 300 {
			if _, err := hog.Conn.Write(callReq(uint32(2*i+2), "echo", false, body)); err != nil {
				return
			}
		}
	}()
	testwait.Until(t, "a call refused for the answers owed", func() bool { return len(s.eventsOf(AnswersRefused)) > 0 })
	if got := s.g.Owed(); got > max+max/8 {
		t.Fatalf("%d bytes of answers owed, over the bound %d and its eighth", got, max)
	}
	if res, err := s.call("echo", []byte("legit")); err != nil || string(res) != "legit" {
		t.Fatalf("a client under its share: %q, %v", res, err)
	}
	hog.Close()
	testwait.Until(t, "the peer's charge to go with it", func() bool { return s.g.Owed() == 0 })
}

// TestAnsweredCallsAreReleased: a call's charge goes when its answer is
// written.
func TestAnsweredCallsAreReleased(t *testing.T) {
	s := startServer(t, Limits{StallTimeout: -1})
	for range 3 {
		if _, err := s.call("echo", make([]byte, 100<<10)); err != nil {
			t.Fatal(err)
		}
		if got := s.g.Owed(); got != 0 {
			t.Fatalf("%d bytes still owed after the answer", got)
		}
	}
}

// TestUnansweredCallsAreReleasedBySweep: a call cancelled by its peer and
// left unanswered by its handler is released by the sweep once the
// connection's writer has been idle since; a call still in its handler is
// not.
func TestUnansweredCallsAreReleasedBySweep(t *testing.T) {
	s := startServer(t, Limits{})
	started, ended := make(chan struct{}, 2), make(chan struct{}, 2)
	s.tch.Register(tchannel.HandlerFunc(func(ctx context.Context, call *tchannel.InboundCall) {
		started <- struct{}{}
		<-ctx.Done()
		call.Response().Blackhole()
		ended <- struct{}{}
	}), "hang")
	p := dial(t, s.addr())
	p.Handshake()
	p.Send(callReq(2, "hang", false, nil))
	testwait.Recv(t, started, "the first handler")
	one := s.g.Owed()
	p.Send(callReq(4, "hang", false, nil))
	testwait.Recv(t, started, "the second handler")
	p.Send(tframe.AppendCancel(nil, 2, "caller gave up"))
	testwait.Recv(t, ended, "the cancelled handler to end")
	if got := s.g.Owed(); got != 2*one {
		t.Fatalf("%d bytes owed before the sweep, want both calls' %d", got, 2*one)
	}
	s.tick(3)
	if got := s.g.Owed(); got != one {
		t.Fatalf("%d bytes owed after the sweep, want the running call's %d", got, one)
	}
}

func TestMaxAnswerBytesValidate(t *testing.T) {
	if err := (Limits{MaxAnswerBytes: 10}).Validate(); err == nil || !strings.Contains(err.Error(), "MaxAnswerBytes") {
		t.Fatalf("Validate = %v, want an error naming MaxAnswerBytes", err)
	}
	if err := (Limits{MaxAnswerBytes: -1}).Validate(); err != nil {
		t.Fatalf("Validate with the bound off = %v", err)
	}
}

// TestAnswersMakeRoom: a peer that does not read fills the bound alone;
// a second is admitted under its share up to an eighth over the bound,
// and then the first, owed the most, is closed to make room, so that a
// client that reads its answers is still served.
func TestAnswersMakeRoom(t *testing.T) {
	const max = 2 << 20
	s := startServer(t, Limits{MaxAnswerBytes: max, StallTimeout: -1})
	refused := func(peer string) func() bool {
		return func() bool {
			for _, e := range s.eventsOf(AnswersRefused) {
				if e.Peer == peer {
					return true
				}
			}
			return false
		}
	}
	hog := func() string {
		p := dial(t, s.addr())
		p.Conn.(*net.TCPConn).SetReadBuffer(4 << 10)
		p.Handshake()
		// The server's side too gets small buffers, so that its first
		// answer blocks its writer.
		s.serverSide(p.LocalAddr().String()).SetWriteBuffer(4 << 10)
		body := make([]byte, 30<<10)
		go func() {
			p.SetWriteDeadline(time.Now().Add(testwait.Limit))
			for i := range 100 {
				if _, err := p.Conn.Write(callReq(uint32(2*i+2), "echo", false, body)); err != nil {
					return
				}
			}
		}()
		testwait.Until(t, "a peer's calls past the bound to be refused", refused(p.LocalAddr().String()))
		return p.LocalAddr().String()
	}
	first := hog()
	second := hog()
	if got := s.g.Owed(); got > max+max/8 {
		t.Fatalf("%d bytes of answers owed, over the bound %d and its eighth", got, max)
	}
	// Larger than the peers' calls, which no longer fit under the bound
	// and its eighth.
	if res, err := s.call("echo", make([]byte, 60<<10)); err != nil || len(res) != 60<<10 {
		t.Fatalf("a client that reads its answers: %d bytes, %v", len(res), err)
	}
	// The first, owed the most, is the first closed. The second may follow:
	// until its writer waits on it, it is taken for a peer that reads, is
	// admitted past its share and may be the one that closes the first;
	// it then holds the most, and the reading client's call closes it in
	// turn (1 run in 40 under -race). A peer that reads is never closed.
	ev := s.eventsOf(AnswersUnread)
	if len(ev) == 0 || ev[0].Peer != first {
		t.Fatalf("closed to make room: %v, want the first peer %s first", ev, first)
	}
	for _, e := range ev[1:] {
		if e.Peer != second {
			t.Fatalf("closed to make room: %v, want only the peers that do not read (%s, %s)", ev, first, second)
		}
	}
}

// serverSide returns the server's socket of the connection from peer.
func (s *server) serverSide(peer string) *net.TCPConn {
	s.t.Helper()
	var c *Conn
	testwait.Until(s.t, "the server to hold the connection", func() bool {
		s.g.mu.Lock()
		defer s.g.mu.Unlock()
		for k := range s.g.conns {
			if k.peer == peer {
				c = k
			}
		}
		return c != nil
	})
	return c.Conn.(*connlimit.Conn).Conn.(*net.TCPConn)
}
