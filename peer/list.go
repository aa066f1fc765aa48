package peer

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/busy"
	"github.com/sluice-rpc/sluice/internal/clock"
	"github.com/sluice-rpc/sluice/stats"
	"github.com/uber/tchannel-go"
)

// scanAll is the list size up to which Choose looks at every peer rather
// than two random ones.
const scanAll = 8

// List is the set of peers of one service. Reads are lock-free: the peers
// live in an immutable slice replaced whole on Add and Remove, so calls in
// flight keep using the peers they chose.
type List struct {
	service string
	cfg     busy.Config
	clk     clock.Clock
	rec     *stats.Recorder

	mu    sync.Mutex // serialises Add and Remove
	peers atomic.Pointer[[]*Peer]
}

// NewList returns an empty list of service's peers. Each peer gets a busy
// limiter configured by cfg on clock clk (nil: the wall clock) and reports
// its metrics through rec (nil: nowhere).
func NewList(service string, cfg busy.Config, clk clock.Clock, rec *stats.Recorder) (*List, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if clk == nil {
		clk = clock.Real
	}
	if rec == nil {
		rec = stats.NewRecorder(nil)
	}
	l := &List{service: service, cfg: cfg, clk: clk, rec: rec}
	l.peers.Store(&[]*Peer{})
	return l, nil
}

// Add adds the peer at hostPort, sending through tch (which may be nil when
// the list is used without a channel). Adding a peer already present returns
// the existing one.
func (l *List) Add(hostPort string, tch *tchannel.Peer) (*Peer, error) {
	if err := ValidateHostPort(hostPort); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	old := *l.peers.Load()
	for _, p := range old {
		if p.hostPort == hostPort {
			return p, nil
		}
	}
	lim, err := busy.New(l.cfg, l.clk)
	if err != nil {
		return nil, err
	}
	p := &Peer{hostPort: hostPort, tch: tch, limiter: lim, m: l.rec.Peer(l.service, hostPort)}
	p.m.Limit.Update(lim.Limit())
	next := make([]*Peer, len(old), len(old)+1)
	copy(next, old)
	next = append(next, p)
	l.peers.Store(&next)
	return p, nil
}

// Remove removes the peer at hostPort. Calls already sent to it finish
// normally. It returns an error if the peer is not in the list.
func (l *List) Remove(hostPort string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := *l.peers.Load()
	for i, p := range old {
		if p.hostPort == hostPort {
			next := make([]*Peer, 0, len(old)-1)
			next = append(next, old[:i]...)
			next = append(next, old[i+1:]...)
			l.peers.Store(&next)
			return nil
		}
	}
	return fmt.Errorf("peer: %s is not a peer of this list", hostPort)
}

// Peers returns the current peers. The slice must not be modified.
func (l *List) Peers() []*Peer { return *l.peers.Load() }

// Get returns the peer at hostPort, or nil.
func (l *List) Get(hostPort string) *Peer {
	for _, p := range l.Peers() {
		if p.hostPort == hostPort {
			return p
		}
	}
	return nil
}

// Choose picks a peer for one attempt and counts it against that peer's
// busy limiter. Peers in exclude (those this call has used) are taken only
// when every other peer refuses. It returns ErrNoPeers for an empty list and
// ErrThrottled when every peer's limiter refuses.
//
// Choose does not call Begin; the caller does once it sends.
func (l *List) Choose(exclude []*Peer) (*Peer, error) {
	return l.ChooseAt(exclude, l.clk.Now())
}

// ChooseAt is Choose at time now (from the list's clock), for callers that
// have just read the clock.
func (l *List) ChooseAt(exclude []*Peer, now time.Time) (*Peer, error) {
	peers := l.Peers()
	if len(peers) == 0 {
		return nil, ErrNoPeers
	}
	if len(peers) > scanAll {
		return l.chooseMany(peers, exclude, now)
	}
	// A small list is scanned whole: try allowed peers best-first, first
	// the fresh ones, then the excluded ones. tried marks peers whose
	// limiter already refused this request.
	var tried [scanAll]bool
	for _, allowExcluded := range [2]bool{false, true} {
		for {
			best := -1
			off := rand.IntN(len(peers)) // random start breaks ties fairly
			for j := range peers {
				i := (j + off) % len(peers)
				p := peers[i]
				if tried[i] || contains(exclude, p) != allowExcluded {
					continue
				}
				if best < 0 || better(p, peers[best], now) {
					best = i
				}
			}
			if best < 0 {
				break
			}
			tried[best] = true
			if p := l.try(peers[best], now); p != nil {
				return p, nil
			}
		}
	}
	return nil, ErrThrottled
}

// chooseMany picks among more than scanAll peers: the power of two random
// choices among peers not excluded, then, if both refuse, one pass over the
// rest from a random start (fresh peers first, then excluded ones), so that
// the overload case costs O(n), not O(n^2).
func (l *List) chooseMany(peers, exclude []*Peer, now time.Time) (*Peer, error) {
	a, b := pickTwo(peers, exclude)
	if b >= 0 && better(peers[b], peers[a], now) {
		a, b = b, a
	}
	for _, i := range [2]int{a, b} {
		if i >= 0 {
			if p := l.try(peers[i], now); p != nil {
				return p, nil
			}
		}
	}
	off := rand.IntN(len(peers))
	for _, allowExcluded := range [2]bool{false, true} {
		for j := range peers {
			i := (j + off) % len(peers)
			if i == a || i == b || contains(exclude, peers[i]) != allowExcluded {
				continue
			}
			if p := l.try(peers[i], now); p != nil {
				return p, nil
			}
		}
	}
	return nil, ErrThrottled
}

func (l *List) try(p *Peer, now time.Time) *Peer {
	if p.limiter.AllowAt(now) {
		return p
	}
	p.refused.Add(1)
	p.m.Throttled.Inc(1)
	return nil
}

// better reports whether a should be preferred to b at time now: fewer
// pending calls, then a fresh latency estimate less than half of b's. Closer
// latencies count as a tie, which the caller breaks at random: loopback and
// LAN latencies jitter by tens of percent, and preferring the marginally
// faster peer would send it all the traffic of a lightly loaded client. A
// stale estimate (see latencyTTL) counts as unknown.
func better(a, b *Peer, now time.Time) bool {
	pa, pb := a.pending.Load(), b.pending.Load()
	if pa != pb {
		return pa < pb
	}
	la, lb := a.latencyAt(now), b.latencyAt(now)
	return la > 0 && 2*la < lb
}

func contains(ps []*Peer, p *Peer) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

// pickTwo returns the indexes of two distinct random peers not in exclude
// (-1 where none was found within a few draws).
func pickTwo(peers, exclude []*Peer) (a, b int) {
	a, b = -1, -1
	for tries := 0; tries < 4*len(exclude)+4 && b < 0; tries++ {
		i := rand.IntN(len(peers))
		if i == a || contains(exclude, peers[i]) {
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
