package tchconn

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/connlimit"
	"github.com/sluice-rpc/sluice/internal/testwait"
	"github.com/sluice-rpc/sluice/internal/tframe"
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
	return s
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

// peer is a hand-made TChannel peer on a raw socket: it sends any frame.
type peer struct {
	t *testing.T
	net.Conn
}

func dial(t *testing.T, addr string) *peer {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &peer{t: t, Conn: c}
}

// handshake sends an init request and reads the init response.
func (p *peer) handshake() {
	p.t.Helper()
	p.send(tframe.AppendInit(nil, tframe.InitReq, 1, tframe.Init{Version: 2, Params: tframe.InitParams("0.0.0.0:0", "attacker")}))
	if f := p.read(); f.Type != tframe.InitRes {
		p.t.Fatalf("handshake: got a %v frame, want an init res", f.Type)
	}
}

func (p *peer) send(frames ...[]byte) {
	p.t.Helper()
	for _, f := range frames {
		if _, err := p.Write(f); err != nil {
			p.t.Fatalf("send: %v", err)
		}
	}
}

// frame is a frame read back, with an error frame's code and message.
type frame struct {
	tframe.Header
	code byte
	msg  string
}

// read reads one frame, failing the test if none comes within the limit.
func (p *peer) read() frame {
	p.t.Helper()
	f, err := p.tryRead()
	if err != nil {
		p.t.Fatalf("read a frame: %v", err)
	}
	return f
}

func (p *peer) tryRead() (frame, error) {
	p.SetReadDeadline(time.Now().Add(testwait.Limit))
	var h [tframe.HeaderSize]byte
	if _, err := io.ReadFull(p, h[:]); err != nil {
		return frame{}, err
	}
	f := frame{Header: tframe.ParseHeader(h[:])}
	body := make([]byte, int(f.Size)-tframe.HeaderSize)
	if _, err := io.ReadFull(p, body); err != nil {
		return frame{}, err
	}
	if f.Type == tframe.Error && len(body) >= 1+tframe.TracingSize+2 {
		f.code = body[0]
		n := binary.BigEndian.Uint16(body[1+tframe.TracingSize:])
		f.msg = string(body[1+tframe.TracingSize+2:][:n])
	}
	return f, nil
}

// closedByServer reads until the server closes the connection, failing
// the test if it does not.
func (p *peer) closedByServer() {
	p.t.Helper()
	for {
		if _, err := p.tryRead(); err != nil {
			if errors.Is(err, io.EOF) || isClosed(err) {
				return
			}
			p.t.Fatalf("waiting for the server to close the connection: %v", err)
		}
	}
}

func isClosed(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && !ne.Timeout() || errors.Is(err, io.ErrUnexpectedEOF)
}

// callReq is a raw call request of method on service "s".
func callReq(id uint32, method string, more bool, arg3 []byte) []byte {
	return tframe.AppendCallReq(nil, id, tframe.Call{TTL: 120_000, Service: "s",
		Headers:  [][2]string{{"as", "raw"}, {"cn", "attacker"}},
		Fragment: tframe.Fragment{More: more, Chunks: [][]byte{[]byte(method), nil, arg3}}})
}

func fragment(id uint32, more bool, arg3 []byte) []byte {
	return tframe.AppendContinue(nil, tframe.CallReqContinue, id, tframe.Fragment{More: more, Chunks: [][]byte{arg3}})
}
