package pacing

import (
	"context"
	"errors"
	"sync"
	"time"

	expbackoff "github.com/sluice-rpc/sluice/backoff"
	"github.com/sluice-rpc/sluice/clock"
)

// ErrRateLimited is the sentinel every *WindowError matches with errors.Is: a
// call was not sent, or not retried, because the server's throttling window
// runs longer than the call may wait.
var ErrRateLimited = errors.New("pacing: rate limited: the server's throttling window outlasts the call's wait")

// WindowError reports a call refused locally because the server's
// throttling window for Key still runs for Remaining, longer than the call
// could wait (Limit: its maximum delay, or what was left of its deadline).
type WindowError struct {
	// Key is the throttled dimension's key ("service" or "service::method").
	Key string
	// Remaining is how long the window still runs.
	Remaining time.Duration
	// Limit is the longest the call could have waited.
	Limit time.Duration
	// Deadline is true when Limit came from the context's deadline, false
	// when it is the maximum delay.
	Deadline bool
}

// Error says what was throttled, for how long, and what to do.
func (e *WindowError) Error() string {
	bound := "the maximum delay"
	if e.Deadline {
		bound = "the time left before the deadline"
	}
	return "pacing: " + e.Key + " is throttled by the server for another " + e.Remaining.String() +
		", longer than " + bound + " (" + e.Limit.String() + "); retry after the window ends"
}

// Is makes errors.Is(err, ErrRateLimited) true.
func (e *WindowError) Is(target error) bool { return target == ErrRateLimited }

// Delay is Aliyun's throttle-aware backoff: the wait before retry n (n >= 1)
// is the larger of timeLeft (the server's throttling window, 0 when the
// response was not throttled) and b's EqualJitter delay for random draw r
// in [0, 1), whatever b.Jitter says. tooLong reports that the wait exceeds
// maxDelay (when maxDelay > 0): the retry must not be made, the call fails
// with a *WindowError and the window is recorded in Windows.
func Delay(b expbackoff.Exponential, n int, r float64, timeLeft, maxDelay time.Duration) (wait time.Duration, tooLong bool) {
	b.Jitter = expbackoff.EqualJitter
	wait = max(b.Delay(n, r), timeLeft)
	return wait, maxDelay > 0 && wait > maxDelay
}

// Windows remembers the server's throttling windows per dimension key
// ("service" or "service::method", see Dimension.Key) on an injected clock,
// so that calls to a throttled dimension are held back until its window
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

// WindowsConfig configures a Windows. Its zero value runs on the wall
// clock.
type WindowsConfig struct {
	// Clock is the time source windows are measured on; nil means
	// clock.Real.
	Clock clock.Clock
}

// Validate returns nil: every WindowsConfig is valid (a nil Clock means
// clock.Real).
func (WindowsConfig) Validate() error { return nil }

// NewWindows returns an empty set of windows configured by cfg.
func NewWindows(cfg WindowsConfig) *Windows {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
	}
	return &Windows{clk: cfg.Clock, m: make(map[string]time.Time), released: make(chan struct{})}
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
// s.Wait() from now. It records nothing when s asks for no wait.
func (w *Windows) RecordSignal(service, method string, s Signal) {
	if d := s.Wait(); d > 0 {
		w.Record(s.Dimension.Key(service, method), w.clk.Now().Add(d))
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
// *WindowError at once (errors.Is(err, ErrRateLimited)) saying how long the
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
			return &WindowError{Key: key, Remaining: d, Limit: maxDelay}
		}
		if dl, ok := ctx.Deadline(); ok {
			// A context deadline is a wall-clock time: measure it on the
			// wall clock, not on the (possibly fake) clock of the windows.
			if left := time.Until(dl); d > left {
				return &WindowError{Key: key, Remaining: d, Limit: max(left, 0), Deadline: true}
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
