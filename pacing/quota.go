package pacing

import (
	"cmp"
	"fmt"
	"strconv"
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

// QuotaConfig configures a Quota. Its zero value is the Heroku API's
// quota, DefaultLimit requests per DefaultWindow, sent in the RateLimit-*
// headers only, on the wall clock.
type QuotaConfig struct {
	// Limit is the number of requests each window allows, >= 0; 0 means
	// DefaultLimit (4500).
	Limit int64
	// Window is the length of a window, >= 0; 0 means DefaultWindow (one
	// hour). Windows start at the Quota's creation.
	Window time.Duration
	// Dimension names the quota in the headers: DimensionNone (the zero
	// value) for the RateLimit-* headers only, DimensionUser for
	// X-RateLimit-User, DimensionUserAPI for X-RateLimit-User-API.
	Dimension Dimension
	// Clock is the time source of the windows; nil means clock.Real.
	Clock clock.Clock
}

// Validate reports the first field that breaks its rule, naming it and
// what it must be. Zero fields are valid: they mean the defaults.
func (c QuotaConfig) Validate() error {
	switch {
	case c.Limit < 0:
		return fieldError("QuotaConfig.Limit", strconv.FormatInt(c.Limit, 10), fmt.Sprintf("must be >= 0 (0 means the default, %d)", DefaultLimit))
	case c.Window < 0:
		return fieldError("QuotaConfig.Window", c.Window.String(), fmt.Sprintf("must be >= 0 (0 means the default, %v)", DefaultWindow))
	case c.Dimension > DimensionUserAPI:
		return fieldError("QuotaConfig.Dimension", c.Dimension.String(), "must be DimensionNone, DimensionUser or DimensionUserAPI")
	}
	return nil
}

// NewQuota returns the quota cfg describes, zero fields taking their
// defaults, or cfg's validation error.
func NewQuota(cfg QuotaConfig) (*Quota, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Limit = cmp.Or(cfg.Limit, DefaultLimit)
	cfg.Window = cmp.Or(cfg.Window, DefaultWindow)
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
	}
	return &Quota{limit: cfg.Limit, window: cfg.Window, dimension: cfg.Dimension, clk: cfg.Clock, start: cfg.Clock.Now()}, nil
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
