package peer

import (
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/testnet"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/uber/tchannel-go"
)

// The bucket's arithmetic: Burst connects at once, then one per 1/Rate, in
// the order asked; an urgent connect starts at once and delays the
// others by its turn; a refunded turn goes to the next; an idle budget
// fills up again.
func TestConnectBudgetTurns(t *testing.T) {
	b := newConnectBudget(ConnectBudget{Rate: 10, Burst: 3}.withDefaults())
	t0 := time.Unix(1_700_000_000, 0)
	want := func(at time.Time, urgent bool, wait time.Duration) {
		t.Helper()
		if got := b.reserve(at, urgent).Sub(at); got != wait {
			t.Fatalf("reserve at +%v (urgent %v): wait %v, want %v", at.Sub(t0), urgent, got, wait)
		}
	}
	for range 3 {
		want(t0, false, 0)
	}
	want(t0, false, 100*time.Millisecond)
	want(t0, false, 200*time.Millisecond)
	want(t0, true, 0)                     // urgent: at once...
	want(t0, false, 400*time.Millisecond) // ...and counted
	b.refund(t0)
	want(t0, false, 400*time.Millisecond) // the refunded turn, reused
	want(t0.Add(10*time.Second), false, 0)
	want(t0.Add(10*time.Second), false, 0)
	want(t0.Add(10*time.Second), false, 0)
	want(t0.Add(10*time.Second), false, 100*time.Millisecond)

	if newConnectBudget(ConnectBudget{Disabled: true}.withDefaults()) != nil {
		t.Error("a disabled budget made a budget, want none")
	}
	for _, bad := range []ConnectBudget{{Burst: -1}, {Rate: 1e-9}, {Rate: -1}} {
		if err := (ConnectConfig{Budget: bad}).Validate(); err == nil {
			t.Errorf("ConnectConfig{Budget: %+v}.Validate() = nil, want an error", bad)
		}
	}
}

// Peers joining a list connect within the pool's budget, however many
// fail: 12 refused peers and a budget of 4 at once then 10 a second make
// 4 dials, then one per 100 ms of the clock; the peers waiting for their
// first turn are Connecting. A call's connect of an Idle peer is not
// delayed by the budget.
func TestConnectBudgetBoundsConnectsAcrossPeers(t *testing.T) {
	f := newFixture(t, ConnectConfig{Budget: ConnectBudget{Rate: 10, Burst: 4}}, tchannel.ChannelOptions{})
	var ms []Member
	for range 12 {
		ms = append(ms, Member{HostPort: testnet.Refused(t)})
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
	s := startServer(t, "127.0.0.1:0")
	c, err := f.pool.acquire(s.PeerInfo().HostPort)
	if err != nil {
		t.Fatal(err)
	}
	defer f.pool.release(c)
	c.Connect()
	testwait.Until(t, "the call's connect", func() bool { return c.State() == Ready })

	for i := range 3 {
		f.clk.Add(100 * time.Millisecond)
		testwait.Until(t, "one more dial", func() bool { return f.dials.Load() == int64(6+i) })
	}
}
