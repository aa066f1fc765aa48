package peerlist

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/pool"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/peer"
	"github.com/sluice-rpc/sluice/stats"
	"github.com/uber/tchannel-go"
)

// A peer that leaves and comes back within DepartedGrace takes up its
// judgement (its busy limit, its ejection); one that comes back later
// starts afresh. Without this a flapping registry entry cleared a
// throttled or ejected peer at each flap.
func TestReturningPeerKeepsItsJudgement(t *testing.T) {
	l, clk := newList(t, 1000)
	ms := []peer.Member{{HostPort: hp(1)}, {HostPort: hp(2)}, {HostPort: hp(3)}, {HostPort: hp(4)}}
	if err := l.Set(ms); err != nil {
		t.Fatal(err)
	}
	p := l.Get(hp(1))
	for range 3 {
		p.Begin()
		p.End(clk.Now(), time.Millisecond, codes.Busy)
	}
	for range 10 { // enough in a row to eject it
		p.Begin()
		p.End(clk.Now(), time.Millisecond, codes.Unexpected)
	}
	clk.Add(time.Second) // the busy window passes: the limit halves thrice
	limit := p.Limiter().LimitAt(clk.Now())
	ejected, until := p.Ejected(clk.Now())
	if !ejected || limit >= 1000 {
		t.Fatalf("setup: ejected %v, limit %v; want an ejected peer with a lowered limit", ejected, limit)
	}

	if err := l.Set(ms[1:]); err != nil {
		t.Fatal(err)
	}
	clk.Add(DepartedGrace / 2)
	if err := l.Set(ms); err != nil {
		t.Fatal(err)
	}
	back := l.Get(hp(1))
	if back == p || back.Limiter() != p.Limiter() {
		t.Fatal("the peer came back without its busy limiter")
	}
	if u := back.ejectedUntil.Load(); u != until.UnixNano() {
		t.Errorf("back within the grace: ejected until %v, want its ejection's end %v", time.Unix(0, u), until)
	}
	if back.ejections.Load() != p.ejections.Load() {
		t.Errorf("ejections %d, want the %d it had", back.ejections.Load(), p.ejections.Load())
	}

	if err := l.Set(ms[1:]); err != nil {
		t.Fatal(err)
	}
	clk.Add(DepartedGrace)
	if err := l.Set(ms); err != nil {
		t.Fatal(err)
	}
	fresh := l.Get(hp(1))
	if fresh.Limiter() == p.Limiter() || fresh.ejections.Load() != 0 || l.departed.Len() != 0 {
		t.Errorf("back after the grace: same limiter %v, %d ejections, %d departed held; want a fresh peer and nothing held",
			fresh.Limiter() == p.Limiter(), fresh.ejections.Load(), l.departed.Len())
	}
}

// Addresses rotating through a registry leave nothing behind without
// bound: 40 sets of 300 new addresses, a second apart, keep the pool's
// released host:ports at maxReleased, the list's departed peers at
// MaxDeparted, the metrics at MaxPeerSeries peers of their own; once
// they have been gone for the grace, only the last set's departures are
// held, and those are dropped too a grace later with nothing else
// happening (the sweeps).
func TestRotatingAddressesStayBounded(t *testing.T) {
	// A budget that lets one connect through: the peers wait their turn,
	// and nothing is dialled.
	// Sweeps every 10 ms of the wall clock, deciding by the fake clock.
	f := newFixtureConfig(t, pool.Config{Connect: pool.ConnectConfig{Budget: pool.ConnectBudget{Rate: 0.001, Burst: 1}}, SweepEvery: 10 * time.Millisecond}, tchannel.ChannelOptions{})
	const sets, size = 40, 300
	f.list.mu.Lock()
	f.list.sweep.Every = 10 * time.Millisecond
	f.list.mu.Unlock()
	held := func() (released, departed int) {
		_, released = f.pool.Held()
		f.list.mu.Lock()
		departed = f.list.departed.Len()
		f.list.mu.Unlock()
		return released, departed
	}
	next := 0
	rotate := func() {
		t.Helper()
		ms := make([]peer.Member, size)
		for i := range ms {
			ms[i] = peer.Member{HostPort: fmt.Sprintf("127.0.%d.%d:4000", next/250, next%250+1)}
			next++
		}
		if err := f.list.Set(ms); err != nil {
			t.Fatal(err)
		}
	}
	for range sets {
		rotate()
		f.clk.Add(time.Second)
	}
	conns, _ := f.pool.Held()
	released, departed := held()
	// 11,700 were released within the minute: the cap holds them to
	// maxReleased's 10,000 (a registry's MaxPeers).
	if conns != size || released > 10000 || departed > MaxDeparted {
		t.Errorf("after %d sets of %d: %d connectors (want %d), %d released held (at most 10,000), %d departed held (at most %d)",
			sets, size, conns, size, released, departed, MaxDeparted)
	}
	peers := map[string]bool{}
	for _, g := range f.scope.Snapshot().Gauges() {
		peers[g.Tags()["peer"]] = true
	}
	if len(peers) > stats.MaxPeerSeries+1 {
		t.Errorf("%d peer tags among the gauges, want at most %d and %q", len(peers), stats.MaxPeerSeries, stats.PeerOther)
	}

	f.clk.Add(max(pool.ReleasedHold, DepartedGrace))
	rotate()
	if released, departed := held(); released != size || departed != size {
		t.Errorf("a while after the earlier sets left: %d released and %d departed held, want only the last set's %d", released, departed, size)
	}

	// Nothing else happens: the sweeps drop the last departures too.
	f.clk.Add(max(pool.ReleasedHold, DepartedGrace))
	testwait.Until(t, "the last departures dropped, with no peer joining or leaving", func() bool {
		released, departed := held()
		return released == 0 && departed == 0
	})
}
