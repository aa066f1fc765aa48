package leasing

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
)

// fixedSource is a CapacitySource the test sets by hand.
type fixedSource struct {
	mu       sync.Mutex
	capacity float64
	changed  chan struct{}
}

func newFixedSource(capacity float64) *fixedSource {
	return &fixedSource{capacity: capacity, changed: make(chan struct{})}
}

func (s *fixedSource) Capacity() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.capacity
}

func (s *fixedSource) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

func (s *fixedSource) set(capacity float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.capacity = capacity
	close(s.changed)
	s.changed = make(chan struct{})
}

// WaitWithin(ctx, share) refuses an admission due after that share of the
// time left, which Wait (share 1) would have waited for, and gives the slot
// back.
func TestRateLimiterWaitWithinKeepsPartOfTheDeadline(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	l := newRateLimiter(newFixedSource(1), clk)
	if err := l.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The next admission is 1 s away; the deadline 1.5 s.
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	if err := l.WaitWithin(ctx, 0.5); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("WaitWithin(half of 1.5s) for an admission 1s away: %v, want ErrRateLimited", err)
	}
	clk.Add(time.Second) // the refused slot was given back: due now
	if err := l.WaitWithin(ctx, 0.5); err != nil {
		t.Fatalf("WaitWithin once the slot is due: %v", err)
	}
	for _, bad := range []float64{0, -1, 1.5, math.NaN()} {
		if err := l.WaitWithin(ctx, bad); err == nil || errors.Is(err, ErrRateLimited) {
			t.Errorf("WaitWithin(share %v) = %v, want an error naming the share", bad, err)
		}
	}
}

func TestRateLimiterSpreadsCallsOverTheSecond(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	l := newRateLimiter(newFixedSource(10), clk)
	if err := l.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	// No burst: the second call of the second needs 100 ms.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := l.Wait(ctx); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("second call with a 50ms deadline: %v, want ErrRateLimited", err)
	}
	for i := 0; i < 10; i++ {
		clk.Add(100 * time.Millisecond)
		// A wait would hang on the fake clock until this deadline: the
		// error says so instead.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := l.Wait(ctx)
		cancel()
		if err != nil {
			t.Fatalf("call %d, 100ms after the last at 10/s: %v; it should not wait", i, err)
		}
	}
}

// armingClock counts the deadline timers made on it.
type armingClock struct {
	*clock.Fake
	armed atomic.Int64
}

func (c *armingClock) NewTimerAt(deadline time.Time) clock.Timer {
	t := c.Fake.NewTimerAt(deadline)
	c.armed.Add(1)
	return t
}

func TestRateLimiterWaitsAndFollowsCapacityChanges(t *testing.T) {
	clk := &armingClock{Fake: clock.NewFake(testEpoch)}
	src := newFixedSource(1)
	l := newRateLimiter(src, clk)
	if err := l.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Wait(context.Background()) }()
	waitFor(t, "the waiter to arm its timer (1s at 1/s)", func() bool { return clk.armed.Load() == 1 })
	src.set(1000) // the waiter re-reserves at the new rate: 1 ms
	waitFor(t, "the waiter to re-arm its timer", func() bool { return clk.armed.Load() == 2 })
	clk.Add(time.Millisecond)
	if err := testwait.Recv(t, done, "the waiter to be admitted 1ms after the change"); err != nil {
		t.Fatal(err)
	}
}

func TestRateLimiterZeroAndInfiniteCapacity(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	src := newFixedSource(0)
	l := newRateLimiter(src, clk)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if err := l.Wait(ctx); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("capacity 0 with a deadline: %v, want ErrRateLimited", err)
	}
	cctx, ccancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Wait(cctx) }()
	ccancel()
	if err := testwait.Recv(t, done, "the waiter to return"); !errors.Is(err, context.Canceled) {
		t.Fatalf("capacity 0, cancelled: %v", err)
	}
	src.set(math.Inf(1))
	for i := 0; i < 1000; i++ {
		if err := l.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func TestGaugeFollowsCapacity(t *testing.T) {
	src := newFixedSource(2)
	g := NewGauge(src)
	first, second := g.TryAcquire(), g.TryAcquire()
	if !first || !second {
		t.Fatal("could not take 2 slots of 2")
	}
	if g.TryAcquire() {
		t.Fatal("took a third slot of 2")
	}
	waiting := func() int {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.waiting
	}
	done := make(chan error, 1)
	go func() { done <- g.Acquire(context.Background()) }()
	waitFor(t, "Acquire to wait for a slot", func() bool { return waiting() == 1 })
	select {
	case err := <-done:
		t.Fatalf("Acquire returned %v with no slot free", err)
	default:
	}
	src.set(3.5) // floor: 3 slots
	if err := testwait.Recv(t, done, "the waiter to return"); err != nil {
		t.Fatal(err)
	}
	if g.InUse() != 3 {
		t.Fatalf("InUse = %d, want 3", g.InUse())
	}
	src.set(1)
	g.Release()
	if g.TryAcquire() {
		t.Fatal("took a slot with 2 held and capacity 1")
	}
	go func() { done <- g.Acquire(context.Background()) }()
	waitFor(t, "Acquire to wait for a slot", func() bool { return waiting() == 1 })
	g.Release()
	g.Release() // 0 held: the waiter gets the single slot
	if err := testwait.Recv(t, done, "the waiter to return"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Acquire(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire on a full gauge with a cancelled context: %v", err)
	}
	src.set(math.Inf(1))
	for i := 0; i < 100; i++ {
		if !g.TryAcquire() {
			t.Fatal("unlimited gauge refused")
		}
	}
}
