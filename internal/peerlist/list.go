package peerlist

import (
	"cmp"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/balance"
	"github.com/sluice-rpc/sluice/busy"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/balancing"
	"github.com/sluice-rpc/sluice/internal/config"
	"github.com/sluice-rpc/sluice/internal/departed"
	"github.com/sluice-rpc/sluice/internal/pool"
	"github.com/sluice-rpc/sluice/internal/recorder"
	"github.com/sluice-rpc/sluice/peer"
)

// List is the set of peers of one service. Reads are lock-free: the peers
// live in an immutable slice replaced whole on Add and Remove, so calls in
// flight keep using the peers they chose.
type List struct {
	service string
	cfg     busy.Config // with Clock set to clk
	clk     clock.Clock
	rec     *recorder.Recorder
	pool    *pool.Pool

	bal balance.Config

	mu    sync.Mutex // serialises Add, Remove and Set
	peers atomic.Pointer[members]
	// departed holds the peers that left, for DepartedGrace (at most
	// MaxDeparted of them): one that comes back within it takes up its
	// judgement again (see Set). l.mu.
	departed *departed.Table[*Peer]
	sweep    departed.Sweeper // prunes departed while it holds peers; l.mu
	// ejectMu serialises ejections, so that the cap on ejected peers
	// holds; it guards each peer's ejectK and ejectEnd.
	ejectMu sync.Mutex
	// capFullUntil is, once an ejection was refused for the cap, when the
	// first of the ejections that filled it ends, Unix nanoseconds: no
	// ejection can happen before then (Set resets it: a peer that left
	// frees its place).
	capFullUntil atomic.Int64
	// sharedUntil is, once an ejection was refused for a failure every
	// chosen peer shared (failingAlike), until when that verdict stands,
	// Unix nanoseconds: at most figuresTTL, and not past the first answer
	// that says a peer works again.
	sharedUntil atomic.Int64
	// resolving is true until the first Set of a list whose peers come
	// from a resolver (Config.Resolving).
	resolving atomic.Bool
	// loaded is set once a peer's server sent a load report (load.go):
	// until then choices skip the load factors.
	loaded atomic.Bool
	// refactoredAt is when a long list last worked its load factors out
	// (Unix ns; see ReportLoad).
	refactoredAt atomic.Int64

	// The feed of changes (TakeChanged), on from its first use: the peers
	// whose State changed, or that joined or left, since the last take,
	// each at most once (Peer.queued).
	feedOn atomic.Bool
	fmu    sync.Mutex
	feed   []*Peer
}

// Config configures a List. Its zero value is a list of an unnamed
// service's peers with the default busy limiters, on the wall clock,
// reporting nowhere and managing no connections.
type Config struct {
	// Service is the name of the service whose peers the list holds; it
	// names the peers' metrics.
	Service string
	// Busy configures each peer's busy limiter; the zero value means the
	// design's defaults (see busy.Config). Its Clock, nil or the List's
	// Clock: the limiters run on the List's Clock, whose readings the
	// List passes them.
	Busy busy.Config
	// Clock is the time source of the List and of its peers' busy
	// limiters; nil means clock.Real.
	Clock clock.Clock
	// Recorder receives the peers' metrics; nil means nowhere.
	Recorder *recorder.Recorder
	// Pool gives the peers their connections. nil means the list manages
	// no connections and every peer counts as Ready: for simulations and
	// tests of the choice alone.
	Pool *pool.Pool
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
func (c Config) Validate() error {
	own := c.Clock
	if own == nil {
		own = clock.Real
	}
	if c.Busy.Clock != nil && !config.Same(c.Busy.Clock, own) {
		return config.Errorf("peerlist", "Config.Busy.Clock", config.Verbatim(fmt.Sprintf("%T", c.Busy.Clock)), "must be nil or Config.Clock: the peers' limiters run on the List's clock")
	}
	if err := c.Busy.Validate(); err != nil {
		return config.Nest(err, "peerlist", "Config.Busy")
	}
	if err := c.Balance.Validate(); err != nil {
		return config.Nest(err, "peerlist", "Config.Balance")
	}
	return nil
}

// New returns an empty list of cfg.Service's peers, configured by cfg,
// or cfg's validation error.
func New(cfg Config) (*List, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
	}
	if cfg.Recorder == nil {
		cfg.Recorder = recorder.New(nil)
	}
	cfg.Busy.Clock = cfg.Clock
	l := &List{service: cfg.Service, cfg: cfg.Busy, clk: cfg.Clock, rec: cfg.Recorder, pool: cfg.Pool, bal: cfg.Balance,
		departed: departed.New[*Peer](DepartedGrace, MaxDeparted), sweep: departed.Sweeper{Every: departed.SweepEvery}}
	l.peers.Store(newMembers(nil))
	l.resolving.Store(cfg.Resolving)
	return l, nil
}

