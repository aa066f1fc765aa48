package tchconn

import (
	"context"
	"net"
	"sync"
	"testing"

	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/internal/testkit/tpeer"
	"github.com/sluice-rpc/sluice/internal/tframe"
	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/raw"
)

// signalServer is a tchannel-go server of "s" behind a Guard, whose
// handler "conn" hands the test the Conn its call came on.
type signalServer struct {
	g     *Guard
	tch   *tchannel.Channel
	conns chan *Conn
}

func startSignalServer(t *testing.T) *signalServer {
	t.Helper()
	g, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	tch, err := tchannel.NewChannel("s", nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &signalServer{g: g, tch: tch, conns: make(chan *Conn, 10)}
	tch.Register(raw.Wrap(echo{}), "echo")
	tch.Register(tchannel.HandlerFunc(func(ctx context.Context, call *tchannel.InboundCall) {
		s.conns <- call.Connection().(*Conn)
		raw.WriteResponse(call.Response(), &raw.Res{})
	}), "conn")
	serveGuarded(t, g, tch)
	return s
}

func (s *signalServer) addr() string { return s.tch.PeerInfo().HostPort }

// signalClient is a tchannel-go client whose connections go through a
// Guard, as a Sluice client's do; conns has each Conn it dialed.
type signalClient struct {
	tch   *tchannel.Channel
	mu    sync.Mutex
	conns []*Conn
}

func newSignalClient(t *testing.T) *signalClient {
	t.Helper()
	g, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	c := &signalClient{}
	c.tch, err = tchannel.NewChannel("c", &tchannel.ChannelOptions{
		Dialer: func(ctx context.Context, network, hostPort string) (net.Conn, error) {
			var d net.Dialer
			nc, err := d.DialContext(ctx, network, hostPort)
			if err != nil {
				return nil, err
			}
			gc := g.Client(nc)
			c.mu.Lock()
			c.conns = append(c.conns, gc)
			c.mu.Unlock()
			return gc, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.tch.Close()
		<-c.tch.ClosedChan()
		g.Close()
	})
	return c
}

func (c *signalClient) call(t *testing.T, addr, method string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Limit)
	defer cancel()
	if _, _, _, err := raw.Call(ctx, c.tch, addr, "s", method, nil, nil); err != nil {
		t.Fatalf("call %s: %v", method, err)
	}
}

func (c *signalClient) conn(t *testing.T, i int) *Conn {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.conns) <= i {
		t.Fatalf("the client dialed %d connections, want at least %d", len(c.conns), i+1)
	}
	return c.conns[i]
}

