package leasing

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluice-rpc/sluice/clock"
)

// CapacitySource is a capacity that changes over time, which a RateLimiter
// or Gauge follows. *Resource implements it.
type CapacitySource interface {
	// Capacity returns the current capacity; +Inf means unlimited.
	Capacity() float64
	// Changed returns a channel closed when the capacity next changes.
	Changed() <-chan struct{}
}

// observer is implemented by sources that record demand and count waits
// (*Resource); limiters over other sources skip it.
type observer interface {
	observeArrival()
	observeConcurrency(n int)
	countWait()
	countRateLimited()
}

func (r *Resource) countWait()        { r.waits.Inc(1) }
func (r *Resource) countRateLimited() { r.rateLimited.Inc(1) }

// RateLimiter admits calls at the rate given by a CapacitySource, in calls
// per second, spread evenly over the second: the bucket holds a single
// token, so there is no burst at the start of each second. It follows
// capacity changes at once, also for calls already waiting. A capacity of
// 0 admits nothing; +Inf admits everything.
//
// A RateLimiter is safe for concurrent use.
type RateLimiter struct {
	src   CapacitySource
	obs   observer
	clock clock.Clock

	mu      sync.Mutex
	limiter *rate.Limiter
	current float64
}

// NewRateLimiter returns a limiter following src's capacity. A
// *Resource's limiter runs on its client's clock; other sources' on the
// wall clock.
func NewRateLimiter(src CapacitySource) *RateLimiter {
	clk := clock.Real
	if r, ok := src.(*Resource); ok {
		clk = r.c.clock
	}
	return newRateLimiter(src, clk)
}

// Admit is WaitWithin(ctx, 0.5): it waits for admission at most half the
// time left before ctx's deadline, so that an admitted call keeps the other
// half to run. It makes a RateLimiter a channel.Gate:
//
//	channel.WithLease("kv", leasing.NewRateLimiter(res))
func (l *RateLimiter) Admit(ctx context.Context) error { return l.WaitWithin(ctx, 0.5) }

// newRateLimiter is NewRateLimiter on clock clk.
func newRateLimiter(src CapacitySource, clk clock.Clock) *RateLimiter {
	l := &RateLimiter{src: src, clock: clk, current: math.NaN()}
	l.obs, _ = src.(observer)
	l.limiter = rate.NewLimiter(0, 1)
	return l
}

func toLimit(capacity float64) rate.Limit {
	if math.IsInf(capacity, 1) {
		return rate.Inf
	}
	return rate.Limit(capacity)
}

// sync brings the limiter's rate up to date with the source and returns
// it with the channel announcing its next change.
func (l *RateLimiter) sync(now time.Time) (float64, <-chan struct{}) {
	changed := l.src.Changed()
	capacity := l.src.Capacity()
	l.mu.Lock()
	if capacity != l.current {
		l.current = capacity
		l.limiter.SetLimitAt(now, toLimit(capacity))
	}
	l.mu.Unlock()
	return capacity, changed
}

// Wait blocks until the limiter admits one call, ctx is done, or it is
// clear that admission would come after ctx's deadline, in which case it
// returns an error wrapping ErrRateLimited at once. The deadline is a
// wall-clock time; the wait is measured on the limiter's clock.
func (l *RateLimiter) Wait(ctx context.Context) error { return l.WaitWithin(ctx, 1) }

