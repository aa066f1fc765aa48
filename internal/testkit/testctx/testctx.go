// Package testctx gives tests contexts in the states a real one passes
// through too briefly to test by timing.
package testctx

import (
	"context"
	"sync/atomic"
	"time"
)

// Late is a context without a deadline until Pass, and from then on with
// one that has passed while its Done channel stays open and Err nil: a
// context.WithDeadline's state between its deadline and its timer firing,
// when a transport that checks the deadline against the time (tchannel-go's
// BeginCall) already refuses a call. Its zero value is ready to use.
type Late struct {
	passed atomic.Bool
}

// Pass makes the deadline pass.
func (c *Late) Pass() { c.passed.Store(true) }

// Deadline returns a deadline a millisecond ago once Pass was called.
func (c *Late) Deadline() (time.Time, bool) {
	if c.passed.Load() {
		return time.Now().Add(-time.Millisecond), true
	}
	return time.Time{}, false
}

// Done returns nil: the context's timer never fires.
func (c *Late) Done() <-chan struct{} { return nil }

// Err returns nil: the context never ends by itself.
func (c *Late) Err() error { return nil }

// Value returns nil.
func (c *Late) Value(any) any { return nil }

var _ context.Context = (*Late)(nil)