// plainClient returns a tchannel-go client without a Guard.
func plainClient(t *testing.T) *tchannel.Channel {
	t.Helper()
	tch, err := tchannel.NewChannel("plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tch.Close)
	return tch
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Two guarded ends announce signals to each other; a plain tchannel-go
// peer at either end leaves the connection unsignalled, and calls work
// every way.
func TestSignalsAreNegotiated(t *testing.T) {
	s := startSignalServer(t)
	c := newSignalClient(t)
	c.call(t, s.addr(), "conn")
	if sc := <-s.conns; !sc.Signalled() {
		t.Error("the server's end of a guarded client's connection is not signalled")
	}
	if !c.conn(t, 0).Signalled() {
		t.Error("a guarded client's connection to a guarded server is not signalled")
	}
	if sig, plain, calls := s.g.Inbound(); sig != 1 || plain != 0 || calls != 0 {
		t.Errorf("Inbound() = %d, %d, %d; want 1 signalled connection and no plain one", sig, plain, calls)
	}

	ctx, cancel := context.WithTimeout(context.Background(), testwait.Limit)
	defer cancel()
	if _, _, _, err := raw.Call(ctx, plainClient(t), s.addr(), "s", "conn", nil, nil); err != nil {
		t.Fatal(err)
	}
	if sc := <-s.conns; sc.Signalled() {
		t.Error("a plain tchannel-go client's connection is signalled")
	}
	if sig, plain, calls := s.g.Inbound(); sig != 1 || plain != 1 || calls != 1 {
		t.Errorf("Inbound() = %d, %d, %d; want 1 signalled connection, 1 plain one and its call", sig, plain, calls)
	}

	plainServer, err := tchannel.NewChannel("s", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plainServer.Close()
	plainServer.Register(raw.Wrap(echo{}), "echo")
	if err := plainServer.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	c.call(t, plainServer.PeerInfo().HostPort, "echo")
	if c.conn(t, 1).Signalled() {
		t.Error("a guarded client's connection to a plain tchannel-go server is signalled")
	}
}

// The init parameters of the carrier reach the other Conn and go no
// further: the frame handed on has them stripped.
func TestSignalParametersAreStripped(t *testing.T) {
	g, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	client := tpeer.New(t, a)
	gated := make(chan *Conn, 1)
	go func() {
		c, err := g.Gate(b, nil)
		if err != nil {
			t.Error(err)
		}
		gated <- c
	}()
	params := append(tframe.InitParams("0.0.0.0:0", "test"), [2]string{paramSignals, signalsV1})
	go client.Send(tframe.AppendInit(nil, tframe.InitReq, 1, tframe.Init{Version: 2, Params: params}))
	sc := testwait.Recv(t, gated, "the gate")
	if !sc.Signalled() {
		t.Fatal("an init request announcing signals did not make the connection signalled")
	}
	f, err := tpeer.ReadFrame(sc)
	if err != nil {
		t.Fatal(err)
	}
	_, handed := tframe.InitParamsOf(append(make([]byte, tframe.HeaderSize), f.Payload...))
	for _, kv := range handed {
		if kv[0] == paramSignals {
			t.Fatalf("the init request handed on still has %v", kv)
		}
	}
	if len(handed) != len(params)-1 {
		t.Fatalf("the init request handed on has %d parameters, want the %d others", len(handed), len(params)-1)
	}

	// The server leaves before its init response is written: the
	// response says so.
	g.Leave()
	go func() {
		if _, err := sc.Write(tframe.AppendInit(nil, tframe.InitRes, 1, tframe.Init{Version: 2, Params: tframe.InitParams("127.0.0.1:1", "s")})); err != nil {
			t.Error(err)
		}
	}()
	res := client.Next()
	_, got := tframe.InitParamsOf(append(make([]byte, tframe.HeaderSize), res.Payload...))
	want := map[string]string{paramSignals: signalsV1, paramDrain: "server"}
	for _, kv := range got {
		if v, ok := want[kv[0]]; ok && v == kv[1] {
			delete(want, kv[0])
		}
	}
	if len(want) > 0 {
		t.Fatalf("the init response's parameters are %v, missing %v", got, want)
	}
}

// Leave reaches the clients of signalled connections at once, and those
// that connect later in their handshake; AskToDrain asks for one
// connection only; a plain client cannot be asked.
func TestDrainSignals(t *testing.T) {
	s := startSignalServer(t)
	c := newSignalClient(t)
	c.call(t, s.addr(), "conn")
	sc := <-s.conns
	if !sc.AskToDrain() {
		t.Fatal("AskToDrain refused a signalled connection")
	}
	cc := c.conn(t, 0)
	testwait.Recv(t, cc.Drained(), "the drain")
	if k := cc.DrainKind(); k != DrainConn || cc.PeerLeaving() {
		t.Fatalf("after AskToDrain the client's connection got %v (leaving %v), want %v", k, cc.PeerLeaving(), DrainConn)
	}

	s.g.Leave()
	testwait.Until(t, "the leave to reach the client", func() bool { return cc.PeerLeaving() })

	// A client that connects after Leave learns it in the handshake,
	// before its first call is sent.
	c2 := newSignalClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Limit)
	defer cancel()
	if _, err := c2.tch.Connect(ctx, s.addr()); err != nil {
		t.Fatal(err)
	}
	if cc2 := c2.conn(t, 0); !isClosed(cc2.Drained()) || !cc2.PeerLeaving() {
		t.Fatalf("a connection made after Leave: drained %v, leaving %v; want both at the handshake's end", isClosed(cc2.Drained()), cc2.PeerLeaving())
	}

	ctx, cancel = context.WithTimeout(context.Background(), testwait.Limit)
	defer cancel()
	if _, _, _, err := raw.Call(ctx, plainClient(t), s.addr(), "s", "conn", nil, nil); err != nil {
		t.Fatal(err)
	}
	if (<-s.conns).AskToDrain() {
		t.Fatal("AskToDrain asked a plain tchannel-go client")
	}
}

// A signal frame is a protocol error from a peer that did not announce
// signals, and when it is malformed; an unknown key is ignored.
func TestSignalFramesAreChecked(t *testing.T) {
	s := startServer(t, Limits{})
	announce := func(p *tpeer.Peer) {
		params := append(tframe.InitParams("0.0.0.0:0", "tpeer"), [2]string{paramSignals, signalsV1})
		p.Send(tframe.AppendInit(nil, tframe.InitReq, 1, tframe.Init{Version: 2, Params: params}))
		if f := p.Next(); f.Type != tframe.InitRes {
			t.Fatalf("handshake: got a %v frame, want an init res", f.Type)
		}
	}
	for _, tc := range []struct {
		name     string
		announce bool
		frame    []byte
		closed   bool
	}{
		{"unannounced", false, tframe.AppendSignal(nil, tframe.ConnID, [][2]string{{keyDrain, "conn"}}), true},
		{"cut short", true, tframe.Append(nil, tframe.Signal, tframe.ConnID, []byte{2, 1, 'k'}), true},
		{"trailing bytes", true, tframe.Append(nil, tframe.Signal, tframe.ConnID, []byte{0, 9}), true},
		{"unknown key", true, tframe.AppendSignal(nil, 7, [][2]string{{"future", "x"}}), false},
	} {
		p := tpeer.Dial(t, s.addr())
		if tc.announce {
			announce(p)
		} else {
			p.Handshake()
		}
		p.Send(tc.frame)
		if tc.closed {
			if f := p.Next(); f.Type != tframe.Error || f.Code != errCodeProtocol {
				t.Errorf("%s: got a %v frame (code %d), want a protocol error", tc.name, f.Type, f.Code)
			}
			p.ClosedByServer()
			continue
		}
		p.Send(tpeer.CallReq(2, "s", "echo", false, []byte("x")))
		if f := p.Next(); f.Type != tframe.CallRes {
			t.Errorf("%s: a call after it got a %v frame (%q), want its answer", tc.name, f.Type, f.Message)
		}
	}
	if n := len(s.eventsOf(InvalidFrame)); n != 3 {
		t.Errorf("%d invalid frames reported, want 3", n)
	}
}

// The Guard counts a connection's end: a client's close leaves it
// uncounted.
func TestInboundCountsFollowCloses(t *testing.T) {
	s := startSignalServer(t)
	c := newSignalClient(t)
	c.call(t, s.addr(), "echo")
	c.tch.Close()
	testwait.Until(t, "the server to count the client's close", func() bool {
		sig, plain, _ := s.g.Inbound()
		return sig == 0 && plain == 0
	})
}
