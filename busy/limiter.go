package busy

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/clock"
)

// The state word packs the current window's counters so that one
// compare-and-swap both counts a request and proves the window has not
// rolled over meanwhile:
//
//	bits 40..63  low 24 bits of the window index (generation)
//	bits 32..39  busy responses this window, saturating at MaxHalvings
//	bits  0..31  requests allowed this window (never above floor(limit) < 2^32)
const (
	sentMask  = 1<<32 - 1
	busyShift = 32
	busyMask  = 0xff
	genShift  = 40
	genMask   = 1<<24 - 1
)

func pack(idx int64) uint64            { return (uint64(idx) & genMask) << genShift }
func genOf(s uint64) uint64            { return s >> genShift }
func busyOf(s uint64) int              { return int(s >> busyShift & busyMask) }
func sameGen(s uint64, idx int64) bool { return genOf(s) == uint64(idx)&genMask }

// Limiter throttles requests to one peer after busy responses. See the
// package documentation for the model.
//
// Invariants: within a window at most floor(limit) requests are allowed; the
// limit is always in (0, Ceiling]; the limit in force changes only at window
// boundaries, which are measured from the Limiter's creation. Counts at the
// very edge of a window may be attributed to the neighbouring window when
// goroutines' clocks disagree by less than their scheduling jitter.
type Limiter struct {
	cfg    Config
	clk    clock.Clock
	origin time.Time
	window int64 // nanoseconds

	state atomic.Uint64 // see the constants above
	cur   atomic.Int64  // index of the window state belongs to
	allow atomic.Uint64 // floor(limit) for window cur
	limit atomic.Uint64 // math.Float64bits of the limit in force

	mu sync.Mutex // serialises window rollovers
}

// New returns a Limiter whose first window starts now on cfg.Clock, with
// the limit at cfg.Ceiling, zero fields of cfg taking their defaults. It
// returns cfg's validation error if cfg is invalid.
func New(cfg Config) (*Limiter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	l := &Limiter{cfg: cfg, clk: cfg.Clock, origin: cfg.Clock.Now(), window: int64(cfg.Window)}
	l.state.Store(pack(0))
	l.setLimit(cfg.Ceiling)
	return l, nil
}

// Config returns the Limiter's configuration, its defaults filled in,
// Clock included.
func (l *Limiter) Config() Config { return l.cfg }

// Allow reports whether a request may be sent now, and if so counts it.
func (l *Limiter) Allow() bool {
	return l.cfg.Disabled || l.allowIn(l.index(l.clk.Since(l.origin)))
}

// AllowAt is Allow at time now. Times must come from the Limiter's clock.
func (l *Limiter) AllowAt(now time.Time) bool {
	return l.cfg.Disabled || l.allowIn(l.index(now.Sub(l.origin)))
}

// Disabled reports whether the Limiter's configuration turns it off.
func (l *Limiter) Disabled() bool { return l.cfg.Disabled }

func (l *Limiter) allowIn(idx int64) bool {
	for {
		s := l.state.Load()
		if l.cur.Load() != idx || !sameGen(s, idx) {
			idx = l.roll(idx)
			continue
		}
		if s&sentMask >= l.allow.Load() {
			return false
		}
		if l.state.CompareAndSwap(s, s+1) {
			return true
		}
	}
}

// RecordBusy counts a busy response received now.
func (l *Limiter) RecordBusy() { l.recordBusy(l.index(l.clk.Since(l.origin))) }

// RecordBusyAt is RecordBusy at time now.
func (l *Limiter) RecordBusyAt(now time.Time) { l.recordBusy(l.index(now.Sub(l.origin))) }

func (l *Limiter) recordBusy(idx int64) {
	if l.cfg.Disabled {
		return
	}
	for {
		s := l.state.Load()
		if l.cur.Load() != idx || !sameGen(s, idx) {
			idx = l.roll(idx)
			continue
		}
		if busyOf(s) >= l.cfg.MaxHalvings {
			return // further busy responses cannot lower the limit more
		}
		if l.state.CompareAndSwap(s, s+1<<busyShift) {
			return
		}
	}
}

// Limit returns the limit in force now, in requests per window.
func (l *Limiter) Limit() float64 { return l.limitAt(l.index(l.clk.Since(l.origin))) }

// LimitAt returns the limit in force at time now.
func (l *Limiter) LimitAt(now time.Time) float64 { return l.limitAt(l.index(now.Sub(l.origin))) }

func (l *Limiter) limitAt(idx int64) float64 {
	if l.cur.Load() != idx {
		l.roll(idx)
	}
	return math.Float64frombits(l.limit.Load())
}

// index returns the window holding the instant elapsed after the origin;
// instants before the origin belong to the first window.
func (l *Limiter) index(elapsed time.Duration) int64 {
	if elapsed < 0 {
		return 0
	}
	return int64(elapsed) / l.window
}

// roll moves the limiter to window idx if it is behind it, applying the
// recovery rule once for the window that ends and once per quiet window
// skipped. It returns the index of the window now current, which is above
// idx when another goroutine has already moved on (its clock read later).
func (l *Limiter) roll(idx int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := l.cur.Load()
	if idx <= cur {
		return cur
	}
	// Close the window: the swap makes every in-flight CompareAndSwap on the
	// old word fail, and readers see cur != idx until the new limit is set.
	s := l.state.Swap(pack(idx))
	limit := l.cfg.advance(math.Float64frombits(l.limit.Load()), busyOf(s), idx-cur-1)
	l.setLimit(limit)
	l.cur.Store(idx)
	return idx
}

func (l *Limiter) setLimit(limit float64) {
	l.limit.Store(math.Float64bits(limit))
	l.allow.Store(uint64(math.Floor(limit)))
}
