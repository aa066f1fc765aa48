// Package clock is the time source every Sluice algorithm is written against.
//
// Production code uses Real; tests and simulators use Fake, which only moves
// when told to. Algorithm cores take times as arguments where they can
// (AllowAt(now)), so the same code runs in production, tests and simulators.
package clock

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/sluice-rpc/sluice/internal/ctxerr"
)

// Clock tells the time and makes timers.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Since returns the time elapsed since t, a time read from this clock.
	// On the wall clock, for a t from Real.Now (which carries a monotonic
	// reading), it reads only the monotonic clock, about half the cost of
	// Now: hot paths that need a duration use it.
	Since(t time.Time) time.Duration
	// NewTimer returns a timer that fires once d has passed on this clock.
	NewTimer(d time.Duration) Timer
	// NewTimerAt returns a timer that fires once this clock reads at or
	// after deadline (at once if it already does). Code that computed a
	// wait from an earlier Now uses it, so that time passing in between
	// does not push the deadline back.
	NewTimerAt(deadline time.Time) Timer
}

// Timer is a one-shot timer made by a Clock.
type Timer interface {
	// C delivers the time once the timer fires.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it stopped
	// the timer before it fired.
	Stop() bool
}

// Real is the wall clock.
var Real Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time                  { return time.Now() }
func (realClock) Since(t time.Time) time.Duration { return time.Since(t) }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }
func (realClock) NewTimerAt(deadline time.Time) Timer {
	return realTimer{time.NewTimer(time.Until(deadline))}
}

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop() bool          { return t.t.Stop() }

// Fake is a manually advanced clock for deterministic tests and simulations.
// Its zero value is not usable; make one with NewFake. It is safe for
// concurrent use.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	// changed is closed, and replaced, when a timer is added: WaitTimers
	// waits on it.
	changed chan struct{}
}

// NewFake returns a fake clock reading start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Since returns the fake time elapsed since t.
func (f *Fake) Since(t time.Time) time.Duration { return f.Now().Sub(t) }

// NewTimer returns a timer that fires when the fake clock has been advanced
// by at least d. A timer with d <= 0 fires at once.
func (f *Fake) NewTimer(d time.Duration) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.timerAtLocked(f.now.Add(d))
}

// NewTimerAt returns a timer that fires when the fake clock reads at or
// after deadline; one whose deadline has passed fires at once.
func (f *Fake) NewTimerAt(deadline time.Time) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.timerAtLocked(deadline)
}

func (f *Fake) timerAtLocked(at time.Time) *fakeTimer {
	t := &fakeTimer{f: f, at: at, c: make(chan time.Time, 1)}
	if !at.After(f.now) {
		t.c <- f.now
		return t
	}
	f.timers = append(f.timers, t)
	if f.changed != nil {
		close(f.changed)
		f.changed = nil
	}
	return t
}

// Add advances the clock by d and fires, in order of their deadlines, the
// timers that are due.
func (f *Fake) Add(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	now := f.now
	sort.Slice(f.timers, func(i, j int) bool { return f.timers[i].at.Before(f.timers[j].at) })
	var keep []*fakeTimer
	for _, t := range f.timers {
		if t.at.After(now) {
			keep = append(keep, t)
			continue
		}
		t.c <- now
	}
	f.timers = keep
	f.mu.Unlock()
}

// Timers returns the number of timers waiting to fire; tests use it to wait
// until a goroutine has started waiting before they advance the clock.
func (f *Fake) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// WaitTimers blocks until at least n timers are waiting to fire, or ctx
// ends (it then returns ctx.Err()). Tests and examples use it to advance
// the clock only once a goroutine has started waiting on it, without
// polling.
func (f *Fake) WaitTimers(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		if len(f.timers) >= n {
			f.mu.Unlock()
			return nil
		}
		if f.changed == nil {
			f.changed = make(chan struct{})
		}
		changed := f.changed
		f.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

type fakeTimer struct {
	f  *Fake
	at time.Time
	c  chan time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	for i, x := range t.f.timers {
		if x == t {
			t.f.timers = append(t.f.timers[:i], t.f.timers[i+1:]...)
			return true
		}
	}
	return false
}

// Sleep waits d on c, or until ctx ends, and then returns ctx.Err(). A
// d <= 0 returns at once (ctxerr.Of(ctx)). When the
// timer fires as ctx ends, ctx wins: Sleep never returns nil once ctx has
// ended or its deadline has passed (see internal/ctxerr).
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctxerr.Of(ctx)
	}
	t := c.NewTimer(d)
	select {
	case <-t.C():
		return ctxerr.Of(ctx) // select picks at random when both are ready
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	}
}
