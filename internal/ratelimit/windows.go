package ratelimit

import (
	"context"
	"sync"
	"time"

	expbackoff "github.com/sluice-rpc/sluice/backoff"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/pacing"
)

// Delay is Aliyun's throttle-aware backoff: the wait before retry n (n >= 1)
// is the larger of timeLeft (the server's throttling window, 0 when the
// response was not throttled) and b's EqualJitter delay for random draw r
// in [0, 1), whatever b.Jitter says. tooLong reports that the wait exceeds
// maxDelay (when maxDelay > 0): the retry must not be made, the call fails
// with a *pacing.WindowError and the window is recorded in Windows.
func Delay(b expbackoff.Exponential, n int, r float64, timeLeft, maxDelay time.Duration) (wait time.Duration, tooLong bool) {
	b.Jitter = expbackoff.EqualJitter
	wait = max(b.Delay(n, r), timeLeft)
	return wait, maxDelay > 0 && wait > maxDelay
}

// Windows remembers the server's throttling windows per dimension key
// ("service" or "service::method", see Key) on an injected clock, so that
// calls to a throttled dimension are held back until its window
// ends: Aliyun's "disable requests during throttling". A window ends at the
// time recorded; after it, calls pass and the entry is forgotten. The zero
// Windows is not usable; make one with NewWindows. It is safe for concurrent
// use; a call to an unthrottled key takes one short critical section and
// does not allocate.
type Windows struct {
	clk clock.Clock
	mu  sync.Mutex
	m   map[string]time.Time
	// released is closed (and replaced) when Release ends a window, to wake
	// the calls waiting on it.
	released chan struct{}
}

// NewWindows returns an empty set of windows measured on clk; nil means
// clock.Real.
func NewWindows(clk clock.Clock) *Windows {
	if clk == nil {
		clk = clock.Real
	}
	return &Windows{clk: clk, m: make(map[string]time.Time), released: make(chan struct{})}
}

// Record notes that key is throttled until the time until. A window that
// already ends later is kept; a time not after now records nothing.
func (w *Windows) Record(key string, until time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !until.After(w.clk.Now()) {
		return
	}
	if cur, ok := w.m[key]; !ok || until.After(cur) {
		w.m[key] = until
	}
}

// RecordSignal records the window a throttled response's signal describes,
// for the key of its dimension in a call to service::method: it lasts
// Wait(s) from now. It records nothing when s asks for no wait.
func (w *Windows) RecordSignal(service, method string, s pacing.Signal) {
	if d := Wait(s); d > 0 {
		w.Record(Key(s.Dimension, service, method), w.clk.Now().Add(d))
	}
}

// Release ends key's window at once, letting calls through.
func (w *Windows) Release(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.m[key]; ok {
		delete(w.m, key)
		close(w.released)
		w.released = make(chan struct{})
	}
}

// Remaining returns how long key's window still runs, 0 when there is none.
func (w *Windows) Remaining(key string) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.remainingLocked(key, w.clk.Now())
}

func (w *Windows) remainingLocked(key string, now time.Time) time.Duration {
	until, ok := w.m[key]
	if !ok {
		return 0
	}
	if d := until.Sub(now); d > 0 {
		return d
	}
	delete(w.m, key)
	return 0
}

// Wait returns nil at once when key is not throttled. Otherwise it waits
// until key's window ends and returns nil, unless the wait would exceed
// maxDelay (when maxDelay > 0) or outlive ctx's deadline: then it returns a
// *pacing.WindowError at once (errors.Is(err, pacing.ErrRateLimited)) saying how long the
// window still runs. If ctx ends first it returns ctx.Err(). A window
// extended or released while it waits is honoured.
func (w *Windows) Wait(ctx context.Context, key string, maxDelay time.Duration) error {
	for {
		w.mu.Lock()
		if _, ok := w.m[key]; !ok { // the common case: no clock read
			w.mu.Unlock()
			return nil
		}
		now := w.clk.Now() // under the lock: never older than a Record before it
		d := w.remainingLocked(key, now)
		released := w.released
		w.mu.Unlock()
		if d <= 0 {
			return nil
		}
		if maxDelay > 0 && d > maxDelay {
			return &pacing.WindowError{Key: key, Remaining: d, Limit: maxDelay}
		}
		if dl, ok := ctx.Deadline(); ok {
			// A context deadline is a wall-clock time: measure it on the
			// wall clock, not on the (possibly fake) clock of the windows.
			if left := time.Until(dl); d > left {
				return &pacing.WindowError{Key: key, Remaining: d, Limit: max(left, 0), Deadline: true}
			}
		}
		t := w.clk.NewTimerAt(now.Add(d)) // the window's end, however late the timer is made
		select {
		case <-t.C():
		case <-released:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}
