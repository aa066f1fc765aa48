package faults

import (
	"sync"
	"time"
)

// maxEvents bounds the times an events log keeps (24 MiB); beyond it the
// log only counts, and countSince undercounts (Result.Truncated says so).
const maxEvents = 1 << 20

// events is a log of timestamped occurrences of one kind at one place:
// connection attempts, accepted connections, handler executions. It is safe
// for concurrent use; the zero value is empty and ready.
type events struct {
	mu    sync.Mutex
	times []time.Time
	n     int
}

// add records one occurrence at t.
func (e *events) add(t time.Time) {
	e.mu.Lock()
	e.n++
	if len(e.times) < maxEvents {
		e.times = append(e.times, t)
	}
	e.mu.Unlock()
}

// count returns how many occurrences were recorded.
func (e *events) count() int {
	if e == nil {
		return 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n
}

// countSince returns how many of the kept occurrences happened at or after
// t, and whether the log dropped times (then the count is a lower bound).
func (e *events) countSince(t time.Time) (n int, truncated bool) {
	if e == nil {
		return 0, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, at := range e.times {
		if !at.Before(t) {
			n++
		}
	}
	return n, e.n > len(e.times)
}

// reset forgets everything, freeing the kept times.
func (e *events) reset() {
	if e == nil {
		return
	}
	e.mu.Lock()
	e.times, e.n = nil, 0
	e.mu.Unlock()
}
