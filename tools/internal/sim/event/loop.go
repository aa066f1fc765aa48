package event

import (
	"time"

	"github.com/sluice-rpc/sluice/clock"
)

// Loop runs functions at scheduled moments of a fake clock, in the order of
// a Queue: by time, and those due at the same time in the order they were
// scheduled. Before running one it moves the clock to the function's time,
// so the code the function calls reads that time from the clock. The
// functions run on the goroutine that calls RunUntil and may schedule
// more.
type Loop struct {
	clk *clock.Fake
	q   Queue[func()]
}

// NewLoop returns a loop driving clk.
func NewLoop(clk *clock.Fake) *Loop { return &Loop{clk: clk} }

// At schedules fn to run at t; a t that has passed means now, after the
// functions already due.
func (l *Loop) At(t time.Time, fn func()) {
	if now := l.clk.Now(); t.Before(now) {
		t = now
	}
	l.q.Push(t, fn)
}

// Len returns the number of functions scheduled and not yet run.
func (l *Loop) Len() int { return l.q.Len() }

// RunUntil runs, in order, every function due at or before t, including
// those scheduled meanwhile, and leaves the clock reading t (or later, if
// it already did). Functions due after t stay scheduled. A simulation that
// samples its state at t calls RunUntil(t) first, so the sample follows
// every event of that moment.
func (l *Loop) RunUntil(t time.Time) {
	for {
		at, ok := l.q.Next()
		if !ok || at.After(t) {
			break
		}
		_, fn, _ := l.q.Pop()
		l.advance(at)
		fn()
	}
	l.advance(t)
}

// advance moves the clock forward to t, never back.
func (l *Loop) advance(t time.Time) {
	if d := t.Sub(l.clk.Now()); d > 0 {
		l.clk.Add(d)
	}
}
