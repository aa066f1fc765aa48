package channel

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// reclaimer gives memory back to the operating system after abusive peers
// released a lot of it at once: dropped requests, connections closed
// holding unfinished ones, connections closed for cause. The Go runtime
// returns freed memory only after its next collections, and with little
// traffic after an attack the next may be the forced one, two minutes on:
// the process would stay at its peak. Past reclaimAt freed bytes, and a
// quarter of the live heap (so that collections cost in proportion to what
// they free), the reclaimer runs a collection and then debug.FreeOSMemory
// (a second collection, which frees what sync.Pools kept through the
// first: tchannel-go's frames, and returns the free pages at once; the
// runtime's paced scavenger left a server at its peak for seconds more, so
// that the hostile harness's unfinished attack failed its 2 s check about
// once in six), reclaimDelay after the release so that the goroutines
// holding the memory have ended, and at most every reclaimEvery.
// Legitimate traffic releases nothing this way but rare closes
// mid-request.
type reclaimer struct {
	collect      func() // a collection, then debug.FreeOSMemory; tests count them
	live         func() int64
	delay, every time.Duration

	mu      sync.Mutex
	freed   int64
	last    time.Time
	timer   *time.Timer // the collection scheduled, if any
	closed  bool
	running sync.WaitGroup
}

const (
	reclaimAt    = 16 << 20
	reclaimDelay = time.Second
	reclaimEvery = 5 * time.Second
	// connMemory estimates what a closed inbound connection held in
	// tchannel-go (its goroutines' stacks, buffers and maps): the probe
	// measured about 14 KB per stalled connection.
	connMemory = 16 << 10
)

func newReclaimer() *reclaimer {
	return &reclaimer{collect: func() { runtime.GC(); debug.FreeOSMemory() }, live: liveHeap, delay: reclaimDelay, every: reclaimEvery}
}

// add counts n bytes freed, and schedules a collection once there are
// enough.
func (r *reclaimer) add(n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.freed += n
	if r.closed || r.timer != nil || r.freed < reclaimAt {
		return
	}
	wait := max(r.delay, r.every-time.Since(r.last))
	r.running.Add(1)
	r.timer = time.AfterFunc(wait, r.run)
}

func (r *reclaimer) run() {
	defer r.running.Done()
	r.mu.Lock()
	r.timer = nil
	if r.live != nil && r.freed < r.live()/4 {
		r.mu.Unlock() // not worth two collections yet: keep counting
		return
	}
	r.freed, r.last = 0, time.Now()
	r.mu.Unlock()
	r.collect()
}

// liveHeap returns the heap the last collection found live.
func liveHeap() int64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}

// close cancels a collection not yet started and waits for one running.
func (r *reclaimer) close() {
	r.mu.Lock()
	r.closed = true
	if r.timer != nil && r.timer.Stop() {
		r.timer = nil
		r.running.Done()
	}
	r.mu.Unlock()
	r.running.Wait()
}

// scheduled reports whether a collection is scheduled or running.
func (r *reclaimer) scheduled() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.timer != nil
}
