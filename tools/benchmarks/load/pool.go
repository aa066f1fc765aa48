package load

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// ErrShed is Pool.Serve's answer to a request that found every worker
// busy and PoolConfig.MaxQueue requests already waiting: a server answers
// it Busy.
var ErrShed = errors.New("load: every worker is busy and the queue is full")

// PoolConfig configures a Pool.
type PoolConfig struct {
	// Workers serve one request at a time each; in [1, MaxWorkers].
	Workers int
	// MaxQueue, when > 0, is the most requests that wait for a worker: a
	// request that finds every worker busy and MaxQueue waiting is shed
	// (ErrShed). 0: the queue is unbounded, a request waits until a
	// worker frees or its caller gives up.
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
// time; requests beyond them wait in a queue (bounded by MaxQueue, when
// set) until a worker frees or their caller gives up. Its capacity is
// Workers / service time, whatever the machine, so a benchmark's servers
// are as big as it says on two cores.
//
// Each worker keeps its own schedule: a request that was already waiting
// when the worker's previous request was due to end starts at that
// moment, not when the worker's timer fired. A Go timer fires late (about
// 0.2 ms on an idle 2-core machine, more under load), and without the
// schedule that lateness would come off the capacity: 8 workers of 2 ms
// served about 3,000 requests a second instead of 4,000. With it, the
// pool serves Workers / service time however late its timers are; the
// lateness shows only in each response's timing.
//
// The schedule does not shorten a request that finds a worker free: it
// holds the worker for its service time and its timer's lateness. On
// Linux a Go timer shorter than a millisecond or so fires after about
// 1.1 ms (200 µs and 1 ms both took 1.1 ms at the median on the 2-core
// machine, 2 ms 2.2 ms, 10 ms 10.2 ms), so a cost model whose requests
// take under a millisecond is served as if they took one. Serve returns
// each request's time as served, for a benchmark to report the costs it
// actually ran.
//
// The pool counts the requests in flight (holding a worker or waiting)
// and integrates that count over time, so that a benchmark reads a
// server's mean and peak in-flight over any stretch from two Stats.
// A Pool is safe for concurrent use.
type Pool struct {
	workers  chan *worker
	maxQueue int64
	waiting  atomic.Int64 // requests in the queue now

	mu       sync.Mutex // guards the in-flight count and its integral
	inFlight int64
	peak     int64
	integral float64 // request-seconds up to since
	since    time.Time

	served, shed, queued, abandoned atomic.Int64
}

// worker is one of a pool's workers: free is when its last request was
// due to end, by its schedule.
type worker struct{ free time.Time }

// NewPool returns an idle pool, or cfg's validation error.
func NewPool(cfg PoolConfig) (*Pool, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Pool{workers: make(chan *worker, cfg.Workers), maxQueue: int64(cfg.MaxQueue), since: time.Now()}
	for range cfg.Workers {
		p.workers <- new(worker)
	}
	return p, nil
}

// Serve holds a worker for d, waiting for one if every worker is busy. It
// returns once d has passed, with the time the request held its worker:
// from when its turn began by the worker's schedule (its arrival, or when
// the worker's previous request was due to end if it waited) to when its
// timer fired, d and the timer's lateness. It returns ErrShed, at once,
// when the queue is full, or ctx's error when the caller gave up first
// (waiting or served); 0 with either.
func (p *Pool) Serve(ctx context.Context, d time.Duration) (time.Duration, error) {
	arrived := time.Now()
	var w *worker
	select {
	case w = <-p.workers:
		p.enter(arrived)
	default:
		// Every worker is busy: wait in the queue, if there is room,
		// unless the caller gives up first.
		if n := p.waiting.Add(1); p.maxQueue > 0 && n > p.maxQueue {
			p.waiting.Add(-1)
			p.shed.Add(1)
			return 0, ErrShed
		}
		p.queued.Add(1)
		p.enter(arrived)
		select {
		case w = <-p.workers:
			p.waiting.Add(-1)
		case <-ctx.Done():
			p.waiting.Add(-1)
			p.abandoned.Add(1)
			p.leave(time.Now())
			return 0, ctx.Err()
		}
	}
	// Start when the worker was due to be free, if this request was
	// already waiting then: the worker's timer firing late is not the
	// server's work.
	start := arrived
	if w.free.After(start) {
		start = w.free
	}
	end := start.Add(d)
	err := sleepCtx(ctx, time.Until(end))
	now := time.Now()
	var held time.Duration
	if err != nil {
		end = now // the caller gave up: the worker is free now
		p.abandoned.Add(1)
	} else {
		held = now.Sub(start)
		p.served.Add(1)
	}
	w.free = end
	p.leave(now)
	p.workers <- w
	return held, err
}

// sleepCtx waits d or until ctx ends, returning ctx's error then.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// enter and leave count a request in and out of flight at now.
func (p *Pool) enter(now time.Time) { p.add(now, 1) }
func (p *Pool) leave(now time.Time) { p.add(now, -1) }

func (p *Pool) add(now time.Time, delta int64) {
	p.mu.Lock()
	if now.After(p.since) {
		p.integral += float64(p.inFlight) * now.Sub(p.since).Seconds()
		p.since = now
	}
	p.inFlight += delta
	p.peak = max(p.peak, p.inFlight)
	p.mu.Unlock()
}

// PoolStats are a Pool's counts at one moment.
type PoolStats struct {
	// At is the moment.
	At time.Time
	// InFlight is the requests holding a worker or waiting for one now;
	// Peak the most at once since the pool started or its last
	// ResetPeak.
	InFlight, Peak int64
	// Integral is InFlight integrated over time since the pool started,
	// in request-seconds: MeanInFlight of two Stats is the mean between
	// them.
	Integral float64
	// Served requests held a worker for their whole time; Shed were
	// refused with ErrShed; Queued waited for a worker (served or not);
	// Abandoned were given up by their caller, waiting or served.
	Served, Shed, Queued, Abandoned int64
}

// Stats returns the pool's counts now.
func (p *Pool) Stats() PoolStats {
	now := time.Now()
	p.mu.Lock()
	if now.After(p.since) {
		p.integral += float64(p.inFlight) * now.Sub(p.since).Seconds()
		p.since = now
	}
	s := PoolStats{At: p.since, InFlight: p.inFlight, Peak: p.peak, Integral: p.integral}
	p.mu.Unlock()
	s.Served, s.Shed, s.Queued, s.Abandoned = p.served.Load(), p.shed.Load(), p.queued.Load(), p.abandoned.Load()
	return s
}

// ResetPeak starts the peak over from the requests in flight now, so
// that the next Stats' Peak is the most since this call.
func (p *Pool) ResetPeak() {
	p.mu.Lock()
	p.peak = p.inFlight
	p.mu.Unlock()
}

// MeanInFlight returns the mean number of requests in flight between two
// Stats of a pool, a taken before b; 0 when no time passed between them.
func MeanInFlight(a, b PoolStats) float64 {
	d := b.At.Sub(a.At).Seconds()
	if d <= 0 {
		return 0
	}
	return (b.Integral - a.Integral) / d
}
