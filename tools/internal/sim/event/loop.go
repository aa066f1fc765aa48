package event

import (
	"time"

	"github.com/sluice-rpc/sluice/clock"
)

// Loop runs functions at scheduled moments of a fake clock, in the order
// of a Queue, moving the clock to each one's time before running it.
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

// RunUntil runs every function due at or before t, those scheduled
// meanwhile included, and leaves the clock reading t (or later).
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
