package peerlist

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/busy"
	"github.com/sluice-rpc/sluice/internal/balancing"
)

// loadShares makes n choices at now, none sent, and returns each peer's share.
func loadShares(t *testing.T, l *List, n int, now time.Time) map[string]float64 {
	t.Helper()
	got := map[string]float64{}
	for range n {
		p, err := l.ChooseAt(nil, now)
		if err != nil {
			t.Fatal(err)
		}
		got[p.HostPort()] += 1 / float64(n)
	}
	return got
}

// Servers that report the same utilisation at 200, 400 and 800 calls a
// second have capacities 1 : 2 : 4, and take shares in proportion (with
// nothing pending, the lottery splits by weight); once their reports
// are older than balancing.LoadTTL the peers are neutral again.
func TestReportLoadWeighsByCapacity(t *testing.T) {
	l, clk := newList(t, busy.DefaultCeiling, hp(0), hp(1), hp(2))
	now := clk.Now()
	for i, qps := range []int64{200, 400, 800} {
		l.ReportLoad(hp(i), now, qps, 800, true, 0)
	}
	got := loadShares(t, l, 60_000, now)
	for i, want := range []float64{1.0 / 7, 2.0 / 7, 4.0 / 7} {
		if math.Abs(got[hp(i)]-want) > 0.01 {
			t.Errorf("peer %d (capacity %d) took %.3f of the choices, want %.3f", i, []int{250, 500, 1000}[i], got[hp(i)], want)
		}
	}
	clk.Add(balancing.LoadTTL + time.Second)
	for i := range 3 {
		if f := l.Get(hp(i)).LoadFactor(); f != 1 {
			t.Errorf("peer %d's load factor is %v after its reports went stale, want 1", i, f)
		}
	}
}

// A report under 1% utilisation bounds the capacity from below only: a
// lightly loaded server's reports do not pull its estimate down (which
// would cut its share, and its utilisation with it), but one above the
// estimate raises it.
func TestReportLoadLightLoadIsALowerBound(t *testing.T) {
	l, clk := newList(t, busy.DefaultCeiling, hp(0), hp(1))
	now := clk.Now()
	l.ReportLoad(hp(0), now, 600, 200, true, 0) // capacity 3000
	l.ReportLoad(hp(1), now, 200, 200, true, 0) // capacity 1000
	c0, _ := l.Get(hp(0)).Capacity()
	for range 20 {
		now = now.Add(100 * time.Millisecond)
		l.ReportLoad(hp(0), now, 20, 7, true, 0) // 20 calls a second at 0.7%: at least 2000
	}
	clk.Add(2 * time.Second)
	if c, ok := l.Get(hp(0)).Capacity(); !ok || c != c0 {
		t.Errorf("after light-load reports the capacity is %.0f (ok %v), want %.0f unchanged", c, ok, c0)
	}
	l.ReportLoad(hp(0), now, 50, 5, true, 0) // at least 5000: above the estimate
	if c, _ := l.Get(hp(0)).Capacity(); c != 5000 {
		t.Errorf("a light-load report above the estimate left it at %.0f, want the bound, 5000", c)
	}
	// A bound is replaced, not averaged, by the next report that says more:
	// a server first seen lightly loaded is not held below its capacity.
	now = now.Add(100 * time.Millisecond)
	l.ReportLoad(hp(0), now, 900, 300, true, 0) // capacity 3000
	if c, _ := l.Get(hp(0)).Capacity(); c != 3000 {
		t.Errorf("after a bound, a report of capacity 3000 made the estimate %.0f, want 3000", c)
	}
	now = now.Add(100 * time.Millisecond)
	l.ReportLoad(hp(0), now, 400, 100, true, 0) // capacity 4000: averaged now
	if c, _ := l.Get(hp(0)).Capacity(); math.Abs(c-(3000+balancing.LoadSmoothing*1000)) > 1e-6 {
		t.Errorf("a second full report made the estimate %.0f, want it averaged to %.0f", c, 3000+balancing.LoadSmoothing*1000)
	}
}

