package peerlist

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/balance"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/criticality"
	"github.com/sluice-rpc/sluice/internal/balancing"
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

// Calls claiming a key's peers at the same moment never take a peer past
// its bounded load: the check and the count are one step. With no call
// ending, the calls in flight only grow, so a peer's pending calls, read
// before the total, are at most the bound of that total at any moment.
func TestClaimKeyHoldsTheBoundUnderConcurrency(t *testing.T) {
	const (
		peers      = 10
		goroutines = 16
		claims     = 60
	)
	l, clk := newBalancedList(t, balance.Config{}, slices.Repeat([]float64{1}, peers)...)
	const key = "user-42"
	home := l.Home(key)
	c := balancing.Factor(balance.Config{})
	total := func() (n int64) {
		for _, p := range l.Peers() {
			n += p.Pending()
		}
		return n
	}
	var (
		start = make(chan struct{})
		over  atomic.Int64
		worst atomic.Value
		wg    sync.WaitGroup
	)
	for range goroutines {
		wg.Go(func() {
			<-start
			for range claims {
				if _, err := l.ClaimKeyClassAt(key, nil, clk.Now(), criticality.Critical); err != nil {
					t.Error(err)
					return
				}
				pending := home.Pending()
				if m := total(); pending > balancing.Capacity(c, m-1, 1, peers) {
					over.Add(1)
					worst.Store(fmt.Sprintf("%d pending on the home with %d in flight in all, bound %d", pending, m, balancing.Capacity(c, m-1, 1, peers)))
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if n := over.Load(); n > 0 {
		t.Errorf("the home over its bounded load after %d of %d claims; one: %v", n, goroutines*claims, worst.Load())
	}
	if m := total(); m != goroutines*claims {
		t.Errorf("%d calls pending in all after %d claims", m, goroutines*claims)
	}
	if home.Pending() < 2 {
		t.Errorf("the home has %d pending: the key's calls did not go home first", home.Pending())
	}
}

// A key's home resting after a pushback takes calls up to its level, a
// claimed call as a chosen one: the claim, counted before the rest is
// asked, is not held against the level it asks about.
func TestClaimKeyTakesARestingHomeUpToItsLevel(t *testing.T) {
	l, clk := newBalancedList(t, balance.Config{}, 1, 1, 1, 1)
	const key = "user-42"
	home := l.Home(key)
	name := func(p *Peer) string {
		if p == nil {
			return "no peer"
		}
		return p.HostPort()
	}
	home.Begin()
	home.Begin()
	home.EndPushedBack(clk.Now(), time.Millisecond, time.Second) // level 1
	home.End(clk.Now(), time.Millisecond, codes.OK)              // 0 pending
	if p, err := l.ChooseKeyClassAt(key, nil, clk.Now(), criticality.Critical); p != home {
		t.Fatalf("ChooseKeyClassAt = %s, %v; want the home, resting at level 1 with none pending", name(p), err)
	}
	if p, err := l.ClaimKeyClassAt(key, nil, clk.Now(), criticality.Critical); p != home {
		t.Fatalf("ClaimKeyClassAt = %s, %v; want the home, as ChooseKeyClassAt chose", name(p), err)
	}
	if c := home.Counts(); c.Pending != 1 || c.Throttled != 0 {
		t.Errorf("the home after the claim: %d pending, %d throttled; want 1 and 0", c.Pending, c.Throttled)
	}
	// At its level now, with room in its bounded load (8 calls pending
	// elsewhere: a bound of 4), the rest refuses the next call, which goes
	// on along the ring; the home gives its claim back.
	for _, p := range l.Peers() {
		if p != home {
			p.Begin()
			p.Begin()
		}
	}
	if p, err := l.ClaimKeyClassAt(key, nil, clk.Now(), criticality.Critical); err != nil || p == home {
		t.Fatalf("ClaimKeyClassAt at the home's level = %s, %v; want the next peer on the ring", name(p), err)
	}
	if c := home.Counts(); c.Pending != 1 || c.Throttled != 1 {
		t.Errorf("the home after refusing a claim: %d pending, %d throttled; want 1 and 1", c.Pending, c.Throttled)
	}
}
