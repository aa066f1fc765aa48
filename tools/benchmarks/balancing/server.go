package balancing

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/peer"
	"github.com/sluice-rpc/sluice/tools/benchmarks/load"
	"github.com/uber/tchannel-go"
)

// Service and Method are what every server serves and the clients call.
const (
	Service = "balancing"
	Method  = "work"
)

// queuePerWorker is how many requests per worker a server lets wait: one
// more is answered Busy.
const queuePerWorker = 4

// serverConfig is one server's cost model: workers x service; cold
// (coldCost); an LRU of cache keys, the request's arg3, a hit costing
// hit and a miss miss; errorShare of the requests answered UNEXPECTED
// (drawn from seed); reportLoad: its workers' busy share reported as its
// utilisation (channel.WithUtilisation).
type serverConfig struct {
	workers    int
	service    time.Duration
	coldFactor float64
	coldWindow time.Duration
	cache      int
	hit, miss  time.Duration
	errorShare float64
	seed       uint64
	reportLoad bool
}

// server is a Sluice channel server on 127.0.0.1 whose handler costs
// what its serverConfig says, on a worker pool that lets queuePerWorker
// requests per worker wait and answers Busy beyond them.
type server struct {
	cfg        serverConfig
	ch         *channel.Channel
	pool       *load.Pool
	started    time.Time
	unexpected atomic.Int64
	busy       atomic.Int64 // the nanoseconds requests held a worker

	mu         sync.Mutex // guards the fields below
	cache      *lru
	cached     cacheCounts // of the requests served
	rng        *rand.Rand
	lastBusy   int64
	lastBusyAt time.Time
}

// startServer starts a server with cfg, listening on 127.0.0.1.
func startServer(cfg serverConfig) (*server, error) {
	pool, err := load.NewPool(load.PoolConfig{Workers: cfg.workers, MaxQueue: queuePerWorker * cfg.workers})
	if err != nil {
		return nil, err
	}
	s := &server{cfg: cfg, pool: pool, rng: rand.New(rand.NewPCG(cfg.seed, 0xba1a)), started: time.Now()}
	s.lastBusyAt = s.started
	if cfg.cache > 0 {
		s.cache = newLRU(cfg.cache)
	}
	var opts []channel.Option
	if cfg.reportLoad {
		opts = append(opts, channel.WithUtilisation(s.utilisation))
	}
	if s.ch, err = channel.New(Service, opts...); err == nil {
		if err = s.ch.RegisterRaw(Method, s.handle); err == nil {
			err = s.ch.ListenAndServe("127.0.0.1:0")
		}
		if err != nil {
			s.ch.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("balancing: server: %w", err)
	}
	return s, nil
}

// handle serves one request.
func (s *server) handle(ctx context.Context, req *channel.RawRequest) (*channel.RawResponse, error) {
	d, key, hit := s.cfg.service, "", false
	if s.cache != nil {
		key = string(req.Arg3)
		s.mu.Lock()
		hit = s.cache.get(key)
		s.mu.Unlock()
		d = s.cfg.miss
		if hit {
			d = s.cfg.hit
		}
	}
	if s.cfg.coldFactor > 1 {
		d = time.Duration(float64(d) * coldCost(s.cfg.coldFactor, s.cfg.coldWindow, time.Since(s.started)))
	}
	held, err := s.pool.Serve(ctx, d)
	s.busy.Add(int64(held))
	switch {
	case errors.Is(err, load.ErrShed):
		return nil, channel.Busy("balancing: %d workers busy and %d requests waiting", s.cfg.workers, queuePerWorker*s.cfg.workers)
	case err != nil:
		return nil, err // the caller gave up: no one reads the answer
	}
	if s.cache != nil {
		s.mu.Lock()
		if hit {
			s.cached.hits++
			s.cached.hitTime += held
		} else {
			s.cached.misses++
			s.cached.missTime += held
			s.cache.add(key)
		}
		s.mu.Unlock()
	}
	if s.cfg.errorShare > 0 && s.fails() {
		s.unexpected.Add(1)
		return nil, tchannel.NewSystemError(tchannel.ErrCodeUnexpected, "balancing: this server fails %.0f%% of its requests", 100*s.cfg.errorShare)
	}
	return &channel.RawResponse{Arg3: req.Arg3}, nil
}

// fails draws whether a request fails, with probability errorShare.
func (s *server) fails() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rng.Float64() < s.cfg.errorShare
}