// A server that reports no load at all draws at most MaxLoadFactor times
// the median peer's weight, however many reports it sends.
func TestReportLoadLiarBounded(t *testing.T) {
	l, clk := newList(t, busy.DefaultCeiling, hp(0), hp(1), hp(2), hp(3))
	now := clk.Now()
	for range 50 {
		l.ReportLoad(hp(0), now, 100_000, 0, true, 0) // the liar
		for i := 1; i < 4; i++ {
			l.ReportLoad(hp(i), now, 500, 500, true, 0)
		}
	}
	got := loadShares(t, l, 40_000, now)
	if bound := 4.0 / 7; got[hp(0)] > bound+0.01 {
		t.Errorf("the liar took %.3f of the choices, over the bound %.3f (4 to the others' 1)", got[hp(0)], bound)
	}
	if r := l.Get(hp(0)).LoadFactor() / l.Get(hp(1)).LoadFactor(); r > balancing.MaxLoadFactor+1e-9 {
		t.Errorf("the liar's factor is %.2f times an honest peer's, over MaxLoadFactor", r)
	}
}

// A report naming a refused class refuses that class and below locally,
// as a Busy naming it does; a later report naming none ends the refusal.
func TestReportLoadRefusesClass(t *testing.T) {
	l, clk := newList(t, busy.DefaultCeiling, hp(0))
	now := clk.Now()
	l.ReportLoad(hp(0), now, 100, 0, false, shedPlus)
	var re *RefusedError
	if _, err := l.ChooseClassAt(nil, now, shed); !errors.As(err, &re) || re.Refusing != shedPlus {
		t.Fatalf("a sheddable call after a report refusing sheddable_plus: %v, want a RefusedError naming sheddable_plus", err)
	}
	if _, err := l.ChooseClassAt(nil, now, crit); err != nil {
		t.Fatalf("a critical call after a report refusing sheddable_plus: %v, want the peer", err)
	}
	clk.Add(10 * time.Millisecond)
	now = clk.Now()
	l.ReportLoad(hp(0), now, 100, 0, false, 0)
	if _, err := l.ChooseClassAt(nil, now, shed); err != nil {
		t.Fatalf("a sheddable call after a report refusing nothing: %v, want the peer", err)
	}
	// Without a later report the refusal ends after DefaultRefusal.
	l.ReportLoad(hp(0), now, 100, 0, false, shed)
	if _, err := l.ChooseClassAt(nil, now, shed); err == nil {
		t.Fatal("a sheddable call right after a report refusing it was taken")
	}
	clk.Add(DefaultRefusal)
	if _, err := l.ChooseClassAt(nil, clk.Now(), shed); err != nil {
		t.Fatalf("a sheddable call DefaultRefusal after the report: %v, want the peer", err)
	}
}

// A list of more than refactorEvery peers works its load factors out at
// most once per refactorGap: a report within the gap only updates its own
// peer's capacity, which the next report after the gap takes in.
func TestLongListReweighsOncePerGap(t *testing.T) {
	hps := make([]string, refactorEvery+36)
	for i := range hps {
		hps[i] = hp(i)
	}
	l, clk := newList(t, busy.DefaultCeiling, hps...)
	l.ReportLoad(hp(0), clk.Now(), 200, 800, true, 0)
	clk.Add(time.Millisecond)
	l.ReportLoad(hp(1), clk.Now(), 800, 800, true, 0) // within the gap: not re-weighed
	if f0, f1 := l.Get(hp(0)).LoadFactor(), l.Get(hp(1)).LoadFactor(); f0 != 1 || f1 != 1 {
		t.Errorf("factors within the gap: %v, %v; want 1, 1 (the second report not yet weighed)", f0, f1)
	}
	clk.Add(refactorGap)
	l.ReportLoad(hp(2), clk.Now(), 400, 800, true, 0)
	f0, f1, f2 := l.Get(hp(0)).LoadFactor(), l.Get(hp(1)).LoadFactor(), l.Get(hp(2)).LoadFactor()
	if math.Abs(f1/f0-4) > 1e-9 || math.Abs(f2/f0-2) > 1e-9 {
		t.Errorf("factors after the gap: %v, %v, %v; want them in the capacities' ratio 1 : 4 : 2", f0, f1, f2)
	}
}
