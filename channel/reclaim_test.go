package channel

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
)

func TestReclaimer(t *testing.T) {
	t.Parallel() // it waits out its delays; its bound is a least time
	var collected atomic.Int64
	r := &reclaimer{collect: func() { collected.Add(1) }, delay: 10 * time.Millisecond, every: 200 * time.Millisecond}
	defer r.close()
	r.add(reclaimAt / 2)
	r.add(reclaimAt/2 - 1)
	if r.scheduled() {
		t.Fatal("a collection was scheduled below the threshold")
	}
	start := time.Now()
	r.add(1) // the threshold
	testwait.Until(t, "the collection", func() bool { return collected.Load() == 1 })
	r.add(reclaimAt)
	r.add(reclaimAt) // one more collection, not two
	testwait.Until(t, "the second collection", func() bool { return collected.Load() == 2 })
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("two collections %v apart, want at least every (200ms)", d)
	}
	if r.scheduled() {
		t.Fatal("a third collection was scheduled: releases during a pending one must join it")
	}
}

func TestReclaimerCloseCancels(t *testing.T) {
	var collected atomic.Int64
	r := &reclaimer{collect: func() { collected.Add(1) }, delay: time.Hour, every: time.Hour}
	r.add(reclaimAt)
	r.close()
	r.add(reclaimAt)
	if r.scheduled() {
		t.Fatal("a collection was scheduled after close")
	}
	if n := collected.Load(); n != 0 {
		t.Fatalf("%d collections after close", n)
	}
}

// Collections are worth it only for a quarter of the live heap or more:
// below that the freed bytes are kept counting.
func TestReclaimerWeighsTheLiveHeap(t *testing.T) {
	var collected atomic.Int64
	live := atomic.Int64{}
	live.Store(8 * reclaimAt)
	r := &reclaimer{collect: func() { collected.Add(1) }, live: live.Load, delay: time.Millisecond, every: time.Millisecond}
	defer r.close()
	r.add(reclaimAt) // an eighth of the live heap
	testwait.Until(t, "the scheduled run to pass", func() bool { return !r.scheduled() })
	if n := collected.Load(); n != 0 {
		t.Fatalf("%d collections for an eighth of the live heap", n)
	}
	r.add(reclaimAt) // a quarter in all
	testwait.Until(t, "the collection", func() bool { return collected.Load() == 1 })
}
