package faults

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/backoff"
	"github.com/sluice-rpc/sluice/internal/testkit/slowtest"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

// TestContract is the acceptance test of Sluice's failure handling: every
// scenario at the CI size, under each of its setups, checked against
// DefaultContract (the promises of the README's "When things break"). A
// run's setups are made side by side, except where timing is the point
// (black-hole's deadlines); the goroutines and heap of such a group are
// checked for the group. The table of every run is logged.
func TestContract(t *testing.T) {
	slowtest.Skip(t, "35 s of real time")
	c := DefaultContract()
	var mu sync.Mutex
	var all []*Result
	for _, sc := range Scenarios() {
		t.Run(string(sc), func(t *testing.T) {
			cfgs := runs(t, sc, CI)
			var results []*Result
			if sc == BlackHole || len(cfgs) == 1 {
				for _, cfg := range cfgs {
					results = append(results, mustRun(t, cfg))
				}
			} else {
				results = runSideBySide(t, c, cfgs)
			}
			mu.Lock()
			all = append(all, results...)
			mu.Unlock()
			for _, r := range results {
				t.Run(string(r.Config.Setup), func(t *testing.T) {
					for _, p := range r.Problems {
						t.Errorf("harness: %s", p)
					}
					for _, v := range c.Check(r) {
						t.Error(v)
					}
				})
			}
		})
	}
	var b strings.Builder
	WriteTable(&b, all, false)
	t.Logf("CI size, %d calls/s, deadline %v (race detector: %v)\n%s", DefaultRate, DefaultDeadline, slowtest.Race, b.String())
}

// mustRun makes one run, failing the test if it cannot be made.
func mustRun(t *testing.T, cfg Config) *Result {
	t.Helper()
	r, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("%s/%s: %v", cfg.Scenario, cfg.Setup, err)
	}
	return r
}

// runSideBySide makes the runs of cfgs at the same time, each Shared, and
// checks the group's goroutines and heap against c: back to what they were
// before, within c's slack, once every run is over.
func runSideBySide(t *testing.T, c Contract, cfgs []Config) []*Result {
	t.Helper()
	before, heap := goroutines(), heapAfterGC()
	results := make([]*Result, len(cfgs))
	errs := make([]error, len(cfgs))
	var wg sync.WaitGroup
	for i, cfg := range cfgs {
		cfg.Shared = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = Run(context.Background(), cfg)
		}()
	}
	wg.Wait() // each Run is bounded
	for i, err := range errs {
		if err != nil {
			t.Fatalf("%s/%s: %v", cfgs[i].Scenario, cfgs[i].Setup, err)
		}
	}
	if after := settle(before); after > before+c.GoroutineSlack {
		t.Errorf("nothing outlives a call: %d goroutines after the runs, %d before (allowed: +%d)", after, before, c.GoroutineSlack)
	}
	if after := heapAfterGC(); after > heap+c.HeapSlack {
		t.Errorf("nothing outlives a call: %.1f MiB of heap after the runs, %.1f MiB before (allowed: +%.0f MiB)",
			mib(after), mib(heap), mib(c.HeapSlack))
	}
	return results
}

// The connection backoff bound: gRPC's backoff with every wait as short as
// its jitter allows (0.8 s, 1.28 s, 2.048 s, ...: attempts at 0, 0.8,
// 2.08, 4.13, 7.41 s), counted in a window, plus one.
func TestBackoffMaxAttempts(t *testing.T) {
	b := DefaultContract().Backoff
	for _, tc := range []struct {
		from, to time.Duration
		want     int
	}{
		{0, 0, 2},
		{time.Second, 2 * time.Second, 1},
		{time.Second, 3 * time.Second, 2},
		{time.Second, 5 * time.Second, 3},
		{time.Second, 8 * time.Second, 4},
		{0, 8 * time.Second, 6},
	} {
		if got := MaxAttempts(b, tc.from, tc.to); got != tc.want {
			t.Errorf("MaxAttempts(%v, %v) = %d, want %d", tc.from, tc.to, got, tc.want)
		}
	}
	// The cap holds the waits at 96 s (120 s less 20%) once reached.
	capped := backoff.Exponential{Initial: time.Second, Max: 120 * time.Second, Multiplier: 10, Jitter: backoff.ProportionalJitter, Spread: 0.2}
	if got := MaxAttempts(capped, time.Hour, time.Hour+200*time.Second); got < 3 || got > 4 {
		t.Errorf("capped MaxAttempts over 200 s = %d, want 3 or 4 (one attempt per 96 s, plus one)", got)
	}
}

