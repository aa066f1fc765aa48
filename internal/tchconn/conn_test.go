package tchconn

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/internal/testkit/tpeer"
	"github.com/sluice-rpc/sluice/internal/tframe"
	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/raw"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const chunk = 60_000 // an argument chunk that fills most of a frame

// TestCallsThroughGuardedConnections calls a guarded server through a
// guarded client: calls of every size up to many fragments, concurrent, and
// pings, all pass unchanged.
func TestCallsThroughGuardedConnections(t *testing.T) {
	s := startServer(t, Limits{})
	g, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	client, err := tchannel.NewChannel("c", &tchannel.ChannelOptions{Dialer: func(ctx context.Context, network, hp string) (net.Conn, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, network, hp)
		if err != nil {
			return nil, err
		}
		return g.Client(nc), nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Limit)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i, size := range []int{0, 1, 511, 512, 513, 65_000, 65_536, 200_000, 3 << 20} {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				body := bytes.Repeat([]byte{byte(i)}, size)
				_, got, _, err := raw.Call(ctx, client, s.addr(), "s", "echo", []byte("h"), body)
				if err == nil && !bytes.Equal(got, body) {
					err = errors.New("echo changed the body")
				}
				if err != nil {
					errs <- err
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := client.Ping(ctx, s.addr()); err != nil {
		t.Fatal(err)
	}
	if n := s.g.Unfinished(); n != 0 {
		t.Fatalf("%d bytes of unfinished requests after every call returned", n)
	}
	if evs := append(s.eventsOf(InvalidFrame), s.eventsOf(RequestRefused)...); len(evs) > 0 {
		t.Fatalf("events on good traffic: %v", evs)
	}
}

// TestInvalidFramesCloseOnlyTheirConnection sends each frame that crashes
// a plain tchannel-go server, and other broken frames: each closes its
// connection, with a protocol error and an event naming the peer, and the
// server goes on serving.
func TestInvalidFramesCloseOnlyTheirConnection(t *testing.T) {
	s := startServer(t, Limits{})
	cases := []struct {
		name   string
		frames [][]byte
		reason string
	}{
		{"checksum type 4", [][]byte{tframe.AppendCallReq(nil, 2, tframe.Call{TTL: 1000, Service: "s",
			Fragment: tframe.Fragment{ChecksumType: 4, Chunks: [][]byte{[]byte("echo"), nil, nil}}})}, "checksum type is 4"},
		{"no argument chunk", [][]byte{tframe.AppendCallReq(nil, 2, tframe.Call{TTL: 1000, Service: "s"})}, "no argument chunk"},
		{"continuation without chunks", [][]byte{callReq(2, "read", true, nil),
			tframe.AppendContinue(nil, tframe.CallReqContinue, 2, tframe.Fragment{})}, "no argument chunk"},
		{"size field below a header", [][]byte{{0, 5, 3, 0, 0, 0, 0, 1}}, "smaller than a frame header"},
		{"unknown type", [][]byte{tframe.Append(nil, 0x42, 2, nil)}, "unknown frame type"},
		{"second init", [][]byte{tframe.AppendInit(nil, tframe.InitReq, 2, tframe.Init{Version: 2})}, "init frame after the handshake"},
		{"response with checksum type 9", [][]byte{tframe.AppendCallRes(nil, 2, tframe.Call{
			Fragment: tframe.Fragment{ChecksumType: 9, Chunks: [][]byte{nil}}})}, "checksum type is 9"},
		{"arg1 alone in a first fragment with more to follow", [][]byte{tframe.AppendCallReq(nil, 2, tframe.Call{TTL: 1000, Service: "s",
			Fragment: tframe.Fragment{More: true, Chunks: [][]byte{[]byte("echo")}}})}, "carries only arg1's chunk"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := dial(t, s.addr())
			p.Handshake()
			p.Send(tc.frames...)
			f := p.Next()
			if f.Type != tframe.Error || f.Code != errCodeProtocol || !strings.Contains(f.Message, tc.reason) {
				t.Fatalf("got a %v frame, code %#x, %q; want a protocol error saying %q", f.Type, f.Code, f.Message, tc.reason)
			}
			p.ClosedByServer()
			if _, err := s.call("echo", []byte("still serving")); err != nil {
				t.Fatalf("a new client's call after the frame: %v", err)
			}
		})
	}
	evs := s.eventsOf(InvalidFrame)
	if len(evs) != len(cases) {
		t.Fatalf("%d invalid-frame events, want %d", len(evs), len(cases))
	}
	for _, e := range evs {
		if !e.Inbound || !strings.HasPrefix(e.Peer, "127.0.0.1:") || e.Err == nil {
			t.Errorf("event %+v does not name the inbound peer and the error", e)
		}
	}
}

// TestPlainTChannelReleasesASplitArg1Twice is why a call request's first
// fragment must hold arg1 whole: a plain tchannel-go server that reads
// arg1 up to the end of such a fragment, and whose next fragment never
// comes, returns the frame to its pool twice. Two later frames then share
// one buffer: another connection's call is overwritten (FuzzFrames saw
// "no handler for method 0000" answer a valid call), or the process dies.
// If this test fails, tchannel-go no longer does it, and the check in
// tframe.Parse could go.
func TestPlainTChannelReleasesASplitArg1Twice(t *testing.T) {
	pool := newCheckedFrames()
	tch, err := tchannel.NewChannel("s", &tchannel.ChannelOptions{
		DefaultConnectionOptions: tchannel.ConnectionOptions{FramePool: pool}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		tch.Close()
		<-tch.ClosedChan()
	}()
	tch.Register(raw.Wrap(echo{}), "echo")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := tch.Serve(l); err != nil {
		t.Fatal(err)
	}
	p := dial(t, tch.PeerInfo().HostPort)
	p.Handshake()
	p.Send(tframe.AppendCallReq(nil, 2, tframe.Call{TTL: 1000, Service: "s", Headers: [][2]string{{"as", "raw"}, {"cn", "c"}},
		Fragment: tframe.Fragment{More: true, Chunks: [][]byte{[]byte("echo")}}}))
	p.Close()
	testwait.Until(t, "tchannel-go to release the call's frame twice", func() bool {
		return len(pool.takeBad()) > 0
	})
}

func TestFirstFrameMustBeAnInitRequest(t *testing.T) {
	s := startServer(t, Limits{})
	for name, f := range map[string][]byte{
		"call before init": callReq(1, "echo", false, nil),
		"init res":         tframe.AppendInit(nil, tframe.InitRes, 1, tframe.Init{Version: 2}),
		"huge init":        tframe.AppendInit(nil, tframe.InitReq, 1, tframe.Init{Version: 2, Params: [][2]string{{"k", strings.Repeat("v", 10_000)}}}),
	} {
		t.Run(name, func(t *testing.T) {
			p := dial(t, s.addr())
			p.Send(f)
			p.ClosedByServer()
		})
	}
	if _, err := s.call("echo", nil); err != nil {
		t.Fatal(err)
	}
}

// TestClientSurvivesAHostileServer has a server answer a guarded
// tchannel-go client's call with a response that crashes a plain client:
// the call fails with an error, and the connection is closed.
func TestClientSurvivesAHostileServer(t *testing.T) {
	for name, res := range map[string]func(id uint32) []byte{
		"checksum type 4": func(id uint32) []byte {
			return tframe.AppendCallRes(nil, id, tframe.Call{Fragment: tframe.Fragment{ChecksumType: 4, Chunks: [][]byte{nil, nil, nil}}})
		},
		"no argument chunk": func(id uint32) []byte { return tframe.AppendCallRes(nil, id, tframe.Call{}) },
	} {
		t.Run(name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			served := make(chan error, 1)
			go func() { served <- hostile(l, res) }()
			g, err := New(Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			client, err := tchannel.NewChannel("c", &tchannel.ChannelOptions{Dialer: func(ctx context.Context, network, hp string) (net.Conn, error) {
				var d net.Dialer
				nc, err := d.DialContext(ctx, network, hp)
				if err != nil {
					return nil, err
				}
				return g.Client(nc), nil
			}})
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, _, _, err = raw.Call(ctx, client, l.Addr().String(), "s", "echo", nil, nil)
			if err == nil {
				t.Fatal("the call succeeded")
			}
			if ctx.Err() != nil {
				t.Fatalf("the call waited out its deadline (%v); want an error when the frame came", err)
			}
			if err := testwait.Recv(t, served, "the hostile server"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// hostile accepts one connection, completes the handshake, and answers
// the first call request with res(id); then it waits for the close.
func hostile(l net.Listener, res func(uint32) []byte) error {
	c, err := l.Accept()
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(testwait.Limit))
	for {
		f, err := tpeer.ReadFrame(c)
		if err != nil {
			return err
		}
		switch f.Type {
		case tframe.InitReq:
			c.Write(tframe.AppendInit(nil, tframe.InitRes, f.ID, tframe.Init{Version: 2, Params: tframe.InitParams("127.0.0.1:1", "hostile")}))
		case tframe.CallReq:
			c.Write(res(f.ID))
			for {
				if _, err := tpeer.ReadFrame(c); err != nil {
					return nil // closed by the client
				}
			}
		}
	}
}

// TestUnfinishedRequestsPerConnection fills a connection's budget of
// unfinished requests: a request whose first fragment is over budget is
// refused with BUSY before tchannel-go sees it, and a request whose later
// fragment is over budget is dropped, with BUSY to the peer and a cancel to
// its handler. The connection serves on.
func TestUnfinishedRequestsPerConnection(t *testing.T) {
	s := startServer(t, Limits{MaxUnfinishedPerConn: 200_000, StallTimeout: -1})
	p := dial(t, s.addr())
	p.Handshake()
	body := make([]byte, chunk)
	p.Send(callReq(2, "read", true, body), fragment(2, true, body), fragment(2, true, body)) // about 180 KB
	testwait.Until(t, "request 2 to be charged", func() bool { return s.g.Unfinished() > 170_000 })

	p.Send(callReq(3, "read", true, body)) // 240 KB with it: refused
	f := p.Next()
	if f.Type != tframe.Error || f.Code != errCodeBusy || f.ID != 3 || !strings.Contains(f.Message, "unfinished requests") {
		t.Fatalf("got %v code %#x id %d %q, want BUSY for request 3", f.Type, f.Code, f.ID, f.Message)
	}
	if len(s.eventsOf(RequestRefused)) != 1 {
		t.Fatal("the refusal was not reported")
	}
	p.Send(fragment(3, false, body)) // swallowed: tchannel-go never saw request 3

	p.Send(fragment(2, true, body)) // 240 KB: request 2 is dropped
	f = p.Next()
	if f.Type != tframe.Error || f.Code != errCodeBusy || f.ID != 2 {
		t.Fatalf("got %v code %#x id %d %q, want BUSY for request 2", f.Type, f.Code, f.ID, f.Message)
	}
	if err := testwait.Recv(t, s.reads, "request 2's handler to end"); err == nil {
		t.Fatal("the dropped request's handler read its arguments whole")
	}
	if n := s.g.Unfinished(); n != 0 {
		t.Fatalf("%d bytes still charged", n)
	}
	if len(s.eventsOf(RequestDropped)) != 1 {
		t.Fatal("the drop was not reported")
	}
	select {
	case err := <-s.reads:
		t.Fatalf("a handler ran for the refused request: %v", err)
	default:
	}
	p.Send(callReq(9, "echo", false, []byte("ok")))
	if f := p.Next(); f.ID != 9 || f.Type != tframe.CallRes {
		t.Fatalf("a small call on the same connection: %v id %d %q", f.Type, f.ID, f.Message)
	}
}

// TestRequestStalled stops sending a request's fragments: after
// StallTimeout it is dropped with TIMEOUT, whatever its TTL (120 s), its
// handler is cancelled and its bytes released.
func TestRequestStalled(t *testing.T) {
	s := startServer(t, Limits{StallTimeout: 4 * time.Second})
	p := dial(t, s.addr())
	p.Handshake()
	p.Send(callReq(2, "read", true, make([]byte, chunk)))
	testwait.Until(t, "the request to be charged", func() bool { return s.g.Unfinished() > 0 })
	s.tick(3)
	if s.g.Unfinished() == 0 {
		t.Fatal("the request was dropped before StallTimeout")
	}
	s.tick(1)
	f := p.Next()
	if f.Type != tframe.Error || f.Code != errCodeTimeout || f.ID != 2 || !strings.Contains(f.Message, "stopped coming") {
		t.Fatalf("got %v code %#x id %d %q, want TIMEOUT for request 2", f.Type, f.Code, f.ID, f.Message)
	}
	if err := testwait.Recv(t, s.reads, "the handler's read to end"); err == nil {
		t.Fatal("the stalled request's handler read its arguments whole")
	}
	if n := s.g.Unfinished(); n != 0 {
		t.Fatalf("%d bytes still charged", n)
	}
	if len(s.eventsOf(RequestStalled)) != 1 {
		t.Fatal("the stall was not reported")
	}
	// Its late fragments are swallowed, and the connection serves on.
	p.Send(fragment(2, false, []byte("late")), callReq(3, "echo", false, []byte("ok")))
	if f := p.Next(); f.ID != 3 || f.Type != tframe.CallRes {
		t.Fatalf("after the drop: %v id %d %q", f.Type, f.ID, f.Message)
	}
}

// TestFrameStalled sends half a frame: after StallTimeout the connection
// is closed.
func TestFrameStalled(t *testing.T) {
	s := startServer(t, Limits{StallTimeout: 4 * time.Second})
	p := dial(t, s.addr())
	p.Handshake()
	f := callReq(2, "echo", false, make([]byte, chunk))
	p.Send(f[:len(f)/2])
	testwait.Until(t, "the reader to wait for the rest", func() bool {
		s.g.mu.Lock()
		defer s.g.mu.Unlock()
		for c := range s.g.conns {
			if c.partialSince.Load() != 0 {
				return true
			}
		}
		return false
	})
	s.tick(5)
	p.ClosedByServer()
	if len(s.eventsOf(FrameStalled)) != 1 {
		t.Fatal("the stalled frame was not reported")
	}
}

// TestFairShareOfTheBudget has two connections spend the Guard's budget;
// a third, under its share, still gets its request in: the largest
// request of the connection holding the most is dropped to make room.
func TestFairShareOfTheBudget(t *testing.T) {
	s := startServer(t, Limits{MaxUnfinished: 400_000, MaxUnfinishedPerConn: 300_000, StallTimeout: -1})
	body := make([]byte, chunk)
	hog := dial(t, s.addr())
	hog.Handshake()
	hog.Send(callReq(2, "read", true, body), fragment(2, true, body), fragment(2, true, body), fragment(2, true, body)) // ~240 KB
	other := dial(t, s.addr())
	other.Handshake()
	other.Send(callReq(2, "read", true, body), fragment(2, true, body)) // ~120 KB
	testwait.Until(t, "both to be charged", func() bool { return s.g.Unfinished() > 350_000 })

	p := dial(t, s.addr())
	p.Handshake()
	p.Send(callReq(2, "read", true, body)) // over the total, under a third of it
	f := hog.Next()
	if f.Type != tframe.Error || f.Code != errCodeBusy || f.ID != 2 || !strings.Contains(f.Message, "make room") {
		t.Fatalf("the hog got %v code %#x id %d %q, want BUSY for request 2", f.Type, f.Code, f.ID, f.Message)
	}
	p.Send(fragment(2, false, []byte("end")))
	if err := testwait.Recv(t, s.reads, "a handler's read to end"); err != nil {
		// The hog's handler ended first; the newcomer's must succeed.
		if err := testwait.Recv(t, s.reads, "the newcomer's handler"); err != nil {
			t.Fatalf("the newcomer's request: %v", err)
		}
	}
	for {
		f := p.Next()
		if f.ID == 2 {
			if f.Type != tframe.CallRes {
				t.Fatalf("the newcomer's request: %v code %#x %q", f.Type, f.Code, f.Message)
			}
			break
		}
	}
}

// TestAnsweredEarly has the server answer a request before its last
// fragment: its bytes are released at once and its later fragments are
// swallowed.
func TestAnsweredEarly(t *testing.T) {
	s := startServer(t, Limits{StallTimeout: -1})
	p := dial(t, s.addr())
	p.Handshake()
	p.Send(callReq(2, "no-such-method", true, make([]byte, chunk)))
	f := p.Next()
	if f.Type != tframe.Error || f.ID != 2 {
		t.Fatalf("got %v id %d %q, want an error for the unknown method", f.Type, f.ID, f.Message)
	}
	testwait.Until(t, "the answered request's bytes to be released", func() bool { return s.g.Unfinished() == 0 })
	p.Send(fragment(2, true, make([]byte, chunk)), fragment(2, false, nil), callReq(3, "echo", false, nil))
	if f := p.Next(); f.ID != 3 || f.Type != tframe.CallRes {
		t.Fatalf("after the early answer: %v id %d %q", f.Type, f.ID, f.Message)
	}
	if n := s.g.Unfinished(); n != 0 {
		t.Fatalf("%d bytes charged for fragments of an answered request", n)
	}
}

func TestCallsPerConnection(t *testing.T) {
	g, err := New(Config{Limits: Limits{MaxCallsPerConn: 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c := g.Client(a)
	first, second := c.BeginCall(), c.BeginCall()
	if !first || !second {
		t.Fatal("a call within the limit was refused")
	}
	if c.BeginCall() {
		t.Fatal("a third call was admitted over a limit of 2")
	}
	c.EndCall()
	if !c.BeginCall() {
		t.Fatal("a call was refused after one ended")
	}
}

func TestLimitsValidate(t *testing.T) {
	if err := (Limits{MaxUnfinishedPerConn: 10, MaxUnfinished: 5}).Validate(); err == nil || !strings.Contains(err.Error(), "MaxUnfinishedPerConn") {
		t.Fatalf("Validate = %v, want an error naming MaxUnfinishedPerConn", err)
	}
	if _, err := New(Config{Limits: Limits{MaxUnfinished: 1}}); err == nil {
		t.Fatal("New accepted a per-connection budget above the total")
	}
}

// A first frame that is not an init request is answered with the Guard's
// protocol error, before tchannel-go sees it, and reported.
func TestFirstFrameIsCheckedByTheGuard(t *testing.T) {
	s := startServer(t, Limits{})
	p := dial(t, s.addr())
	p.Send(callReq(1, "echo", false, nil))
	f := p.Next()
	if f.Type != tframe.Error || f.Code != errCodeProtocol || !strings.Contains(f.Message, "the first frame must be an init req") {
		t.Fatalf("got %v code %#x %q, want the Guard's protocol error", f.Type, f.Code, f.Message)
	}
	p.ClosedByServer()
	testwait.Until(t, "the event", func() bool { return len(s.eventsOf(InvalidFrame)) == 1 })
}

// Requests refused at their first fragment leave nothing behind: their
// later fragments are swallowed as fragments nothing expects.
func TestRefusedRequestsLeaveNoEntries(t *testing.T) {
	s := startServer(t, Limits{MaxUnfinishedPerConn: minRequest, StallTimeout: -1})
	p := dial(t, s.addr())
	p.Handshake()
	p.Send(callReq(2, "read", true, []byte("x"))) // fills the budget: charged minRequest
	testwait.Until(t, "the first request to be charged", func() bool { return s.g.Unfinished() == minRequest })
	const refused = 1000
	for id := uint32(3); id < 3+refused; id++ {
		p.Send(callReq(id, "read", true, []byte("x")))
	}
	for range refused {
		if f := p.Next(); f.Type != tframe.Error || f.Code != errCodeBusy {
			t.Fatalf("got %v code %#x %q, want BUSY", f.Type, f.Code, f.Message)
		}
	}
	s.g.mu.Lock()
	n := 0
	for c := range s.g.conns {
		n += len(c.reqs)
	}
	s.g.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d requests tracked after %d refusals, want 1 (the one in flight)", n, refused)
	}
}

// A request in flight is charged at least minRequest, whatever its first
// fragment's size: tiny fragments cannot buy many requests in flight.
func TestTinyRequestsAreChargedTheirCost(t *testing.T) {
	s := startServer(t, Limits{StallTimeout: -1})
	p := dial(t, s.addr())
	p.Handshake()
	p.Send(callReq(2, "read", true, nil), callReq(3, "read", true, nil))
	testwait.Until(t, "two requests charged at their cost", func() bool { return s.g.Unfinished() == 2*minRequest })
}

// Frames read after the connection was forgotten (closing) are not
// charged: nothing would release them.
func TestNothingIsChargedAfterForget(t *testing.T) {
	g, err := New(Config{Limits: Limits{StallTimeout: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c := g.Client(a)
	c.first = false
	c.forget()
	fr, err := tframe.Parse(callReq(2, "read", true, nil))
	if err != nil {
		t.Fatal(err)
	}
	c.request(fr, callReq(2, "read", true, nil))
	if n := g.Unfinished(); n != 0 {
		t.Fatalf("%d bytes charged to a forgotten connection", n)
	}
}

// A connection's buffer grows with the bytes that came, not with what a
// frame's size field claims.
func TestBufferGrowsWithTheBytesThatCame(t *testing.T) {
	for _, tc := range []struct {
		name     string
		first    bool
		size     int // the size field
		sent     int // bytes of the frame sent
		wantSize int // the buffer's size once they are read
	}{
		{"a size field alone", false, tframe.MaxSize, 2, smallSize},
		{"a small buffer's worth", false, tframe.MaxSize, smallSize + 1, midSize},
		{"a mid buffer's worth", false, tframe.MaxSize, midSize + 1, bigSize},
		{"an init frame's size field alone", true, MaxInitSize, 2, smallSize},
		{"an init frame past the mid buffer", true, MaxInitSize, midSize + 1, MaxInitSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := New(Config{Limits: Limits{StallTimeout: -1}})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			server, client := net.Pipe()
			defer server.Close()
			defer client.Close()
			c := g.Client(server)
			c.first = tc.first
			frame := make([]byte, tc.sent)
			frame[0], frame[1] = byte(tc.size>>8), byte(tc.size)
			go client.Write(frame)
			for c.w < tc.sent {
				if err := c.fill(); err != nil {
					t.Fatal(err)
				}
			}
			if len(c.buf) != tc.wantSize {
				t.Fatalf("%d bytes of a %d-byte frame read: a buffer of %d, want %d", tc.sent, tc.size, len(c.buf), tc.wantSize)
			}
		})
	}
}

// Making room for a connection under its share drops as many of the
// hog's requests as it takes, not one.
func TestFairShareMakesEnoughRoom(t *testing.T) {
	s := startServer(t, Limits{MaxUnfinished: 6 * minRequest, MaxUnfinishedPerConn: 6 * minRequest, StallTimeout: -1})
	hog := dial(t, s.addr())
	hog.Handshake()
	for id := uint32(2); id < 8; id++ {
		hog.Send(callReq(id, "read", true, nil)) // six tiny requests: the whole budget
	}
	testwait.Until(t, "the hog to fill the budget", func() bool { return s.g.Unfinished() == 6*minRequest })
	p := dial(t, s.addr())
	p.Handshake()
	p.Send(callReq(2, "read", true, make([]byte, 2*minRequest+100))) // needs three of the hog's
	testwait.Until(t, "the newcomer to be charged", func() bool {
		s.g.mu.Lock()
		defer s.g.mu.Unlock()
		return len(s.g.holding) == 2
	})
	if n, max := s.g.Unfinished(), int64(6*minRequest); n > max {
		t.Fatalf("%d bytes charged, over the budget of %d", n, max)
	}
	for range 3 {
		if f := hog.Next(); f.Type != tframe.Error || f.Code != errCodeBusy {
			t.Fatalf("the hog got %v code %#x %q, want BUSY", f.Type, f.Code, f.Message)
		}
	}
}

// A connection closed for a frame that stopped coming ends its reads with
// a protocol error, so that a client backs off from such a server.
func TestStalledFrameIsAProtocolError(t *testing.T) {
	s := startServer(t, Limits{StallTimeout: 4 * time.Second})
	g, err := New(Config{Clock: s.clk, Limits: Limits{StallTimeout: 4 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	server, client := net.Pipe()
	defer client.Close()
	c := g.Client(server)
	c.first = false
	f := callReq(2, "echo", false, make([]byte, 1000))
	go client.Write(f[:600])
	read := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 10))
		read <- err
	}()
	testwait.Until(t, "the reader to wait for the rest", func() bool { return c.partialSince.Load() != 0 })
	for range 5 {
		testwait.Timers(t, s.clk, 2) // the server's Guard's sweep and this one's
		s.clk.Add(time.Second)
	}
	err = testwait.Recv(t, read, "the read to end")
	var pe *tframe.ProtocolError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "stopped coming") {
		t.Fatalf("read: %v, want a protocol error saying the frame stopped coming", err)
	}
}

// tchannel-go sets socket options through syscall.Conn, and logs an error
// for every connection without it: a Conn, over a TCP socket or a
// listener's connlimit.Conn, still gives the socket's raw connection.
func TestConnExposesTheSocket(t *testing.T) {
	g, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	nc, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var conn net.Conn = g.Client(nc)
	sc, ok := conn.(syscall.Conn)
	if !ok {
		t.Fatal("a Conn is not a syscall.Conn")
	}
	if _, err := sc.SyscallConn(); err != nil {
		t.Fatalf("SyscallConn: %v", err)
	}
}

// A TLS client on a plaintext port is answered at once, with an error
// frame saying what happened, instead of waiting out the handshake
// timeout: the bytes of its ClientHello read as the start of an init
// frame of 0x1603 bytes that would never be whole.
func TestTLSClientOnAPlaintextPort(t *testing.T) {
	s := startServer(t, Limits{})
	p := dial(t, s.addr())
	// A TLS record of 600 bytes (more than the first read takes) that
	// begins like a ClientHello.
	record := append([]byte{0x16, 0x03, 0x01, 0x02, 0x58, 0x01, 0x00, 0x02, 0x54, 0x03, 0x03}, make([]byte, 594)...)
	p.Send(record)
	f := p.Next()
	if f.Type != tframe.Error || !strings.Contains(f.Message, "a TLS client on a plaintext TChannel port") {
		t.Fatalf("the answer to a ClientHello: %v %q, want an error frame naming TLS", f.Type, f.Message)
	}
	// The whole record was read before the close: the socket closes
	// cleanly, not with a reset that could lose the answer.
	if _, err := p.TryNext(testwait.Limit); err != io.EOF {
		t.Errorf("after the answer: %v, want EOF", err)
	}
	if evs := s.eventsOf(InvalidFrame); len(evs) != 1 || !strings.Contains(evs[0].Err.Error(), "TLS") {
		t.Errorf("events %+v, want one invalid frame naming TLS", evs)
	}
	if _, err := s.call("echo", nil); err != nil {
		t.Fatal(err)
	}
}

// NetConn gives the connection a Conn wraps: a handler reaches its
// connection's TLS state through it.
func TestNetConn(t *testing.T) {
	g, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if got := g.Client(a).NetConn(); got != a {
		t.Errorf("NetConn() = %v, want the wrapped connection %v", got, a)
	}
}