// Add adds the peer at hostPort, taking its connector from the list's pool
// and asking it to connect, so that the connection is in place by the time
// calls come (they wait for it if they come sooner). Adding a peer already
// present returns the existing one.
func (l *List) Add(hostPort string) (*Peer, error) {
	if err := peer.ValidateHostPort(hostPort); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.Peers()
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
	l.peers.Store(newMembers(next))
	l.queue(p) // once a member: the feed's reader looks it up
	return p, nil
}

// newPeer makes the peer at hostPort, of weight w, with its limiter and
// its connector from the pool, asked to connect.
func (l *List) newPeer(hostPort string, w float64) (*Peer, error) {
	prev, back := l.departed.Take(hostPort, l.clk.Now())
	var lim *busy.Limiter
	var err error
	if back {
		lim = prev.limiter
	} else if lim, err = busy.New(l.cfg); err != nil {
		return nil, err
	}
	var c *pool.Conn
	if l.pool != nil {
		if c, err = l.pool.Acquire(hostPort); err != nil {
			return nil, err
		}
		c.ConnectSoon()
	}
	p := &Peer{hostPort: hostPort, conn: c, limiter: lim, m: l.rec.Peer(l.service, hostPort), l: l, added: l.clk.Now().UnixNano()}
	p.weight.Store(math.Float64bits(w))
	if back {
		l.inherit(p, prev)
	}
	p.m.Limit.Update(lim.Limit())
	if c != nil {
		c.Attach(p)
	}
	return p, nil
}

// Defaults of what a List remembers of the peers that left it.
const (
	// DepartedGrace is how long a List keeps the judgement of a peer that
	// left (its busy limiter, latency estimate, slow mark, pushback rest,
	// ejection and the run of errors towards the next): a peer that comes
	// back within it (a registry entry flapping) takes it up again rather
	// than starting afresh, so that a throttled or ejected peer cannot be
	// cleared by leaving and coming back. After it, the peer's state is
	// dropped (within sweepEvery, 15 s, even if the list does not change
	// again).
	DepartedGrace = time.Minute
	// MaxDeparted is the most peers that left a List keeps within
	// DepartedGrace; past it the earliest gone are dropped first, so that
	// addresses rotating through a registry cannot grow it without bound
	// (each is a few hundred bytes).
	MaxDeparted = 4096
)

// inherit gives p, coming back, the judgement prev had when it left
// (its limiter is already prev's). Its counts start afresh (Counts are
// totals since it was added), as does its connection's state.
func (l *List) inherit(p, prev *Peer) {
	p.latency.Store(prev.latency.Load())
	p.learned.Store(prev.learned.Load())
	p.samples.Store(prev.samples.Load())
	p.rest.until.Store(prev.rest.until.Load())
	p.rest.pending.Store(prev.rest.pending.Load())
	p.cls.Store(prev.cls.Load()) // the other classes' limiters, rests and refusal
	p.slow.Store(prev.slow.Load())
	p.probedAt.Store(prev.probedAt.Load())
	p.errorsInRow.Store(prev.errorsInRow.Load())
	p.lastAnswer.Store(prev.lastAnswer.Load())
	p.ejectedUntil.Store(prev.ejectedUntil.Load())
	p.ejections.Store(prev.ejections.Load())
	l.ejectMu.Lock()
	p.ejectK, p.ejectEnd = prev.ejectK, prev.ejectEnd
	l.ejectMu.Unlock()
}

// drop lets go of a peer that left the list (l.mu held): its connector
// no longer tells it of changes, the pool's reference to the connector
// is given back, and its judgement is kept for DepartedGrace.
func (l *List) drop(p *Peer) {
	l.departed.Put(p.hostPort, p, l.clk.Now())
	l.sweep.Arm(l.departed.Len(), &l.mu, func() int {
		l.departed.Prune(l.clk.Now())
		return l.departed.Len()
	})
	l.queue(p) // the feed's reader learns that it left
	if p.conn != nil {
		p.conn.Detach(p)
		l.pool.Release(p.conn)
	}
}

// queue puts p in the feed of changes, once until the next take.
func (l *List) queue(p *Peer) {
	if !l.feedOn.Load() || !p.queued.CompareAndSwap(false, true) {
		return
	}
	l.fmu.Lock()
	l.feed = append(l.feed, p)
	l.fmu.Unlock()
}