// Check names each promise a result breaks, and nothing for one that keeps
// them all.
func TestCheck(t *testing.T) {
	c := DefaultContract()
	base := func(s Scenario, st Setup) *Result {
		cfg := Config{Scenario: s, Setup: st, Duration: millis.Duration(2 * time.Second)}.withDefaults()
		return &Result{Config: cfg, Calls: 400, OK: 400, Errors: map[string]int{}, Elapsed: millis.Duration(2 * time.Second),
			Max: millis.Duration(50 * time.Millisecond), FirstShare: -1, GoroutinesBefore: 10, GoroutinesAfter: 10, HeapBefore: 1 << 20, HeapAfter: 1 << 20}
	}
	for _, tc := range []struct {
		name string
		r    func() *Result
		want []string // substrings, one per violation, in order
	}{
		{"a good run", func() *Result { return base(None, NoPolicy) }, nil},
		{"late call", func() *Result {
			r := base(BlackHole, RetryPolicy)
			r.Max = millis.Duration(400 * time.Millisecond)
			return r
		}, []string{"deadlines hold"}},
		{"late call on a machine that held timers back as long", func() *Result {
			r := base(BlackHole, RetryPolicy)
			r.SchedDelay = millis.Duration(150 * time.Millisecond)
			r.Max = millis.Duration(r.Config.Deadline.D() + c.DeadlineSlack + r.SchedDelay.D())
			return r
		}, nil},
		{"late call beyond what the machine held back", func() *Result {
			r := base(BlackHole, RetryPolicy)
			r.SchedDelay = millis.Duration(150 * time.Millisecond)
			r.Max = millis.Duration(r.Config.Deadline.D() + c.DeadlineSlack + r.SchedDelay.D() + time.Millisecond)
			return r
		}, []string{"deadlines hold"}},
		{"hedge loser on a machine that held timers back as long", func() *Result {
			r := base(BlackHole, HedgePolicy)
			r.Faulty, r.SchedDelay = "127.0.0.1:1", millis.Duration(50*time.Millisecond)
			r.MaxOK = millis.Duration(HedgingDelay + c.DeadlineSlack + r.SchedDelay.D())
			return r
		}, nil},
		{"hedge waits for the loser", func() *Result {
			r := base(BlackHole, HedgePolicy)
			r.Faulty, r.MaxOK = "127.0.0.1:1", millis.Duration(190*time.Millisecond)
			return r
		}, []string{"hedge losers return at once"}},
		{"connection storm", func() *Result {
			r := base(Refused, NoPolicy)
			r.Connects, r.ConnectsAfter1s, r.CallsAfter1s, r.MaxAfter1s = 8000, 4000, 200, millis.Duration(200*time.Millisecond)
			return r
		}, []string{"never becomes a storm", "connection backoff", "fail fast"}},
		{"within backoff", func() *Result {
			r := base(AcceptClose, NoPolicy)
			r.Connects, r.ConnectsAfter1s, r.CallsAfter1s, r.MaxAfter1s = 6, 3, 200, millis.Duration(time.Millisecond)
			return r
		}, nil},
		{"declined twice", func() *Result {
			r := base(Declined, NoPolicy)
			r.Executions = 800
			return r
		}, []string{"a handler runs once"}},
		{"declined, hedges sent on the delay", func() *Result {
			r := base(Declined, HedgePolicy)
			r.Executions, r.HedgeDue = 430, 20 // up to 2 hedges each
			return r
		}, nil},
		{"declined, hedged more than the delay explains", func() *Result {
			r := base(Declined, HedgePolicy)
			r.Executions, r.HedgeDue = 430, 10
			return r
		}, []string{"a handler runs once"}},
		{"declined, retried without a hedging policy", func() *Result {
			r := base(Declined, RetryPolicy)
			r.Executions, r.HedgeDue = 430, 20 // slow calls excuse nothing
			return r
		}, []string{"a handler runs once"}},
		{"busy within the bound", func() *Result {
			r := base(Busy, RetryBucket)
			r.Executions = 330
			return r
		}, nil},
		{"busy over the bound", func() *Result {
			r := base(Busy, RetryBucket)
			r.Executions = 400
			return r
		}, []string{"busy throttling"}},
		{"killed peer chosen late", func() *Result {
			r := base(Kill, NoPolicy)
			r.Faulty, r.FaultAt, r.PickedAfterFault, r.LastPick = "127.0.0.1:1", millis.Duration(500*time.Millisecond), true, millis.Duration(1400*time.Millisecond)
			return r
		}, []string{"a dead peer is not chosen"}},
		{"frozen peer found in time", func() *Result {
			r := base(Freeze, NoPolicy)
			r.Faulty, r.FaultAt, r.PickedAfterFault, r.LastPick = "127.0.0.1:1", millis.Duration(500*time.Millisecond), true, millis.Duration(3*time.Second)
			return r
		}, nil},
		{"erroring peer ejected", func() *Result {
			r := base(Erroring, NoPolicy)
			r.Faulty, r.Streak, r.StreakAt, r.CallsAfterStreak, r.PickedAfterStreak = "127.0.0.1:1", true, millis.Duration(50*time.Millisecond), 390, 3
			return r
		}, nil},
		{"erroring peer still chosen", func() *Result {
			r := base(Erroring, HedgePolicy)
			r.Faulty, r.Streak, r.StreakAt, r.CallsAfterStreak, r.PickedAfterStreak = "127.0.0.1:1", true, millis.Duration(50*time.Millisecond), 390, 4
			return r
		}, []string{"an erroring peer is ejected: 4 of the 390 calls (1.0%)"}},
		{"erroring peer without a streak: nothing to check", func() *Result {
			r := base(Erroring, NoPolicy)
			r.Faulty, r.CallsAfterStreak, r.PickedAfterStreak = "127.0.0.1:1", 390, 130
			return r
		}, nil},
		{"slow peer probed", func() *Result {
			r := base(Latency, NoPolicy)
			r.Faulty, r.FirstShare = "127.0.0.1:1", 0.004
			return r
		}, nil},
		{"slow peer still chosen first", func() *Result {
			r := base(Latency, RetryPolicy)
			r.Faulty, r.FirstShare = "127.0.0.1:1", 0.02
			return r
		}, []string{"a slow peer gets almost no first attempts: 2.0%"}},
		{"slow peer, no call a second in", func() *Result {
			r := base(Latency, NoPolicy)
			r.Faulty, r.FirstShare = "127.0.0.1:1", -1
			return r
		}, nil},
		{"leak", func() *Result {
			r := base(None, NoPolicy)
			r.GoroutinesAfter, r.HeapAfter = 40, 20<<20
			return r
		}, []string{"goroutines after", "MiB of heap"}},
		{"shared runs leave leaks to the group", func() *Result {
			r := base(None, NoPolicy)
			r.Config.Shared, r.GoroutinesAfter = true, 40
			return r
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := c.Check(tc.r())
			if len(got) != len(tc.want) {
				t.Fatalf("Check = %q, want %d violations like %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("violation %d = %q, want it to mention %q", i, got[i], w)
				}
			}
		})
	}
}
