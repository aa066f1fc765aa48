package retrybudget

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/retry"
)

func newBudget(t *testing.T, c retry.BudgetConfig) *Budget {
	t.Helper()
	b, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// allowed counts how many of n retries the budget allows at now.
func allowed(b *Budget, now time.Time, n int) int {
	k := 0
	for range n {
		if b.Allow(now) {
			k++
		}
	}
	return k
}

// Above the floor, retries stay within the ratio of first attempts.
func TestRatioOfFirstAttempts(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	b := newBudget(t, retry.BudgetConfig{})
	for range 1000 {
		b.First(clk.Now())
	}
	if got := allowed(b, clk.Now(), 500); got != 200 {
		t.Errorf("retries allowed after 1000 first attempts = %d, want 200 (20%%)", got)
	}
	// Each 5 more first attempts allow one more retry.
	for range 50 {
		b.First(clk.Now())
	}
	if got := allowed(b, clk.Now(), 50); got != 10 {
		t.Errorf("retries allowed after 50 more first attempts = %d, want 10", got)
	}
}

// With little traffic the floor allows MinPerSecond for each second of
// the window, whatever the ratio.
func TestFloorForLowTraffic(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	b := newBudget(t, retry.BudgetConfig{})
	b.First(clk.Now())
	if got := allowed(b, clk.Now(), 150); got != 100 {
		t.Errorf("retries allowed with 1 first attempt = %d, want 100 (10/s over 10s)", got)
	}
	b2 := newBudget(t, retry.BudgetConfig{MinPerSecond: 1, Window: 2 * time.Second, Ratio: 0.5})
	if got := allowed(b2, clk.Now(), 10); got != 2 {
		t.Errorf("retries allowed with floor 1/s over 2s = %d, want 2", got)
	}
}

// Counts leave the window as it slides: old first attempts stop
// allowing retries, old retries stop counting against them.
func TestWindowSlides(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	b := newBudget(t, retry.BudgetConfig{MinPerSecond: 1, Window: 10 * time.Second})
	for range 1000 {
		b.First(clk.Now())
	}
	if got := allowed(b, clk.Now(), 300); got != 200 {
		t.Fatalf("allowed = %d, want 200", got)
	}
	clk.Add(5 * time.Second)
	if got := allowed(b, clk.Now(), 10); got != 0 {
		t.Errorf("allowed 5s later, no new first attempts = %d, want 0", got)
	}
	for range 100 {
		b.First(clk.Now())
	}
	if got := allowed(b, clk.Now(), 100); got != 20 {
		t.Errorf("allowed after 100 more = %d, want 20", got)
	}
	// 10s after the first burst it has left the window: 100 first
	// attempts and 20 retries remain, the floor (10) is below the ratio.
	clk.Add(5 * time.Second)
	if f, r := b.Counts(clk.Now()); f != 100 || r != 20 {
		t.Errorf("counts after the window slid = %d first, %d retries; want 100, 20", f, r)
	}
	if got := allowed(b, clk.Now(), 10); got != 0 {
		t.Errorf("allowed = %d, want 0 (20 of 20 spent)", got)
	}
	// A whole window later nothing is left but the floor.
	clk.Add(20 * time.Second)
	if f, r := b.Counts(clk.Now()); f != 0 || r != 0 {
		t.Errorf("counts a window later = %d, %d; want 0, 0", f, r)
	}
	if got := allowed(b, clk.Now(), 20); got != 10 {
		t.Errorf("allowed a window later = %d, want 10 (the floor)", got)
	}
}

func TestDisabledAndNil(t *testing.T) {
	b := newBudget(t, retry.BudgetConfig{Disabled: true})
	if b != nil {
		t.Fatalf("a disabled budget = %v, want nil", b)
	}
	now := time.Unix(1_700_000_000, 0)
	b.First(now)
	if got := allowed(b, now, 1000); got != 1000 {
		t.Errorf("a nil budget allowed %d of 1000", got)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []retry.BudgetConfig{{Ratio: -1}, {Ratio: 11}, {MinPerSecond: -1}, {Window: time.Millisecond}, {Window: time.Hour}} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) = nil error", c)
		}
	}
}

// Recording a first attempt allocates nothing.
func TestFirstAllocatesNothing(t *testing.T) {
	b := newBudget(t, retry.BudgetConfig{})
	now := time.Unix(1_700_000_000, 0)
	if n := testing.AllocsPerRun(100, func() { b.First(now); b.Allow(now) }); n != 0 {
		t.Errorf("First and Allow allocate %v times", n)
	}
}

// Concurrent retries never pass the bound together.
func TestConcurrentAllowKeepsTheBound(t *testing.T) {
	b := newBudget(t, retry.BudgetConfig{MinPerSecond: 1})
	now := time.Unix(1_700_000_000, 0)
	for range 1000 {
		b.First(now)
	}
	var (
		wg sync.WaitGroup
		n  atomic.Int64
	)
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if b.Allow(now) {
					n.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n.Load() != 200 {
		t.Errorf("%d retries allowed by 8 goroutines, want 200", n.Load())
	}
}
