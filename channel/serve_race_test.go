package channel

import (
	"testing"

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
