package peerlist

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/criticality"
	"github.com/sluice-rpc/sluice/internal/balancing"
	"github.com/sluice-rpc/sluice/peer"
)

// scanAll is the list size up to which Choose looks at every peer rather
// than two random ones.
const scanAll = 8

// members is one version of a list's peers, immutable but for the lazily
// built ring and the cached list-wide figures, which depend only on it.
type members struct {
	peers []*Peer
	// byHostPort finds a peer of a long list by its host:port (List.Get),
	// nil for a list of at most indexFrom peers, which a scan finds as
	// fast: a caller that looks up each of its failed peers after every
	// change must not pay the list's length for each.
	byHostPort map[string]*Peer
	// uniform: every peer has the same weight (as discovery gave it).
	uniform bool
	total   float64 // the weights' sum
	// cum are the cumulative weights, for choosing two peers of a long
	// list in proportion to their weights; nil when uniform.
	cum []float64

	ringMu sync.Mutex // one build at a time; the others wait for it
	ring   atomic.Pointer[balancing.Ring]

	// A long list's choices and introspection need list-wide figures
	// (when its earliest peer became ready, whether ejections apply) that
	// cost a pass over every peer. They are worked out at most once per
	// figuresTTL (and at once after an ejection), not per choice.
	figures atomic.Pointer[figures]
}

// figures are a long list's list-wide figures as of a moment.
type figures struct {
	until    int64 // valid before this, Unix nanoseconds
	earliest int64 // when the earliest Ready peer became ready (MaxInt64: none)
	ejecting bool  // some peer is ejected and the list is not in panic
}

// figuresTTL is how long a long list's figures are reused. A ramp that
// starts, or an ejection that ends, takes effect up to this much late.
const figuresTTL = int64(100 * time.Millisecond)

// indexFrom is the length from which a list's members are indexed by
// host:port.
const indexFrom = 16

func newMembers(peers []*Peer) *members {
	m := &members{peers: peers, uniform: true}
	if len(peers) > indexFrom {
		m.byHostPort = make(map[string]*Peer, len(peers))
		for _, p := range peers {
			m.byHostPort[p.hostPort] = p
		}
	}
	for i, p := range peers {
		w := p.Weight()
		m.total += w
		if i > 0 && w != peers[0].Weight() {
			m.uniform = false
		}
	}
	if !m.uniform && len(peers) > scanAll {
		m.cum = make([]float64, len(peers))
		sum := 0.0
		for i, p := range peers {
			sum += p.Weight()
			m.cum[i] = sum
		}
	}
	return m
}

// mean returns the mean of the members' weights (1 for none).
func (m *members) mean() float64 {
	if len(m.peers) == 0 {
		return 1
	}
	return m.total / float64(len(m.peers))
}

// ringOf returns the members' consistent-hash ring, building it on first
// use (one caller builds, concurrent ones wait for it), or nil if it
// cannot be built (over balancing.MaxRingPoints members).
func (m *members) ringOf() *balancing.Ring {
	if r := m.ring.Load(); r != nil {
		return r
	}
	m.ringMu.Lock()
	defer m.ringMu.Unlock()
	if r := m.ring.Load(); r != nil {
		return r
	}
	names := make([]string, len(m.peers))
	weights := make([]float64, len(m.peers))
	for i, p := range m.peers {
		names[i], weights[i] = p.hostPort, p.Weight()
	}
	r, err := balancing.NewRing(names, weights)
	if err != nil {
		// The members were validated (unique host:ports, weights in
		// range) when they were set; only their number can be too many.
		return nil
	}
	m.ring.Store(r)
	return r
}

// figuresAt returns m's list-wide figures at ns, working them out again
// when those held are older than figuresTTL.
func (l *List) figuresAt(m *members, ns int64) *figures {
	held := m.figures.Load()
	if held != nil && ns < held.until {
		return held
	}
	f := &figures{until: ns + figuresTTL, earliest: math.MaxInt64}
	ready, ejected := 0, 0
	for _, p := range m.peers {
		if p.State() != peer.Ready {
			continue
		}
		ready++
		f.earliest = min(f.earliest, p.readyAt())
		if p.ejectedAt(ns) {
			ejected++
		}
	}
	f.ejecting = ejected > 0 && !balancing.Ejection(l.bal.Ejection).Panic(ready-ejected, len(m.peers))
	// Kept only if nothing replaced what was held meanwhile: an ejection
	// during the pass above stored its own (expired) figures, and these
	// may not count it.
	m.figures.CompareAndSwap(held, f)
	return f
}

