package channel

import (
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/testnet"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"

	"github.com/sluice-rpc/sluice/peer"
)

// A Channel may add peers before it serves: its connects in progress then
// make their connections while Serve runs. tchannel-go's Serve rewrites
// the logger its Connect reads unlocked as it makes a connection, so the
// Channel must keep the two apart; under -race this test fails if it does
// not.
func TestServeWhileConnecting(t *testing.T) {
	s := startServer(t)
	for range 20 {
		ch, err := New("both")
		if err != nil {
			t.Fatal(err)
		}
		if err := to(ch, "kv").AddPeer(s.ch.HostPort()); err != nil {
			t.Fatal(err)
		}
		if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		waitPeerState(t, ch, s.ch.HostPort(), peer.Ready)
		ch.Close()
	}
}

// Serve waits for no connect that has not made its connection yet: with a
// peer that accepts and never answers the handshake (a black hole), and a
// connect timeout far beyond testwait's bound, ListenAndServe still
// returns, while that connect goes on.
func TestServeDoesNotWaitForASilentPeer(t *testing.T) {
	hole := testnet.BlackHole(t)
	ch, err := New("both", WithConnectConfig(ConnectConfig{Timeout: 10 * time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.Close)
	if err := to(ch, "kv").AddPeer(hole.Addr()); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "the connect to the black hole to be accepted", func() bool { return hole.Accepts() > 0 })
	served := make(chan error, 1)
	go func() { served <- ch.ListenAndServe("127.0.0.1:0") }()
	if err := testwait.Recv(t, served, "ListenAndServe beside a silent handshake"); err != nil {
		t.Fatal(err)
	}
	if s := to(ch, "kv").Peers()[0].State; s != peer.Connecting {
		t.Errorf("the black hole's peer is %v, want still CONNECTING", s)
	}
}
