package peer

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/balance"
	"github.com/sluice-rpc/sluice/busy"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/stats"
)

// scanAll is the list size up to which Choose looks at every peer rather
// than two random ones.
const scanAll = 8

// List is the set of peers of one service. Reads are lock-free: the peers
// live in an immutable slice replaced whole on Add and Remove, so calls in
// flight keep using the peers they chose.
type List struct {
	service string
	cfg     busy.Config // with Clock set to clk
	clk     clock.Clock
	rec     *stats.Recorder
	pool    *Pool

	mu    sync.Mutex // serialises Add, Remove and Set
	peers atomic.Pointer[[]*Peer]
	// resolving is true until the first Set of a list whose peers come
	// from a resolver (ListConfig.Resolving).
	resolving atomic.Bool
}

// ListConfig configures a List. Its zero value is a list of an unnamed
// service's peers with the default busy limiters, on the wall clock,
// reporting nowhere and managing no connections.
type ListConfig struct {
	// Service is the name of the service whose peers the list holds; it
	// names the peers' metrics.
	Service string
	// Busy configures each peer's busy limiter; the zero value means the
	// design's defaults (see busy.Config). Its Clock must be nil: the
	// limiters run on the List's Clock, whose readings the List passes
	// them.
	Busy busy.Config
	// Clock is the time source of the List and of its peers' busy
	// limiters; nil means clock.Real.
	Clock clock.Clock
	// Recorder receives the peers' metrics; nil means nowhere.
	Recorder *stats.Recorder
	// Pool gives the peers their connections. nil means the list manages
	// no connections and every peer counts as Ready: for simulations and
	// tests of the choice alone.
	Pool *Pool
	// Resolving says the list's peers will come from a resolver (List.Set):
	// until the first Set, Choose returns ErrResolving rather than
	// ErrNoPeers, so that calls wait for the resolver's first answer.
	Resolving bool
	// Balance configures slow start, outlier ejection and shard keys'
	// bounded load (see package balance); the zero value means the
	// defaults.
	Balance balance.Config
}

// Validate reports the first rule c breaks, or nil.
func (c ListConfig) Validate() error {
	if c.Busy.Clock != nil {
		return errors.New("peer: ListConfig.Busy.Clock is set, must be nil: the peers' limiters run on ListConfig.Clock")
	}
	if err := c.Busy.Validate(); err != nil {
		return fmt.Errorf("peer: ListConfig.Busy: %w", err)
	}
	if err := c.Balance.Validate(); err != nil {
		return fmt.Errorf("peer: ListConfig.Balance: %w", err)
	}
	return nil
}

// NewList returns an empty list of cfg.Service's peers, configured by cfg,
// or cfg's validation error.
func NewList(cfg ListConfig) (*List, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
	}
	if cfg.Recorder == nil {
		cfg.Recorder = stats.NewRecorder(nil)
	}
	cfg.Busy.Clock = cfg.Clock
	l := &List{service: cfg.Service, cfg: cfg.Busy, clk: cfg.Clock, rec: cfg.Recorder, pool: cfg.Pool}
	l.peers.Store(&[]*Peer{})
	l.resolving.Store(cfg.Resolving)
	return l, nil
}

// Add adds the peer at hostPort, taking its connector from the list's pool
// and asking it to connect, so that the connection is in place by the time
// calls come (they wait for it if they come sooner). Adding a peer already
// present returns the existing one.
func (l *List) Add(hostPort string) (*Peer, error) {
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
	p, err := l.newPeer(hostPort, 1)
	if err != nil {
		return nil, err
	}
	next := make([]*Peer, len(old), len(old)+1)
	copy(next, old)
	next = append(next, p)
	l.peers.Store(&next)
	return p, nil
}

// newPeer makes the peer at hostPort, of weight w, with its limiter and
// its connector from the pool, asked to connect.
func (l *List) newPeer(hostPort string, w float64) (*Peer, error) {
	lim, err := busy.New(l.cfg)
	if err != nil {
		return nil, err
	}
	var c *conn
	if l.pool != nil {
		if c, err = l.pool.acquire(hostPort); err != nil {
			return nil, err
		}
		c.Connect()
	}
	p := &Peer{hostPort: hostPort, conn: c, limiter: lim, m: l.rec.Peer(l.service, hostPort)}
	p.weight.Store(math.Float64bits(w))
	p.m.Limit.Update(lim.Limit())
	return p, nil
}

// Member is a peer as List.Set wants it.
type Member struct {
	HostPort string
	// Weight is the peer's share relative to the others; 0 means 1.
	Weight float64
}