// Choose picks a Ready peer for one attempt and counts it against that
// peer's busy limiter. Peers in exclude (those this call has used) are taken
// only when every other Ready peer refuses. It does not wait: it returns
// ErrNoPeers for an empty list, ErrThrottled when every Ready peer's limiter
// refuses, ErrConnecting when no peer is Ready but some are connecting, and
// ErrUnavailable when every peer is in TransientFailure. Idle peers it looks
// at start connecting. A caller that may wait for a connection does so on
// Changed when it gets ErrConnecting (or ErrUnavailable), then chooses again.
//
// Among the Ready peers it prefers, in turn: peers not ejected (see
// balance.Ejection), peers not slow (a slow one is probed now and then),
// then the fewest pending calls and a clearly lower latency; when the
// peers' effective weights differ (their weights, or slow start), it
// chooses at random in proportion to w / (1 + pending / w) instead, w
// being a peer's effective weight (balancing.LotteryKey).
//
// Choose does not count the call: the caller claims the peer (Claim) as
// soon as it has chosen, so that the choices made meanwhile see the call,
// then marks it Sent or gives the claim back (Unclaim).
func (l *List) Choose(exclude []*Peer) (*Peer, error) {
	return l.ChooseAt(exclude, l.clk.Now())
}

// ChooseAt is Choose at time now (from the list's clock), for callers that
// have just read the clock.
func (l *List) ChooseAt(exclude []*Peer, now time.Time) (*Peer, error) {
	return l.ChooseClassAt(exclude, now, criticality.Critical)
}

// ChooseClassAt is ChooseAt for a call of criticality class c: each peer
// takes it as its limiter and rest for c allow (a Busy answered to a call
// of a lower class throttles nothing of c), and a peer whose server said
// it refuses c (see Peer.EndBusy) does not take it. When every Ready peer
// refuses, one of them for its server's refusal of c, the error is a
// *RefusedError (peer.ErrThrottled).
func (l *List) ChooseClassAt(exclude []*Peer, now time.Time, c criticality.Class) (*Peer, error) {
	m := l.peers.Load()
	if len(m.peers) == 0 {
		var err error
		if m, err = l.noPeers(); err != nil {
			return nil, err
		}
	}
	peers := m.peers
	if len(peers) > scanAll {
		return l.chooseMany(m, exclude, now, c)
	}
	var v view
	l.look(m, now, &v)
	// Try peers best-first, tier by tier: fresh peers before those this
	// call used, and, within each, peers neither slow nor ejected before
	// slow ones (ejected ones never, unless the list panics). skip marks
	// the peers already tried.
	var skip [scanAll]bool
	for tier := range 4 {
		excluded, slow := tier >= 2, tier%2 == 1
		for {
			best, bestKey := -1, 0.0
			off := 0
			if len(peers) > 1 {
				off = rand.IntN(len(peers)) // random start breaks ties fairly
			}
			for j := range peers {
				i := (j + off) % len(peers)
				p := peers[i]
				if skip[i] || !v.usable[i] || v.slow[i] != slow || contains(exclude, p) != excluded {
					continue
				}
				if v.uniform {
					if best < 0 || better(p, peers[best], now) {
						best = i
					}
					continue
				}
				if k := balancing.LotteryKey(p.pending.Load(), v.weight[i], v.weight[i], rand.ExpFloat64()); best < 0 || k < bestKey {
					best, bestKey = i, k
				}
			}
			if best < 0 {
				break
			}
			skip[best] = true
			if p := l.take(peers[best], now, c, &v.avail, 0); p != nil {
				return p, nil
			}
		}
	}
	return nil, v.avail.err()
}

