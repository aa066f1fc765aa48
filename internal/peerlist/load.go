package peerlist

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/criticality"
	"github.com/sluice-rpc/sluice/internal/balancing"
)

// loadState is a peer's view of its server's load reports (see
// List.ReportLoad): its capacity estimate and its load factor, which
// multiplies its weight in the choice. A peer whose server sends none
// keeps factor 1.
type loadState struct {
	capacity atomic.Uint64 // math.Float64bits of the capacity estimate; 0: none
	factor   atomic.Uint64 // math.Float64bits of the load factor; 0: neutral (1)
	loadAt   atomic.Int64  // the last report's time, Unix nanoseconds
	// atLeast says the estimate is only a lower bound, from a report under
	// 1% utilisation (balancing.LoadCapacity): the next report that says
	// more replaces it rather than averaging with it. A peer's reports
	// come one at a time, from its connection's reader.
	atLeast atomic.Bool
}

// loadFactorAt returns p's load factor at ns: 1 without a report within
// balancing.LoadTTL.
func (p *Peer) loadFactorAt(ns int64) float64 {
	f := p.factor.Load()
	if f == 0 || ns-p.loadAt.Load() > int64(balancing.LoadTTL) {
		return 1
	}
	return math.Float64frombits(f)
}

// LoadFactor returns p's load factor now (1: neutral), for introspection
// and tests.
func (p *Peer) LoadFactor() float64 { return p.loadFactorAt(p.l.clk.Now().UnixNano()) }

// ReportLoad takes a load report from the server at hostPort, at now: the
// calls it answers a second, its utilisation in thousandths if it
// reported one (hasU), and the highest class it refuses (0: none). The
// peer's capacity estimate (balancing.LoadCapacity) moves towards the
// report's, and every reporting peer's load factor is worked out again
// (balancing.LoadFactors). A refused class is refused locally, as a Busy
// that names it would (see EndBusy), for DefaultRefusal; a report that
// names none ends such a refusal. A host:port not in the list is ignored.
func (l *List) ReportLoad(hostPort string, now time.Time, qps, u int64, hasU bool, refusing criticality.Class) {
	p := l.Get(hostPort)
	if p == nil {
		return
	}
	ns := now.UnixNano()
	if !p.limiter.Disabled() {
		switch cs := p.cls.Load(); {
		case refusing.Valid():
			p.refuse(p.classes(now), now, refusing, DefaultRefusal)
		case cs != nil && cs.refusing(ns) != 0:
			cs.refusal.Store(0)
		}
	}
	if !hasU {
		return
	}
	c, atLeast, ok := balancing.LoadCapacity(float64(qps), float64(u)/1000)
	if !ok {
		return
	}
	old := math.Float64frombits(p.capacity.Load())
	if ns-p.loadAt.Load() > int64(balancing.LoadTTL) {
		old = 0 // stale: start again
	}
	switch {
	case atLeast && old > 0 && c <= old:
		// A lower bound the estimate already meets: it says nothing new,
		// but that the server is there (see LoadCapacity).
		p.loadAt.Store(ns)
		return
	case atLeast:
		// No estimate, or one below what the server can surely take: the
		// bound is the estimate until a report says more.
	case old > 0 && !p.atLeast.Load():
		c = old + balancing.LoadSmoothing*(c-old)
	}
	p.atLeast.Store(atLeast)
	p.capacity.Store(math.Float64bits(c))
	p.loadAt.Store(ns)
	// Working the factors out again passes over the list: with every peer
	// reporting every 100 ms that is O(n^2) an interval. A long
	// list does it at most once per refactorGap (its peers report all
	// the time: the next report after the gap takes this one's capacity
	// in); a short one on every report.
	if len(l.peers.Load().peers) > refactorEvery {
		last := l.refactoredAt.Load()
		if ns-last < int64(refactorGap) || !l.refactoredAt.CompareAndSwap(last, ns) {
			return
		}
	}
	l.refactor(ns)
}

// Above refactorEvery peers, a list works its load factors out again at
// most once per refactorGap, half a Sluice server's report interval.
const (
	refactorEvery = 64
	refactorGap   = 50 * time.Millisecond
)

// refactor works out the load factors of the list's peers at ns.
func (l *List) refactor(ns int64) {
	peers := l.peers.Load().peers
	caps := make([]float64, len(peers))
	for i, p := range peers {
		if ns-p.loadAt.Load() <= int64(balancing.LoadTTL) {
			caps[i] = math.Float64frombits(p.capacity.Load())
		}
	}
	out := make([]float64, len(peers))
	if balancing.LoadFactors(caps, out) > 0 {
		l.loaded.Store(true) // from now on choices look at the factors
	}
	for i, p := range peers {
		if caps[i] > 0 {
			p.factor.Store(math.Float64bits(out[i]))
		} else {
			p.factor.Store(0)
		}
	}
}

// Capacity returns p's capacity estimate from its server's load reports,
// calls a second, and whether it has one (a report within
// balancing.LoadTTL), for introspection and tests.
func (p *Peer) Capacity() (float64, bool) {
	c := math.Float64frombits(p.capacity.Load())
	return c, c > 0 && p.l.clk.Now().UnixNano()-p.loadAt.Load() <= int64(balancing.LoadTTL)
}
