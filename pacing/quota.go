package pacing

import (
	"fmt"
	"sync"
	"time"

	"github.com/sluice-rpc/sluice/clock"
)

// Quota is the server side of the loop: a fixed-window request quota whose
// Take says whether a request may run and returns the Signal to send back,
// so that a rate-limited handler can attach quota headers (SetHeaders) to
// its answers and answer Busy with the window's time left when the quota is
// spent. Windows start at the Quota's creation. Safe for concurrent use.
type Quota struct {
	limit     int64
	window    time.Duration
	dimension Dimension
	clk       clock.Clock
	start     time.Time

	mu   sync.Mutex
	idx  int64 // current window
	used int64
}

// NewQuota returns a quota of limit requests per window, described in the
// headers of dimension (DimensionUser for X-RateLimit-User, DimensionNone
// for the RateLimit-* headers only). A nil clk means the wall clock.
func NewQuota(limit int64, window time.Duration, dimension Dimension, clk clock.Clock) (*Quota, error) {
	if limit < 1 {
		return nil, fmt.Errorf("pacing: quota limit is %d, must be >= 1", limit)
	}
	if window <= 0 {
		return nil, fmt.Errorf("pacing: quota window is %v, must be > 0", window)
	}
	if clk == nil {
		clk = clock.Real
	}
	return &Quota{limit: limit, window: window, dimension: dimension, clk: clk, start: clk.Now()}, nil
}

// Take spends one request of the current window if any is left (ok) and
// returns the Signal describing the quota after it: Remaining, Limit,
// Window and TimeLeft. When ok is false the quota is spent: answer Busy
// with the Signal's TimeLeft as pushback.
func (q *Quota) Take() (sig Signal, ok bool) {
	q.mu.Lock()
	now := q.clk.Now() // under the lock: the window charged is the one reported
	idx := int64(now.Sub(q.start) / q.window)
	if idx > q.idx {
		q.idx, q.used = idx, 0
	}
	ok = q.used < q.limit
	if ok {
		q.used++
	}
	remaining := q.limit - q.used
	q.mu.Unlock()
	left := q.start.Add(time.Duration(idx+1) * q.window).Sub(now)
	return Signal{
		Fields:    FieldRemaining | FieldLimit | FieldWindow | FieldTimeLeft,
		Dimension: q.dimension, Remaining: remaining, Limit: q.limit, Window: q.window, TimeLeft: left,
	}, ok
}