// noPeers is the error of a choice that found the list empty, unless the
// list has members now: then it returns them, to choose among. A
// resolver's first answer may come between the choice's load of the
// members and its look at resolving; Set stores the members before it
// clears resolving, so they are seen here, and the call does not fail
// NO_PEERS in that moment.
func (l *List) noPeers() (*members, error) {
	if l.resolving.Load() {
		return nil, ErrResolving
	}
	if m := l.peers.Load(); len(m.peers) > 0 {
		return m, nil
	}
	return nil, peer.ErrNoPeers
}

// view is what one choice over a short list knows of each peer.
type view struct {
	usable  [scanAll]bool    // Ready, and not ejected (unless the list panics)
	slow    [scanAll]bool    // slow, and its probe not due
	weight  [scanAll]float64 // effective weight
	uniform bool             // every usable peer has the same effective weight
	avail   availability
}

// look fills v for m's peers at time now: their states (asking Idle ones
// to connect), ejections, slowness and effective weights (relative to the
// mean weight, see balancing.LotteryKey).
func (l *List) look(m *members, now time.Time, v *view) {
	peers := m.peers
	ns := now.UnixNano()
	earliest := int64(math.MaxInt64)
	// ref is the lowest fresh latency estimate of a ready peer not slow,
	// known the lowest such estimate of any age: a slow peer is marked
	// against the former, and recovers against the latter, so that a
	// probe is judged even when the others' estimates have gone stale.
	var ref, known int64
	ready, ejected := 0, 0
	for i, p := range peers {
		if !v.avail.ready(p) {
			continue
		}
		v.usable[i] = true
		ready++
		if p.ejectedAt(ns) {
			ejected++
		}
		earliest = min(earliest, p.readyAt())
		if !p.slow.Load() {
			if lat := p.latencyAt(now); lat > 0 && (ref == 0 || lat < ref) {
				ref = lat
			}
			if lat := p.latencyAny(); lat > 0 && (known == 0 || lat < known) {
				known = lat
			}
		}
	}
	if ejected > 0 && !balancing.Ejection(l.bal.Ejection).Panic(ready-ejected, len(peers)) {
		for i, p := range peers {
			if v.usable[i] && p.ejectedAt(ns) {
				v.usable[i] = false
			}
		}
	}
	v.uniform = true
	first := -1.0
	loaded := l.loaded.Load()
	for i, p := range peers {
		if !v.usable[i] {
			continue
		}
		eff := l.weightAt(p, ns, earliest)
		v.slow[i] = p.judgeSlow(now, ref, known, eff < p.Weight())
		if loaded {
			eff *= p.loadFactorAt(ns)
		}
		w := eff / m.mean()
		v.weight[i] = w
		if first < 0 {
			first = w
		} else if w != first {
			v.uniform = false
		}
	}
}

// judgeSlow updates p's slow mark and reports whether p is to be passed
// over now: slow, with its next probe not due. ref is the lowest fresh
// latency estimate among the ready peers not marked slow, known the lowest
// of any age (0: none). A peer is marked slow when its fresh estimate
// stands far above ref, and unmarked when its estimate (a slow peer's is
// its latest probe) no longer stands far above known. For a peer in its
// slow-start window (ramping), "far" is nearer (balancing.Slow's cold rule).
func (p *Peer) judgeSlow(now time.Time, ref, known int64, ramping bool) bool {
	ns := now.UnixNano()
	slow := p.slow.Load()
	lat := p.latencyAt(now)
	if slow {
		// Its latest probe, whatever its age: under sparse traffic the
		// probe is stale by the next choice, and a recovered peer would
		// stay marked.
		lat = p.latencyAny()
	}
	switch {
	case lat == 0:
	case !slow && ref > 0 && balancing.Slow(time.Duration(lat), time.Duration(ref), ramping):
		p.probedAt.Store(ns) // its first probe is balancing.ProbeInterval away
		p.slow.Store(true)
	case slow && known > 0 && !balancing.Slow(time.Duration(lat), time.Duration(known), ramping):
		p.slow.Store(false)
	}
	return p.slow.Load() && ns-p.probedAt.Load() < int64(balancing.ProbeInterval)
}