// TakeChanged returns the peers whose State changed, and those that
// joined or left the list (Get no longer returns a peer that left), since
// the last TakeChanged, each once: a reader that keeps what it knows of
// each peer follows the list in time proportional to the changes, not to
// the list's length. The first call returns every peer (and turns the
// feed on: a list nobody reads keeps none). A peer appears again only
// after a change that follows this call, so read each one's State after
// it returns; wait on Changed (read before TakeChanged) for the next.
// One reader per list.
func (l *List) TakeChanged() []*Peer {
	if l.feedOn.CompareAndSwap(false, true) {
		return l.Peers()
	}
	l.fmu.Lock()
	batch := l.feed
	l.feed = nil
	l.fmu.Unlock()
	for _, p := range batch {
		p.queued.Store(false)
	}
	return batch
}

// Set makes the list's peers exactly members, in one change: peers that
// stay keep their connection, limiter, latency estimate and counts (their
// weight is updated); new ones are added and start connecting (one that
// left less than DepartedGrace ago takes up its limiter, latency
// estimate and ejection again); the others are removed as Remove does
// (calls in flight to them finish, then their connections close). It checks every member before changing anything: an
// invalid host:port or weight (see balancing.CheckWeight), or a host:port
// listed twice, is an error and changes nothing.
func (l *List) Set(members []peer.Member) error {
	seen := make(map[string]float64, len(members))
	for _, m := range members {
		if err := peer.ValidateHostPort(m.HostPort); err != nil {
			return err
		}
		if err := balancing.CheckWeight(m.Weight); err != nil {
			return fmt.Errorf("peer: %s has %w", m.HostPort, err)
		}
		if _, dup := seen[m.HostPort]; dup {
			return fmt.Errorf("peer: %s is listed twice", m.HostPort)
		}
		seen[m.HostPort] = cmp.Or(m.Weight, 1)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.Peers()
	next := make([]*Peer, 0, len(members))
	var gone []*Peer
	reweighed := false
	for _, p := range old {
		if w, ok := seen[p.hostPort]; ok {
			if w != p.Weight() {
				p.weight.Store(math.Float64bits(w))
				reweighed = true
			}
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
				l.drop(q)
			}
			return err
		}
		next = append(next, p)
	}
	if reweighed || len(next) != len(old) || len(gone) > 0 {
		// Unchanged, the list keeps its members, and with them the ring
		// of its shard keys: a resolver repeats its answer every period.
		l.setMembers(next)
	}
	for _, p := range next[len(old)-len(gone):] {
		l.queue(p) // once members: the feed's reader looks them up
	}
	for _, p := range gone {
		l.drop(p)
	}
	if l.resolving.Swap(false) && l.pool != nil {
		l.pool.Notify(true) // calls waiting for the first answer choose again
	} else if l.pool != nil && l.feedOn.Load() && (len(gone) > 0 || len(next) > len(old)-len(gone)) {
		l.pool.Notify(false) // the feed's reader learns who joined and left
	}
	return nil
}

// setMembers makes next the list's members (l.mu held). If the old
// members' shard-key ring was in use, the new members' is built here,
// off the call path, rather than by the next keyed call while the
// others wait for it. The cap on ejections is worked out again for the
// new members: it is reset under ejectMu, so that an ejection deciding
// on the old members cannot set it after.
func (l *List) setMembers(next []*Peer) {
	m := newMembers(next)
	if old := l.peers.Load(); old != nil && old.ring.Load() != nil {
		m.ringOf()
	}
	l.peers.Store(m)
	l.ejectMu.Lock()
	l.capFullUntil.Store(0)
	l.ejectMu.Unlock()
}

// Remove removes the peer at hostPort. Calls already sent to it finish
// normally; its connector stops, and its connection closes after them,
// unless another list still holds the host:port. It returns an error if the
// peer is not in the list.
func (l *List) Remove(hostPort string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.Peers()
	for i, p := range old {
		if p.hostPort == hostPort {
			next := make([]*Peer, 0, len(old)-1)
			next = append(next, old[:i]...)
			next = append(next, old[i+1:]...)
			l.setMembers(next)
			l.drop(p)
			if l.pool != nil && l.feedOn.Load() {
				l.pool.Notify(false)
			}
			return nil
		}
	}
	return fmt.Errorf("peer: %s is not a peer of this list", hostPort)
}

// Changed returns a channel that is closed at the next change of a peer's
// State (at once for a peer becoming Ready, within 20 ms for any other:
// see pool.Pool.Changed), or nil (never closed) for a list without a pool. A caller that
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
func (l *List) Peers() []*Peer { return l.peers.Load().peers }

// Get returns the peer at hostPort, or nil. It takes constant time
// whatever the list's length.
func (l *List) Get(hostPort string) *Peer {
	m := l.peers.Load()
	if m.byHostPort != nil {
		return m.byHostPort[hostPort]
	}
	for _, p := range m.peers {
		if p.hostPort == hostPort {
			return p
		}
	}
	return nil
}
