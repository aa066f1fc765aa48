package busy

import (
	"math"
	"time"
)

// Snapshot is a Limiter's current window, for introspection: debug pages
// and tests. It is a copy; it does not change as the Limiter does.
type Snapshot struct {
	// Start is when the window began, on the Limiter's clock.
	Start time.Time
	// Window is the window's length (Config.Window).
	Window time.Duration
	// Limit is the limit in force in the window, in requests per window:
	// at most floor(Limit) requests are allowed in it.
	Limit float64
	// Allowed is the number of requests allowed so far in the window.
	Allowed int64
	// Busy is the number of busy responses recorded so far in the window,
	// saturating at Config.MaxHalvings (further ones cannot lower the next
	// limit more).
	Busy int
}

// Snapshot returns the window in force now. See SnapshotAt.
func (l *Limiter) Snapshot() Snapshot { return l.SnapshotAt(l.clk.Now()) }

// SnapshotAt returns the window in force at time now (from the Limiter's
// clock): its start, limit, and the requests allowed and busy responses
// counted in it so far. It changes nothing: when the window holding now has
// not begun for the Limiter yet (no request since the last one ended), the
// snapshot is of that window as it will begin, with no counts and the limit
// the recovery rule gives it. When another goroutine has already moved the
// Limiter past now's window (its clock read later), the snapshot is of the
// Limiter's current window.
//
// It takes the lock that window rollovers take, for as long as three loads;
// Allow and RecordBusy do not take it, so a snapshot does not delay them.
func (l *Limiter) SnapshotAt(now time.Time) Snapshot {
	idx := l.index(now.Sub(l.origin))
	l.mu.Lock()
	// Under l.mu, cur and limit do not change, and the state word belongs
	// to window cur (roll swaps it and stores cur under the same lock);
	// only its counts move, by compare-and-swap.
	cur := l.cur.Load()
	limit := math.Float64frombits(l.limit.Load())
	s := l.state.Load()
	l.mu.Unlock()
	if idx <= cur {
		return Snapshot{Start: l.origin.Add(time.Duration(cur * l.window)), Window: time.Duration(l.window),
			Limit: limit, Allowed: int64(s & sentMask), Busy: busyOf(s)}
	}
	return Snapshot{Start: l.origin.Add(time.Duration(idx * l.window)), Window: time.Duration(l.window),
		Limit: l.cfg.advance(limit, busyOf(s), idx-cur-1)}
}