// weightAt returns p's effective weight at ns (Unix nanoseconds): its
// weight times its slow-start factor, earliest being when the earliest
// Ready peer of the list became ready. A peer in its window ramps only if
// some other peer became ready well before it (balancing.SlowStart.Ramping):
// peers that come up together, as when a client starts, take full shares
// at once.
func (l *List) weightAt(p *Peer, ns, earliest int64) float64 {
	w := p.Weight()
	s := balancing.SlowStart(l.bal.SlowStart)
	r := p.readyAt()
	if r == 0 {
		return w
	}
	elapsed := time.Duration(ns - r)
	if !s.Ramping(elapsed, time.Duration(r-earliest)) {
		return w
	}
	return w * s.Factor(elapsed)
}

// effectiveWeight returns p's effective weight at now, for introspection.
func (l *List) effectiveWeight(p *Peer, now time.Time) float64 {
	if p.State() != peer.Ready {
		return p.Weight()
	}
	ns := now.UnixNano()
	return l.weightAt(p, ns, l.figuresAt(l.peers.Load(), ns).earliest)
}

// chooseMany picks among more than scanAll peers: the power of two random
// choices among Ready peers not excluded (drawn in proportion to their
// weights), then, if both refuse, one pass over the rest from a random
// start (fresh peers first, then excluded ones), so that the overload case
// costs O(n), not O(n^2). Ejected peers are left out unless the list
// panics; of the two, a slow one loses unless its probe is due.
func (l *List) chooseMany(m *members, exclude []*Peer, now time.Time, c criticality.Class) (*Peer, error) {
	peers := m.peers
	ns := now.UnixNano()
	f := l.figuresAt(m, ns)
	ejecting := f.ejecting
	var avail availability
	a, b := pickTwo(m, exclude, &avail, ns, ejecting)
	if b >= 0 && l.preferOf(peers[b], peers[a], now, m, f.earliest) {
		a, b = b, a
	}
	for _, i := range [2]int{a, b} {
		if i >= 0 {
			if p := l.take(peers[i], now, c, &avail, 0); p != nil {
				return p, nil
			}
		}
	}
	off := rand.IntN(len(peers))
	for _, allowExcluded := range [2]bool{false, true} {
		for j := range peers {
			i := (j + off) % len(peers)
			p := peers[i]
			if i == a || i == b || contains(exclude, p) != allowExcluded || (ejecting && p.ejectedAt(ns)) || !avail.ready(p) {
				continue
			}
			if p := l.take(p, now, c, &avail, 0); p != nil {
				return p, nil
			}
		}
	}
	return nil, avail.err()
}

// preferOf reports whether a should be preferred to b at now, two peers
// of m, a long list, drawn in proportion to their weights (earliest being
// when the list's earliest Ready peer became ready): a slow peer (probe
// not due) loses, each judged against the other, a peer in its slow-start
// window as a cold one; then, with equal weights and neither in slow
// start, better decides; else balancing.LotteryKey's draw.
func (l *List) preferOf(a, b *Peer, now time.Time, m *members, earliest int64) bool {
	// The two were drawn in proportion to their weights already: their
	// slow-start factors weigh them further, and their calls pending per
	// unit of weight decide.
	ns := now.UnixNano()
	fa, fb := l.weightAt(a, ns, earliest)/a.Weight(), l.weightAt(b, ns, earliest)/b.Weight()
	sa := a.judgeSlow(now, b.freshIfNotSlow(now), b.knownIfNotSlow(), fa < 1)
	sb := b.judgeSlow(now, a.freshIfNotSlow(now), a.knownIfNotSlow(), fb < 1)
	if sa != sb {
		return sb
	}
	// Their load factors (their servers' reports) weigh them as slow
	// start does.
	fa, fb = fa*a.loadFactorAt(ns), fb*b.loadFactorAt(ns)
	if m.uniform && fa == fb {
		return better(a, b, now)
	}
	mean := m.mean()
	wa, wb := a.Weight()*fa/mean, b.Weight()*fb/mean
	return balancing.LotteryKey(a.pending.Load(), wa, fa, rand.ExpFloat64()) < balancing.LotteryKey(b.pending.Load(), wb, fb, rand.ExpFloat64())
}