// Set makes the list's peers exactly members, in one change: peers that
// stay keep their connection, limiter, latency estimate and counts (their
// weight is updated); new ones are added and start connecting; the others
// are removed as Remove does (calls in flight to them finish, then their
// connections close). It checks every member before changing anything: an
// invalid host:port or weight (negative, infinite, NaN), or a host:port
// listed twice, is an error and changes nothing.
func (l *List) Set(members []Member) error {
	seen := make(map[string]float64, len(members))
	for _, m := range members {
		if err := ValidateHostPort(m.HostPort); err != nil {
			return err
		}
		if !(m.Weight >= 0) || math.IsInf(m.Weight, 1) {
			return fmt.Errorf("peer: %s has weight %v, must be a finite number >= 0 (0: 1)", m.HostPort, m.Weight)
		}
		if _, dup := seen[m.HostPort]; dup {
			return fmt.Errorf("peer: %s is listed twice", m.HostPort)
		}
		seen[m.HostPort] = cmp.Or(m.Weight, 1)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	old := *l.peers.Load()
	next := make([]*Peer, 0, len(members))
	var gone []*Peer
	for _, p := range old {
		if w, ok := seen[p.hostPort]; ok {
			p.weight.Store(math.Float64bits(w))
			next = append(next, p)
			delete(seen, p.hostPort)
		} else {
			gone = append(gone, p)
		}
	}
	for _, m := range members { // in the members' order
		w, ok := seen[m.HostPort]
		if !ok {
			continue
		}
		p, err := l.newPeer(m.HostPort, w)
		if err != nil {
			for _, q := range next[len(old)-len(gone):] { // undo: release the new ones
				if q.conn != nil {
					l.pool.release(q.conn)
				}
			}
			return err
		}
		next = append(next, p)
	}
	l.peers.Store(&next)
	for _, p := range gone {
		if p.conn != nil {
			l.pool.release(p.conn)
		}
	}
	if l.resolving.Swap(false) && l.pool != nil {
		l.pool.notify() // calls waiting for the first answer choose again
	}
	return nil
}

// Remove removes the peer at hostPort. Calls already sent to it finish
// normally; its connector stops, and its connection closes after them,
// unless another list still holds the host:port. It returns an error if the
// peer is not in the list.
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
			if p.conn != nil {
				l.pool.release(p.conn)
			}
			return nil
		}
	}
	return fmt.Errorf("peer: %s is not a peer of this list", hostPort)
}

// Changed returns a channel that is closed at the next change of a peer's
// State, or nil (never closed) for a list without a pool. A caller that
// got ErrConnecting reads it before choosing and waits on it after.
func (l *List) Changed() <-chan struct{} {
	if l.pool == nil {
		return nil
	}
	return l.pool.Changed()
}

// Connect asks every Idle peer to connect (calls do so for the peers they
// look at). It does not wait; watch the peers' states with Changed.
func (l *List) Connect() {
	for _, p := range l.Peers() {
		if p.conn != nil {
			p.conn.Connect()
		}
	}
}

// Service returns the name of the service whose peers the list holds.
func (l *List) Service() string { return l.service }

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

// Choose picks a Ready peer for one attempt and counts it against that
// peer's busy limiter. Peers in exclude (those this call has used) are taken
// only when every other Ready peer refuses. It does not wait: it returns
// ErrNoPeers for an empty list, ErrThrottled when every Ready peer's limiter
// refuses, ErrConnecting when no peer is Ready but some are connecting, and
// ErrUnavailable when every peer is in TransientFailure. Idle peers it looks
// at start connecting. A caller that may wait for a connection does so on
// Changed when it gets ErrConnecting (or ErrUnavailable), then chooses again.
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
		if l.resolving.Load() {
			return nil, ErrResolving
		}
		return nil, ErrNoPeers
	}
	if len(peers) > scanAll {
		return l.chooseMany(peers, exclude, now)
	}
	// A small list is scanned whole: try Ready peers best-first, first the
	// fresh ones, then the excluded ones. skip marks peers already tried
	// or not Ready.
	var (
		skip  [scanAll]bool
		avail availability
	)
	for _, allowExcluded := range [2]bool{false, true} {
		for {
			best, off := -1, 0
			if len(peers) > 1 {
				off = rand.IntN(len(peers)) // random start breaks ties fairly
			}
			for j := range peers {
				i := (j + off) % len(peers)
				p := peers[i]
				if skip[i] || contains(exclude, p) != allowExcluded {
					continue
				}
				if !avail.ready(p) {
					skip[i] = true
					continue
				}
				if best < 0 || better(p, peers[best], now) {
					best = i
				}
			}
			if best < 0 {
				break
			}
			skip[best] = true
			if p := l.try(peers[best], now); p != nil {
				return p, nil
			}
		}
	}
	return nil, avail.err()
}

// chooseMany picks among more than scanAll peers: the power of two random
// choices among Ready peers not excluded, then, if both refuse, one pass
// over the rest from a random start (fresh peers first, then excluded ones),
// so that the overload case costs O(n), not O(n^2).
func (l *List) chooseMany(peers, exclude []*Peer, now time.Time) (*Peer, error) {
	var avail availability
	a, b := pickTwo(peers, exclude, &avail)
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
			if i == a || i == b || contains(exclude, peers[i]) != allowExcluded || !avail.ready(peers[i]) {
				continue
			}
			if p := l.try(peers[i], now); p != nil {
				return p, nil
			}
		}
	}
	return nil, avail.err()
}

// availability tallies the states of the peers a choice looked at, to say
// why it found none.
type availability struct{ anyReady, anyConnecting bool }

// ready reports whether p is Ready, noting its state; an Idle peer is
// asked to connect.
func (v *availability) ready(p *Peer) bool {
	switch p.State() {
	case Ready:
		v.anyReady = true
		return true
	case Idle:
		p.conn.Connect()
		v.anyConnecting = true
	case Connecting:
		v.anyConnecting = true
	}
	return false
}

// err is the error of a choice that found no peer to take the attempt.
func (v *availability) err() error {
	switch {
	case v.anyReady:
		return ErrThrottled // Ready peers exist; their limiters refused
	case v.anyConnecting:
		return ErrConnecting
	}
	return ErrUnavailable
}

func (l *List) try(p *Peer, now time.Time) *Peer {
	if rest := p.restUntil.Load(); (rest == 0 || now.UnixNano() >= rest || p.pending.Load() < p.restPending.Load()) && p.limiter.AllowAt(now) {
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

// pickTwo returns the indexes of two distinct random Ready peers not in
// exclude (-1 where none was found within a few draws).
func pickTwo(peers, exclude []*Peer, avail *availability) (a, b int) {
	a, b = -1, -1
	for tries := 0; tries < 4*len(exclude)+4 && b < 0; tries++ {
		i := rand.IntN(len(peers))
		if i == a || contains(exclude, peers[i]) || !avail.ready(peers[i]) {
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
