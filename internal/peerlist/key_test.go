package peerlist

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/balance"
	"github.com/sluice-rpc/sluice/internal/pool"
	"github.com/sluice-rpc/sluice/internal/testkit/testnet"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/peer"
	"github.com/uber/tchannel-go"
)

// A shard key's home that is connecting for the first time is waited for;
// once it has failed, it is passed over while it tries again, as it is in
// TransientFailure: a home whose handshakes hang must not hold its keys'
// calls for a connect timeout on every attempt.
func TestKeyWaitsOnlyForAHomeNotFailing(t *testing.T) {
	f := newFixture(t, pool.ConnectConfig{Timeout: 200 * time.Millisecond}, tchannel.ChannelOptions{})
	good := f.add(startServer(t, "127.0.0.1:0").PeerInfo().HostPort)
	hole := testnet.BlackHole(t)
	bad := f.add(hole.Addr())
	f.list.Connect()
	f.waitState(good, peer.Ready)
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
	f.waitState(bad, peer.TransientFailure)
	if p, err := f.list.ChooseKeyAt(key, nil, f.clk.Now()); p != good {
		t.Fatalf("home in TransientFailure: ChooseKeyAt = %v, %v; want the next peer", p, err)
	}
	f.clk.Add(2 * time.Second) // past the backoff: it connects again
	f.waitState(bad, peer.Connecting)
	if p, err := f.list.ChooseKeyAt(key, nil, f.clk.Now()); p != good {
		t.Fatalf("home connecting again after a failure: ChooseKeyAt = %v, %v; want the next peer, not a wait", p, err)
	}
}

// A list whose shard-key ring is in use builds the next members' ring when
// they are set, not in the next keyed call; one with no keyed calls yet
// builds none.
func TestSetBuildsTheRingInUse(t *testing.T) {
	l, clk := newBalancedList(t, balance.Config{}, 1, 1, 1)
	set := func(n int) {
		var ms []peer.Member
		for i := range n {
			ms = append(ms, peer.Member{HostPort: hp(i), Weight: 1})
		}
		if err := l.Set(ms); err != nil {
			t.Fatal(err)
		}
	}
	set(4)
	if l.peers.Load().ring.Load() != nil {
		t.Fatal("Set built a ring for a list no keyed call has used")
	}
	if _, err := l.ChooseKeyAt("user-1", nil, clk.Now()); err != nil {
		t.Fatal(err)
	}
	set(5)
	r := l.peers.Load().ring.Load()
	if r == nil {
		t.Fatal("Set left the ring in use to the next keyed call to build")
	}
	if _, err := l.ChooseKeyAt("user-1", nil, clk.Now()); err != nil || l.peers.Load().ring.Load() != r {
		t.Fatalf("the keyed call after Set: %v, ring replaced %v; want Set's ring used", err, l.peers.Load().ring.Load() != r)
	}
}
