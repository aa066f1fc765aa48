// Package retrybudget is a Client's retry budget (retry.BudgetConfig
// states the rule): retries and hedges within a ratio of recent first
// attempts, with a floor per second for low traffic.
//
// The window is cut into slots; each slot counts its first attempts and
// its retries in one atomic word each, stamped with the slot's number, so
// that recording is lock-free and allocation-free and a slot left from an
// earlier turn of the window counts as empty.
package retrybudget

import (
	"cmp"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/retry"
)

// slots is how many slots a window has.
const slots = 10

// countBits is the low bits of a slot word that hold its count; the high
// bits hold the slot's number (its start in slot widths since the Unix
// epoch), modulo 2^(64-countBits).
const countBits = 32

type slot struct {
	first, retries atomic.Uint64
}

// Budget is one Client's retry budget. A nil *Budget allows everything
// and records nothing (the budget is disabled). Its methods take the time
// from their caller, who has read it already.
type Budget struct {
	width   int64   // a slot's width, ns
	ratio   float64 // retries per first attempt
	floor   float64 // retries per second of window
	windowS float64 // the window, seconds
	// mu makes Allow's check and count one step, so that concurrent
	// retries cannot pass the bound together. First needs no lock: a
	// first attempt only ever allows more.
	mu    sync.Mutex
	slots [slots]slot
}

// New returns the budget c configures (c validated, defaults applied);
// nil if c is Disabled.
func New(c retry.BudgetConfig) (*Budget, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Disabled {
		return nil, nil
	}
	ratio := cmp.Or(c.Ratio, retry.DefaultBudgetRatio)
	floor := cmp.Or(c.MinPerSecond, retry.DefaultBudgetMinPerSecond)
	window := cmp.Or(c.Window, retry.DefaultBudgetWindow)
	return &Budget{width: int64(window) / slots, ratio: ratio, floor: floor, windowS: window.Seconds()}, nil
}

func (b *Budget) stamp(now time.Time) uint64 { return uint64(now.UnixNano() / b.width) }

// add adds one to the counter w of the slot stamped s.
func add(w *atomic.Uint64, s uint64) {
	for {
		old := w.Load()
		n := s<<countBits | 1
		if old>>countBits == s&(1<<(64-countBits)-1) {
			n = old + 1
		}
		if w.CompareAndSwap(old, n) {
			return
		}
	}
}

// First records a first attempt of a call that may retry or hedge.
func (b *Budget) First(now time.Time) {
	if b == nil {
		return
	}
	s := b.stamp(now)
	add(&b.slots[s%slots].first, s)
}

// counts returns the first attempts and retries of the window ending in
// the slot stamped s.
func (b *Budget) counts(s uint64) (first, retries uint64) {
	const mask = 1<<(64-countBits) - 1
	for i := range b.slots {
		sl := &b.slots[i]
		for _, c := range [2]struct {
			w   *atomic.Uint64
			sum *uint64
		}{{&sl.first, &first}, {&sl.retries, &retries}} {
			v := c.w.Load()
			// A slot of this turn of the window: stamped within the last
			// slots stamps.
			if age := (s - v>>countBits) & mask; age < slots {
				*c.sum += v & (1<<countBits - 1)
			}
		}
	}
	return first, retries
}

// Allow reports whether a retry or hedge may be sent at now, and records
// it if so (see retry.BudgetConfig for the rule).
func (b *Budget) Allow(now time.Time) bool {
	if b == nil {
		return true
	}
	s := b.stamp(now)
	b.mu.Lock()
	defer b.mu.Unlock()
	first, retries := b.counts(s)
	allowed := math.Max(b.ratio*float64(first), b.floor*b.windowS)
	if float64(retries+1) > allowed {
		return false
	}
	add(&b.slots[s%slots].retries, s)
	return true
}

// Counts returns the first attempts and retries counted in the window
// ending at now, for stats and tests.
func (b *Budget) Counts(now time.Time) (first, retries uint64) {
	if b == nil {
		return 0, 0
	}
	return b.counts(b.stamp(now))
}
