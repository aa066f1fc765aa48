package peerlist

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/pool"
	"github.com/sluice-rpc/sluice/internal/tchconn"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/peer"
	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/raw"
)

// guardedListener passes each accepted connection through a Guard's
// Gate, as a Sluice server's listener does, and hands the test the Conn.
type guardedListener struct {
	net.Listener
	g     *tchconn.Guard
	conns chan *tchconn.Conn
}

func (l *guardedListener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c, err := l.g.Gate(nc, nil)
		if err != nil {
			nc.Close()
			continue
		}
		l.conns <- c
		return c, nil
	}
}

// startGuardedServer starts a tchannel-go server of "kv" whose
// connections go through a Guard, as a Sluice server's do.
func startGuardedServer(t *testing.T) (*tchannel.Channel, *guardedListener) {
	t.Helper()
	g, err := tchconn.New(tchconn.Config{})
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &guardedListener{Listener: inner, g: g, conns: make(chan *tchconn.Conn, 10)}
	ch, err := tchannel.NewChannel("kv", nil)
	if err != nil {
		t.Fatal(err)
	}
	ch.Register(raw.Wrap(echo{}), "echo")
	if err := ch.Serve(l); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ch.Close()
		<-ch.ClosedChan()
		g.Close()
	})
	return ch, l
}

// A server that asks a connection to drain gets it closed by the
// connector, which goes Idle: no failure, and the next call's connect
// makes a new one. A server that says it is leaving puts the peer in
// TransientFailure, failing nothing; its handshake keeps saying so, and
// the peer is never Ready again while it does.
func TestConnectorDrainsWhenTheServerAsks(t *testing.T) {
	f := newFixture(t, pool.ConnectConfig{HealthCheck: pool.HealthCheck{Disabled: true}}, tchannel.ChannelOptions{})
	s, l := startGuardedServer(t)
	p := f.add(s.PeerInfo().HostPort)
	f.waitState(p, peer.Ready)
	if err := call(t, p); err != nil {
		t.Fatal(err)
	}
	counter := func(name string) int64 {
		return f.scope.Snapshot().Counters()[name+"+peer="+p.HostPort()].Value()
	}
	sc := testwait.Recv(t, l.conns, "the server's connection")
	if !sc.AskToDrain() {
		t.Fatal("the server could not ask its Sluice client to drain")
	}
	f.waitState(p, peer.Idle)
	if p.LastFailure() != nil || counter("peer.connect_failures") != 0 {
		t.Fatalf("a drained connection counted as a failure: %v", p.LastFailure())
	}
	f.list.Connect()
	f.waitState(p, peer.Ready)
	if n := f.dials.Load(); n != 2 {
		t.Fatalf("%d dials, want 2: the first and one after the drain", n)
	}
	if err := call(t, p); err != nil {
		t.Fatalf("a call on the new connection: %v", err)
	}

	l.g.Leave()
	f.waitState(p, peer.TransientFailure)
	if lf := p.LastFailure(); lf == nil || !errors.Is(lf.Err, peer.ErrPeerLeaving) {
		t.Fatalf("the peer's failure after its server left: %v, want ErrPeerLeaving", lf)
	}
	if n := counter("peer.connect_failures"); n != 0 {
		t.Fatalf("peer.connect_failures = %d after a server left", n)
	}
	// Its backoff passes: the connect's handshake says the server is
	// still leaving, and the peer goes back to TransientFailure without
	// being Ready (a Ready peer counts a connect).
	testwait.Timers(t, f.clk, 1)
	f.clk.Add(2 * time.Second)
	testwait.Until(t, "a connect after the backoff", func() bool { return f.dials.Load() == 3 })
	f.waitState(p, peer.TransientFailure)
	if n := counter("peer.connects"); n != 2 {
		t.Fatalf("peer.connects = %d, want 2: the peer was Ready again with a leaving server", n)
	}
}
