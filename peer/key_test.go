package peer

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/testnet"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/uber/tchannel-go"
)

// A shard key's home that is connecting for the first time is waited for;
// once it has failed, it is passed over while it tries again, as it is in
// TransientFailure: a home whose handshakes hang must not hold its keys'
// calls for a connect timeout on every attempt.
func TestKeyWaitsOnlyForAHomeNotFailing(t *testing.T) {
	f := newFixture(t, ConnectConfig{Timeout: 200 * time.Millisecond}, tchannel.ChannelOptions{})
	good := f.add(startServer(t, "127.0.0.1:0").PeerInfo().HostPort)
	hole := testnet.BlackHole(t)
	bad := f.add(hole.Addr())
	f.list.Connect()
	f.waitState(good, Ready)
	key := ""
	for i := 0; key == ""; i++ {
		if k := fmt.Sprint("user-", i); f.list.Home(k) == bad {
			key = k
		}
	}
	testwait.Until(t, "the black hole to accept", func() bool { return hole.Accepts() == 1 })
	if p, err := f.list.ChooseKeyAt(key, nil, f.clk.Now()); err != ErrConnecting {
		t.Fatalf("home connecting for the first time: ChooseKeyAt = %v, %v; want ErrConnecting (wait for it)", p, err)
	}
	f.waitState(bad, TransientFailure)
	if p, err := f.list.ChooseKeyAt(key, nil, f.clk.Now()); p != good {
		t.Fatalf("home in TransientFailure: ChooseKeyAt = %v, %v; want the next peer", p, err)
	}
	f.clk.Add(2 * time.Second) // past the backoff: it connects again
	f.waitState(bad, Connecting)
	if p, err := f.list.ChooseKeyAt(key, nil, f.clk.Now()); p != good {
		t.Fatalf("home connecting again after a failure: ChooseKeyAt = %v, %v; want the next peer, not a wait", p, err)
	}
}
