package peer

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/stats"
	"github.com/uber/tchannel-go"
)

// departures forgets a host:port once it has been gone for the grace, and
// holds at most max, the earliest gone dropped first; a host:port that
// leaves again is timed from its latest departure.
func TestDeparturesForgetAfterTheGrace(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	d := newDepartures[int](time.Minute, 100)
	for i := range 250 {
		d.put(hp(i%150), i, t0.Add(time.Duration(i)*time.Second/10))
	}
	if d.len() != 100 {
		t.Fatalf("%d held, want the cap of 100", d.len())
	}
	now := t0.Add(25 * time.Second)
	if v, ok := d.get(hp(99), now); !ok || v != 249 {
		t.Errorf("get of the latest departure = %v, %v; want 249, true", v, ok)
	}
	if _, ok := d.get(hp(120), now); ok {
		t.Error("one of the earliest gone, past the cap, is still held")
	}
	now = t0.Add(84 * time.Second) // a minute after the departures at 24 s
	d.prune(now)
	if d.len() != 9 { // hp(91)..hp(99) left at 24.1-24.9 s
		t.Errorf("%d held a minute after the first 241 left, want 9", d.len())
	}
	if v, ok := d.take(hp(95), now); !ok || v != 245 {
		t.Errorf("take = %v, %v; want 245, true", v, ok)
	}
	if _, ok := d.get(hp(95), now); ok || d.len() != 8 {
		t.Error("take did not forget the host:port")
	}
	d.prune(t0.Add(time.Hour))
	if d.len() != 0 || len(d.q)-d.head != 0 {
		t.Errorf("after an hour, %d held and %d queued; want none", d.len(), len(d.q)-d.head)
	}
}

// A peer that leaves and comes back within DepartedGrace takes up its
// judgement (its busy limit, its ejection); one that comes back later
// starts afresh. Without this a flapping registry entry cleared a
// throttled or ejected peer at each flap.
func TestReturningPeerKeepsItsJudgement(t *testing.T) {
	l, clk := newList(t, 1000)
	ms := []Member{{HostPort: hp(1)}, {HostPort: hp(2)}, {HostPort: hp(3)}, {HostPort: hp(4)}}
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
	if fresh.Limiter() == p.Limiter() || fresh.ejections.Load() != 0 || l.departed.len() != 0 {
		t.Errorf("back after the grace: same limiter %v, %d ejections, %d departed held; want a fresh peer and nothing held",
			fresh.Limiter() == p.Limiter(), fresh.ejections.Load(), l.departed.len())
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
	f := newFixture(t, ConnectConfig{Budget: ConnectBudget{Rate: 0.001, Burst: 1}}, tchannel.ChannelOptions{})
	const sets, size = 40, 300
	// Sweeps every 10 ms of the wall clock, deciding by the fake clock.
	f.pool.mu.Lock()
	f.pool.sweep.every = 10 * time.Millisecond
	f.pool.mu.Unlock()
	f.list.mu.Lock()
	f.list.sweep.every = 10 * time.Millisecond
	f.list.mu.Unlock()
	held := func() (released, departed int) {
		f.pool.mu.Lock()
		released = f.pool.released.len()
		f.pool.mu.Unlock()
		f.list.mu.Lock()
		departed = f.list.departed.len()
		f.list.mu.Unlock()
		return released, departed
	}
	next := 0
	rotate := func() {
		t.Helper()
		ms := make([]Member, size)
		for i := range ms {
			ms[i] = Member{HostPort: fmt.Sprintf("127.0.%d.%d:4000", next/250, next%250+1)}
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
	f.pool.mu.Lock()
	conns := len(f.pool.conns)
	f.pool.mu.Unlock()
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

	f.clk.Add(max(releasedHold, DepartedGrace))
	rotate()
	if released, departed := held(); released != size || departed != size {
		t.Errorf("a while after the earlier sets left: %d released and %d departed held, want only the last set's %d", released, departed, size)
	}

	// Nothing else happens: the sweeps drop the last departures too.
	f.clk.Add(max(releasedHold, DepartedGrace))
	testwait.Until(t, "the last departures dropped, with no peer joining or leaving", func() bool {
		released, departed := held()
		return released == 0 && departed == 0
	})
}
