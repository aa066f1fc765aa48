package channel

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// defaultResponseBudget is the default bound on the bytes of responses a
// Channel's calls hold at once (WithResponseBudget): 256 MiB, four
// responses of defaultMaxResponseSize.
const defaultResponseBudget = 256 << 20

// WithResponseBudget bounds the bytes of response arguments that the
// Channel's calls hold at once, across all of its calls and peers, to n.
// WithMaxResponseSize bounds one response; this bounds their sum, so that
// a server, hostile or mistaken, answering many calls in flight with large
// responses cannot make the client hold more than n bytes of them.
//
// A response holds budget from the moment its arguments grow past their
// first 512 bytes each (smaller ones take none) for the capacity it
// reads them into, and gives it back when its call returns the response
// (hedges that also succeeded included): the caller owns the bytes from
// then on, and CallJSON and package thrift decode them after. A failed
// attempt gives back what it held at once.
//
// An attempt whose response would take the Channel past n fails with
// code UNEXPECTED wrapping ErrResponseBudget, as soon as the bytes come,
// without reading the rest; it is not retried, nor hedged further (the
// server answered), and does not count against the peer's health (the
// budget may have been taken by other peers). It fails at once rather
// than waiting for budget: tchannel-go delivers a connection's frames in
// order, so a response waiting would stall every other response on its
// connection, those holding budget included.
//
// Default: 256 MiB (four responses of WithMaxResponseSize's default), or
// WithMaxResponseSize's bound if that is larger. n must be at least
// WithMaxResponseSize's bound (else no response of the largest size could
// be read).
func WithResponseBudget(n int64) Option {
	return func(o *options) { o.responseBudget, o.responseBudgetSet = n, true }
}

// ErrResponseBudget is wrapped by the error of an attempt whose response
// could not be read within the Channel's response budget
// (WithResponseBudget): its other calls' responses held it.
var ErrResponseBudget = errors.New("the Channel's response budget is spent")

// validateResponseBudget fills in o's default response budget, or checks
// the one given.
func validateResponseBudget(o *options) error {
	if !o.responseBudgetSet {
		o.responseBudget = max(defaultResponseBudget, o.maxResponse)
		return nil
	}
	if o.responseBudget < o.maxResponse {
		return fmt.Errorf("channel: WithResponseBudget is %d, must be >= WithMaxResponseSize's %d: no response of that size could be read",
			o.responseBudget, o.maxResponse)
	}
	return nil
}

// responseBudget is the bytes a Channel's calls may hold in responses at
// once (see WithResponseBudget). Reservations and releases are atomic, on
// one counter that only responses past their first 512 bytes per argument
// touch, so small calls cost it nothing.
type responseBudget struct {
	limit int64
	held  atomic.Int64
}

// reserve takes n bytes of the budget, or reports false and takes none if
// that would pass the limit.
func (b *responseBudget) reserve(n int64) bool {
	for {
		h := b.held.Load()
		if h+n > b.limit {
			return false
		}
		if b.held.CompareAndSwap(h, h+n) {
			return true
		}
	}
}

// release gives back n bytes reserved earlier.
func (b *responseBudget) release(n int64) {
	if n != 0 {
		b.held.Add(-n)
	}
}

// spent is the error of a response that needed n more bytes than b had.
func (b *responseBudget) spent(n int64) error {
	return fmt.Errorf("%w: the responses being read hold %d of its %d bytes, and this one needed %d more; it was not read further "+
		"(raise WithResponseBudget, or make fewer large calls at once)", ErrResponseBudget, b.held.Load(), b.limit, n)
}

// firstArgCap is the capacity argReading.read starts an argument with,
// which takes no budget.
const firstArgCap = 512

// ownedArg returns arg, read into scratch from its start (scratch[:0]),
// as a slice of its own: a copy of its own size if it is still in scratch,
// which serves the next reading; arg itself if it outgrew scratch into a
// buffer of its own, or if scratch is nil.
func ownedArg(arg, scratch []byte) []byte {
	if len(scratch) == 0 || cap(arg) == 0 || &arg[:cap(arg)][0] != &scratch[0] {
		return arg
	}
	return append(make([]byte, 0, len(arg)), arg...)
}

// nextArgCap is the capacity an argument buffer of capacity c grows to,
// when it needs at most most bytes in all (most > c): doubling while
// small, then by a quarter, as append does, so that a large response
// wastes little of what it holds.
func nextArgCap(c, most int64) int64 {
	n := 2 * c
	if c >= 256<<10 {
		n = c + c/4
	}
	return min(n, most)
}
