package peerlist

import (
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/pool"
	"github.com/sluice-rpc/sluice/internal/testkit/testnet"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/peer"
	"github.com/uber/tchannel-go"
)

// Peers joining a list connect within the pool's budget, however many
// fail: 12 refused peers and a budget of 4 at once then 10 a second make
// 4 dials, then one per 100 ms of the clock; the peers waiting for their
// first turn are Connecting. A call's connect of an Idle peer is not
// delayed by the budget.
func TestConnectBudgetBoundsConnectsAcrossPeers(t *testing.T) {
	f := newFixture(t, pool.ConnectConfig{Budget: pool.ConnectBudget{Rate: 10, Burst: 4}}, tchannel.ChannelOptions{})
	// The server of the call's connect listens first: a refused address
	// is a port just closed, which the system could hand it again.
	s := startServer(t, "127.0.0.1:0")
	var ms []peer.Member
	for range 12 {
		ms = append(ms, peer.Member{HostPort: testnet.Refused(t)})
	}
	ms = dedupe(ms)
	if err := f.list.Set(ms); err != nil {
		t.Fatal(err)
	}
	// 4 connects fail; the other peers wait on the clock for their turns.
	testwait.Until(t, "4 dials, and the other peers waiting", func() bool {
		return f.dials.Load() == 4 && f.clk.Timers() == len(ms)
	})
	if _, err := f.list.Choose(nil); err != ErrConnecting {
		t.Fatalf("Choose with peers waiting for their first turn: %v, want ErrConnecting", err)
	}

	// A call's connect goes at once, though the budget is spent.
	c, err := f.pool.Acquire(s.PeerInfo().HostPort)
	if err != nil {
		t.Fatal(err)
	}
	defer f.pool.Release(c)
	c.Connect()
	testwait.Until(t, "the call's connect", func() bool { return c.State() == peer.Ready })

	for i := range 3 {
		f.clk.Add(100 * time.Millisecond)
		testwait.Until(t, "one more dial", func() bool { return f.dials.Load() == int64(6+i) })
	}
}