// utilisation returns the share of its workers' time requests held them
// since it was last asked.
func (s *server) utilisation() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	now, busy := time.Now(), s.busy.Load()
	el := now.Sub(s.lastBusyAt)
	if el <= 0 {
		return 0
	}
	u := float64(busy-s.lastBusy) / (float64(el) * float64(s.cfg.workers))
	s.lastBusy, s.lastBusyAt = busy, now
	return u
}

// counts returns s's cache counts now.
func (s *server) counts() cacheCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cached
}

func (s *server) hostPort() string { return s.ch.HostPort() }

func (s *server) close() { s.ch.Close() }

// coldCost returns the cost multiplier of a server elapsed after its
// start: factor at start, falling linearly to 1 at window.
func coldCost(factor float64, window, elapsed time.Duration) float64 {
	switch {
	case elapsed >= window:
		return 1
	case elapsed <= 0:
		return factor
	}
	return factor - (factor-1)*float64(elapsed)/float64(window)
}

// fleet is a scenario's servers.
type fleet []*server

// startFleet starts a server per config; on an error it closes the ones
// it started.
func startFleet(cfgs []serverConfig) (fleet, error) {
	var f fleet
	for _, c := range cfgs {
		s, err := startServer(c)
		if err != nil {
			f.close()
			return nil, err
		}
		f = append(f, s)
	}
	return f, nil
}

func (f fleet) close() {
	for _, s := range f {
		s.close()
	}
}

// hostPorts returns the servers' addresses, in order.
func (f fleet) hostPorts() []string {
	hps := make([]string, len(f))
	for i, s := range f {
		hps[i] = s.hostPort()
	}
	return hps
}

// members returns the servers as peers with weights (nil: all 1).
func (f fleet) members(weights []float64) []peer.Member {
	m := make([]peer.Member, len(f))
	for i, s := range f {
		m[i] = peer.Member{HostPort: s.hostPort(), Weight: 1}
		if weights != nil {
			m[i].Weight = weights[i]
		}
	}
	return m
}

// index returns the servers' positions by address.
func (f fleet) index() map[string]int {
	m := make(map[string]int, len(f))
	for i, s := range f {
		m[s.hostPort()] = i
	}
	return m
}

// snapshot is a server's pool and cache counts at one time.
type snapshot struct {
	pool  load.PoolStats
	cache cacheCounts
}

// snapshots returns each server's counts now.
func (f fleet) snapshots() []snapshot {
	out := make([]snapshot, len(f))
	for i, s := range f {
		out[i] = snapshot{s.pool.Stats(), s.counts()}
	}
	return out
}

// cacheCounts are a cached server's hits and misses, and the time each
// kind held a worker in all.
type cacheCounts struct {
	hits, misses      int64
	hitTime, missTime time.Duration
}

// sub returns the counts from b to a (a taken after b).
func (a cacheCounts) sub(b cacheCounts) cacheCounts {
	return cacheCounts{a.hits - b.hits, a.misses - b.misses, a.hitTime - b.hitTime, a.missTime - b.missTime}
}

func (a cacheCounts) add(b cacheCounts) cacheCounts {
	return cacheCounts{a.hits + b.hits, a.misses + b.misses, a.hitTime + b.hitTime, a.missTime + b.missTime}
}

// hitRate returns the share of the requests that were hits, 0 for none.
func (a cacheCounts) hitRate() float64 { return share(float64(a.hits), float64(a.hits+a.misses)) }

// costs returns the mean time a hit and a miss held a worker.
func (a cacheCounts) costs() (hit, miss time.Duration) {
	if a.hits > 0 {
		hit = a.hitTime / time.Duration(a.hits)
	}
	if a.misses > 0 {
		miss = a.missTime / time.Duration(a.misses)
	}
	return hit, miss
}

// lru is a cache of keys that holds at most size keys and forgets the
// least recently used first.
type lru struct {
	size  int
	order *list.List // front: most recently used
	keys  map[string]*list.Element
}

func newLRU(size int) *lru {
	return &lru{size: size, order: list.New(), keys: make(map[string]*list.Element, size+1)}
}

// get reports whether key is cached, marking it used if so.
func (c *lru) get(key string) bool {
	e, ok := c.keys[key]
	if ok {
		c.order.MoveToFront(e)
	}
	return ok
}

// add caches key as the most recently used, forgetting the least recently
// used key when the cache is full.
func (c *lru) add(key string) {
	if e, ok := c.keys[key]; ok {
		c.order.MoveToFront(e)
		return
	}
	c.keys[key] = c.order.PushFront(key)
	if c.order.Len() > c.size {
		delete(c.keys, c.order.Remove(c.order.Back()).(string))
	}
}