// availability tallies the states of the peers a choice looked at, to say
// why it found none.
type availability struct {
	anyReady, anyConnecting bool
	// refusedBy is a peer that refused the call's class (class) because
	// its server refuses refusing; nil if none did.
	refusedBy       *Peer
	class, refusing criticality.Class
}

// ready reports whether p is Ready, noting its state; an Idle peer is
// asked to connect.
func (v *availability) ready(p *Peer) bool {
	switch p.State() {
	case peer.Ready:
		v.anyReady = true
		return true
	case peer.Idle:
		p.conn.Connect()
		v.anyConnecting = true
	case peer.Connecting:
		v.anyConnecting = true
	}
	return false
}

// err is the error of a choice that found no peer to take the attempt.
func (v *availability) err() error {
	switch {
	case v.anyReady && v.refusedBy != nil:
		return &RefusedError{HostPort: v.refusedBy.hostPort, Class: v.class, Refusing: v.refusing}
	case v.anyReady:
		return peer.ErrThrottled // Ready peers exist; their limiters refused
	case v.anyConnecting:
		return ErrConnecting
	}
	return peer.ErrUnavailable
}

// take returns p if it takes the attempt of a call of class c at now: its
// rest after a pushback and its busy limiter for c allow it, its server
// does not refuse c, and, if p is slow, this is its probe. held is 1 when
// p's pending count already holds the attempt (ClaimKeyClassAt claims
// before it asks), else 0: the rest's level is held against the calls
// pending before this one. A refusal is counted as throttled, and noted
// in av when the server refuses c.
func (l *List) take(p *Peer, now time.Time, c criticality.Class, av *availability, held int64) *Peer {
	ns := now.UnixNano()
	var ok bool
	if c == criticality.Critical { // the default class: the peer's own limiter and rest
		rest := p.rest.until.Load()
		ok = (rest == 0 || ns >= rest || p.restAllows(&p.rest, ns, c, held)) && p.limiter.AllowAt(now)
	} else {
		ok = p.allowsClass(now, c, held)
	}
	if ok {
		if p.slow.Load() {
			// One probe per balancing.ProbeInterval; a choice that lost the race
			// for it may still take the peer as a last resort.
			if old := p.probedAt.Load(); ns-old >= int64(balancing.ProbeInterval) {
				p.probedAt.CompareAndSwap(old, ns)
			}
		}
		return p
	}
	p.refused.Add(1)
	p.m.Throttled.Inc(1)
	if cs := p.cls.Load(); cs != nil {
		if r := cs.refusing(ns); r >= c && av.refusedBy == nil {
			av.refusedBy, av.class, av.refusing = p, c, r
		}
	}
	return nil
}

// better reports whether a should be preferred to b at time now, peers
// of equal effective weights (balancing.Better): fewer pending calls, then
// a fresh latency estimate less than half of b's and over a millisecond
// below it. A stale estimate (see latencyTTL) counts as unknown.
func better(a, b *Peer, now time.Time) bool {
	pa, pb := a.pending.Load(), b.pending.Load()
	if pa != pb {
		return pa < pb
	}
	return balancing.Better(pa, pb, time.Duration(a.latencyAt(now)), time.Duration(b.latencyAt(now)))
}

func contains(ps []*Peer, p *Peer) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

// pickTwo returns the indexes of two distinct random Ready peers of m not
// in exclude, nor ejected when ejecting (-1 where none was found within a
// few draws), drawn in proportion to their weights.
func pickTwo(m *members, exclude []*Peer, avail *availability, ns int64, ejecting bool) (a, b int) {
	peers := m.peers
	a, b = -1, -1
	for tries := 0; tries < 4*len(exclude)+4 && b < 0; tries++ {
		i := m.draw()
		p := peers[i]
		if i == a || contains(exclude, p) || (ejecting && p.ejectedAt(ns)) || !avail.ready(p) {
			continue
		}
		if a < 0 {
			a = i
		} else {
			b = i
		}
	}
	return a, b
}

// draw returns the index of a random peer of m, in proportion to weight.
func (m *members) draw() int {
	if m.cum == nil {
		return rand.IntN(len(m.peers))
	}
	x := rand.Float64() * m.total
	lo, hi := 0, len(m.cum)-1
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if m.cum[mid] <= x {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}
