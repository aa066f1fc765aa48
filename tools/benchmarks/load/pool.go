package load

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/clock"
)

// ErrShed is Pool.Serve's answer to a request that found every worker
// busy and PoolConfig.MaxQueue requests already waiting: a server answers
// it Busy.
var ErrShed = errors.New("load: every worker is busy and the queue is full")

// PoolConfig configures a Pool: Workers in [1, MaxWorkers], and
// MaxQueue, when > 0, the most requests that wait for a worker before the
// next is shed (ErrShed); 0: unbounded.
type PoolConfig struct {
	Workers  int
	MaxQueue int
}

// Validate reports the first rule c breaks, naming the field.
func (c PoolConfig) Validate() error {
	switch {
	case c.Workers < 1 || c.Workers > MaxWorkers:
		return fmt.Errorf("load: PoolConfig.Workers is %d, must be in [1, %d]", c.Workers, MaxWorkers)
	case c.MaxQueue < 0:
		return fmt.Errorf("load: PoolConfig.MaxQueue is %d, must be >= 0 (0: unbounded)", c.MaxQueue)
	}
	return nil
}

// Pool is a server's worker pool, the cost model of the benchmarks'
// servers: Workers workers, each holding one request for its service
// time, requests beyond them waiting in a queue. Its capacity is Workers /
// service time on any machine: a request that waited starts when its
// worker's previous one was due to end, not when that one's timer fired
// late, so timer lateness does not come off the capacity. A request that
// finds a worker free still holds it for its own timer's lateness (on
// Linux a timer under a millisecond fires after about 1.1 ms), which
// Serve returns as served time.
//
// The pool integrates its in-flight count over time, so that two Stats
// give a stretch's mean and peak in-flight. It is safe for concurrent use.
type Pool struct {
	workers  chan time.Time // the free workers, each as when its last request was due to end
	maxQueue int64
	waiting  atomic.Int64 // requests in the queue now

	mu    sync.Mutex // guards stats' InFlight, Peak, Integral and At
	stats PoolStats

	served, shed, queued, abandoned atomic.Int64
}

// NewPool returns an idle pool, or cfg's validation error.
func NewPool(cfg PoolConfig) (*Pool, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Pool{workers: make(chan time.Time, cfg.Workers), maxQueue: int64(cfg.MaxQueue), stats: PoolStats{At: time.Now()}}
	for range cfg.Workers {
		p.workers <- time.Time{}
	}
	return p, nil
}

// Serve holds a worker for d, waiting for one if every worker is busy,
// and returns the time the request held it by the worker's schedule (d
// and its timer's lateness). It returns ErrShed at once when the queue is
// full, or ctx's error when the caller gave up first.
func (p *Pool) Serve(ctx context.Context, d time.Duration) (time.Duration, error) {
	arrived := time.Now()
	var free time.Time
	select {
	case free = <-p.workers:
		p.add(arrived, 1)
	default:
		if n := p.waiting.Add(1); p.maxQueue > 0 && n > p.maxQueue {
			p.waiting.Add(-1)
			p.shed.Add(1)
			return 0, ErrShed
		}
		p.queued.Add(1)
		p.add(arrived, 1)
		select {
		case free = <-p.workers:
			p.waiting.Add(-1)
		case <-ctx.Done():
			p.waiting.Add(-1)
			p.abandoned.Add(1)
			p.add(time.Now(), -1)
			return 0, ctx.Err()
		}
	}
	// Start when the worker was due to be free, if this request waited.
	start := arrived
	if free.After(start) {
		start = free
	}
	end := start.Add(d)
	var err error
	if wait := time.Until(end); wait > 0 {
		err = clock.Sleep(ctx, clock.Real, wait)
	}
	now := time.Now()
	var held time.Duration
	if err != nil {
		end = now // the caller gave up: the worker is free now
		p.abandoned.Add(1)
	} else {
		held = now.Sub(start)
		p.served.Add(1)
	}
	p.add(now, -1)
	p.workers <- end
	return held, err
}

// add counts delta requests into flight at now, and returns the in-flight
// figures then.
func (p *Pool) add(now time.Time, delta int64) PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := &p.stats
	if now.After(s.At) {
		s.Integral += float64(s.InFlight) * now.Sub(s.At).Seconds()
		s.At = now
	}
	s.InFlight += delta
	s.Peak = max(s.Peak, s.InFlight)
	return *s
}

// PoolStats are a Pool's counts At one moment: the requests holding or
// waiting for a worker, the Peak since the start or ResetPeak, the
// in-flight count's Integral in request-seconds, and the requests Served
// whole, Shed, Queued, and Abandoned by their caller.
type PoolStats struct {
	At                              time.Time
	InFlight, Peak                  int64
	Integral                        float64
	Served, Shed, Queued, Abandoned int64
}

// Stats returns the pool's counts now.
func (p *Pool) Stats() PoolStats {
	s := p.add(time.Now(), 0)
	s.Served, s.Shed, s.Queued, s.Abandoned = p.served.Load(), p.shed.Load(), p.queued.Load(), p.abandoned.Load()
	return s
}

// ResetPeak starts the peak over from the requests in flight now.
func (p *Pool) ResetPeak() {
	p.mu.Lock()
	p.stats.Peak = p.stats.InFlight
	p.mu.Unlock()
}

// MeanInFlight returns the mean requests in flight between two Stats, a
// taken before b; 0 when no time passed.
func MeanInFlight(a, b PoolStats) float64 {
	if d := b.At.Sub(a.At).Seconds(); d > 0 {
		return (b.Integral - a.Integral) / d
	}
	return 0
}
