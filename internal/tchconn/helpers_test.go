package tchconn

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/connlimit"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/internal/testkit/tpeer"
	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/raw"
)

// server is a plain tchannel-go server of service "s" behind a Guard on a
// fake clock, with an echo method and a "read" method that reports how
// reading its arguments ended.
type server struct {
	t     *testing.T
	g     *Guard
	clk   *clock.Fake
	tch   *tchannel.Channel
	reads chan error // one per call of "read"

	mu     sync.Mutex
	events []Event
}

func startServer(t *testing.T, lim Limits) *server {
	t.Helper()
	s := &server{t: t, clk: clock.NewFake(time.Unix(1000, 0)), reads: make(chan error, 100)}
	g, err := New(Config{Limits: lim, Clock: s.clk, OnEvent: func(e Event) {
		s.mu.Lock()
		s.events = append(s.events, e)
		s.mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	s.g = g
	tch, err := tchannel.NewChannel("s", &tchannel.ChannelOptions{
		DefaultConnectionOptions: tchannel.ConnectionOptions{PropagateCancel: true}})
	if err != nil {
		t.Fatal(err)
	}
	s.tch = tch
	tch.Register(raw.Wrap(echo{}), "echo")
	tch.Register(tchannel.HandlerFunc(func(ctx context.Context, call *tchannel.InboundCall) {
		var a2, a3 []byte
		err := tchannel.NewArgReader(call.Arg2Reader()).Read(&a2)
		if err == nil {
			err = tchannel.NewArgReader(call.Arg3Reader()).Read(&a3)
		}
		s.reads <- err
		if err == nil {
			raw.WriteResponse(call.Response(), &raw.Res{Arg3: []byte("read")})
		}
	}), "read")
	serveGuarded(t, g, tch)
	return s
}

// serveGuarded serves tch on 127.0.0.1 behind g, as a Sluice server's
// listener does, until the test ends.
func serveGuarded(t *testing.T, g *Guard, tch *tchannel.Channel) {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := connlimit.Listen(inner, connlimit.Config{Gate: func(c *connlimit.Conn) (net.Conn, error) { return g.Gate(c, c) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := tch.Serve(l); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		tch.Close()
		<-tch.ClosedChan()
		g.Close()
	})
}

func (s *server) addr() string { return s.tch.PeerInfo().HostPort }

func (s *server) eventsOf(kind EventKind) []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Event
	for _, e := range s.events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// tick moves the fake clock by the Guard's sweep interval n times, each
// time waiting for the sweep to be done (the sweeper armed its next tick).
func (s *server) tick(n int) {
	s.t.Helper()
	tick := min(time.Second, max(s.g.lim.StallTimeout/4, time.Millisecond))
	for range n {
		testwait.Timers(s.t, s.clk, 1)
		s.clk.Add(tick)
	}
	testwait.Timers(s.t, s.clk, 1)
}

// call makes a raw call to method through a plain tchannel-go client.
func (s *server) call(method string, arg3 []byte) ([]byte, error) {
	s.t.Helper()
	client, err := tchannel.NewChannel("c", nil)
	if err != nil {
		s.t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Limit)
	defer cancel()
	_, res, _, err := raw.Call(ctx, client, s.addr(), "s", method, nil, arg3)
	return res, err
}

type echo struct{}

func (echo) Handle(_ context.Context, a *raw.Args) (*raw.Res, error) {
	return &raw.Res{Arg2: a.Arg2, Arg3: a.Arg3}, nil
}
func (echo) OnError(context.Context, error) {}

func dial(t *testing.T, addr string) *tpeer.Peer { return tpeer.Dial(t, addr) }

// callReq is a raw call request of method on service "s".
func callReq(id uint32, method string, more bool, arg3 []byte) []byte {
	return tpeer.CallReq(id, "s", method, more, arg3)
}

var fragment = tpeer.Fragment

// checkedFrames is a tchannel-go frame pool that notes a frame released
// twice, with the stack of the second release. It never reuses a frame:
// reused, a frame released twice could be live again at its second
// release, which would go unnoticed, and two connections would share it.
// tchannel-go's CheckedFramePoolForTest does the same but also records
// each Get's stack, which slowed FuzzFrames 3.7x, and its CheckEmpty reads
// the headers of frames in use, a data race.
type checkedFrames struct {
	mu   sync.Mutex
	live map[*tchannel.Frame]struct{}
	bad  []string
}

func newCheckedFrames() *checkedFrames {
	return &checkedFrames{live: map[*tchannel.Frame]struct{}{}}
}

func (p *checkedFrames) Get() *tchannel.Frame {
	f := tchannel.NewFrame(tchannel.MaxFramePayloadSize)
	p.mu.Lock()
	p.live[f] = struct{}{}
	p.mu.Unlock()
	return f
}

func (p *checkedFrames) Release(f *tchannel.Frame) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.live[f]; !ok {
		buf := make([]byte, 8<<10)
		p.bad = append(p.bad, fmt.Sprintf("frame %v released again at:\n%s", f.Header, buf[:runtime.Stack(buf, false)]))
		return
	}
	delete(p.live, f)
}

// takeBad returns the double releases noted since its last call.
func (p *checkedFrames) takeBad() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	bad := p.bad
	p.bad = nil
	return bad
}