// WaitWithin is Wait allowed only share (in (0, 1]) of the time left
// before ctx's deadline: a caller that must still do its work after the
// admission (send a call, say) keeps the rest. An admission that would come
// later fails at once with ErrRateLimited, and the reserved slot is given
// back. Without a deadline it is Wait.
func (l *RateLimiter) WaitWithin(ctx context.Context, share float64) error {
	if !(share > 0 && share <= 1) {
		return fmt.Errorf("leasing: WaitWithin share is %v, must be in (0, 1]", share)
	}
	if l.obs != nil {
		l.obs.observeArrival()
	}
	counted := false
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		now := l.clock.Now()
		capacity, changed := l.sync(now)
		deadline, hasDeadline := ctx.Deadline()
		if capacity <= 0 {
			if hasDeadline {
				return l.limited("capacity is 0")
			}
			l.countWait(&counted)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-changed:
				continue
			}
		}
		r := l.limiter.ReserveN(now, 1)
		if !r.OK() {
			return fmt.Errorf("leasing: rate limiter cannot admit a call at rate %v", capacity)
		}
		delay := r.DelayFrom(now)
		if delay <= 0 {
			return nil
		}
		// Context deadlines are wall-clock times whatever clock paces
		// the limiter, so the budget is measured on the wall clock.
		if hasDeadline {
			if budget := time.Duration(share * float64(time.Until(deadline))); delay > budget {
				r.CancelAt(now)
				return l.limited(fmt.Sprintf("next admission in %v, later than the %v allowed before the deadline", delay, budget))
			}
		}
		l.countWait(&counted)
		t := l.clock.NewTimerAt(now.Add(delay))
		select {
		case <-t.C():
			return nil
		case <-ctx.Done():
			t.Stop()
			r.CancelAt(l.clock.Now())
			return ctx.Err()
		case <-changed:
			t.Stop()
			r.CancelAt(l.clock.Now())
		}
	}
}

func (l *RateLimiter) countWait(counted *bool) {
	if !*counted && l.obs != nil {
		l.obs.countWait()
	}
	*counted = true
}

func (l *RateLimiter) limited(why string) error {
	if l.obs != nil {
		l.obs.countRateLimited()
	}
	return fmt.Errorf("%w (%s)", ErrRateLimited, why)
}

// Gauge admits at most floor(capacity) concurrent holders, following a
// CapacitySource. When the capacity drops below the number of holders,
// existing holders keep their slots and new ones wait until enough have
// released. +Inf admits everyone.
//
// A Gauge is safe for concurrent use.
type Gauge struct {
	src CapacitySource
	obs observer

	mu      sync.Mutex
	held    int
	waiting int
	freed   chan struct{}
}

// NewGauge returns a gauge following src's capacity.
func NewGauge(src CapacitySource) *Gauge {
	g := &Gauge{src: src, freed: make(chan struct{})}
	g.obs, _ = src.(observer)
	return g
}

func admits(capacity float64, held int) bool {
	return math.IsInf(capacity, 1) || float64(held+1) <= math.Floor(capacity)
}

// TryAcquire takes a slot if one is free and reports whether it did.
func (g *Gauge) TryAcquire() bool {
	capacity := g.src.Capacity()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.obs != nil {
		g.obs.observeConcurrency(g.held + g.waiting + 1)
	}
	if !admits(capacity, g.held) {
		return false
	}
	g.held++
	return true
}

// Acquire blocks until it takes a slot or ctx is done. A successful
// Acquire must be paired with one Release.
func (g *Gauge) Acquire(ctx context.Context) error {
	counted := false
	for {
		changed := g.src.Changed()
		capacity := g.src.Capacity()
		g.mu.Lock()
		if g.obs != nil && !counted {
			g.obs.observeConcurrency(g.held + g.waiting + 1)
		}
		if admits(capacity, g.held) {
			g.held++
			if counted {
				g.waiting--
			}
			g.mu.Unlock()
			return nil
		}
		if !counted {
			counted = true
			g.waiting++
			if g.obs != nil {
				g.obs.countWait()
			}
		}
		freed := g.freed
		g.mu.Unlock()
		select {
		case <-ctx.Done():
			g.mu.Lock()
			g.waiting--
			g.mu.Unlock()
			return ctx.Err()
		case <-freed:
		case <-changed:
		}
	}
}

// Release returns a slot taken by Acquire or TryAcquire.
func (g *Gauge) Release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held == 0 {
		return
	}
	g.held--
	if g.waiting > 0 { // waiters take freed under g.mu after counting themselves
		close(g.freed)
		g.freed = make(chan struct{})
	}
}

// InUse returns the number of slots held.
func (g *Gauge) InUse() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held
}
