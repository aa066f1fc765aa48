package hedge

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/retry"
)

func TestEstimatorFollowsTheQuantile(t *testing.T) {
	cfg := Adaptive{Quantile: 0.9, Window: 100, Floor: time.Millisecond, Cap: time.Second}
	e, err := NewEstimator(cfg, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.Delay(); got != 50*time.Millisecond {
		t.Fatalf("before any sample: %v, want the fallback", got)
	}
	// 100 samples 1ms..100ms: the 0.9 quantile is 90ms.
	for i := 1; i <= 100; i++ {
		e.Observe(time.Duration(i) * time.Millisecond)
	}
	if got := e.Delay(); got != 90*time.Millisecond {
		t.Fatalf("p90 of 1..100ms = %v, want 90ms", got)
	}
	// The window slides: 100 fast samples replace the old ones.
	for i := 0; i < 100; i++ {
		e.Observe(2 * time.Millisecond)
	}
	if got := e.Delay(); got != 2*time.Millisecond {
		t.Fatalf("after a fast window: %v, want 2ms", got)
	}
	// Floor and cap bound it.
	for i := 0; i < 100; i++ {
		e.Observe(time.Microsecond)
	}
	if got := e.Delay(); got != time.Millisecond {
		t.Fatalf("floor: %v", got)
	}
	for i := 0; i < 100; i++ {
		e.Observe(time.Hour)
	}
	if got := e.Delay(); got != time.Second {
		t.Fatalf("cap: %v", got)
	}
}

func TestBudgetAllowsTheFraction(t *testing.T) {
	b := NewBudget(0.1, 1) // starts with one hedge saved
	if !b.Withdraw() {
		t.Fatal("a full budget refused")
	}
	hedges := 0
	for call := 0; call < 1000; call++ {
		b.Deposit()
		if b.Withdraw() {
			hedges++
		}
	}
	if hedges != 100 {
		t.Fatalf("1000 calls at 10%% allowed %d hedges, want 100", hedges)
	}
	var nilBudget *Budget
	nilBudget.Deposit()
	if !nilBudget.Withdraw() {
		t.Fatal("a nil budget refuses")
	}
}

func TestAdaptiveValidate(t *testing.T) {
	ok := Adaptive{Quantile: 0.95, Window: 100, Floor: time.Millisecond, Cap: time.Second, Budget: 0.1}
	bad := []struct {
		field string
		mod   func(*Adaptive)
	}{
		{"quantile", func(a *Adaptive) { a.Quantile = 1 }},
		{"window", func(a *Adaptive) { a.Window = 5 }},
		{"window", func(a *Adaptive) { a.Window = MaxWindow + 1 }}, // the Estimator would hold that many
		{"floor", func(a *Adaptive) { a.Floor = 0 }},
		{"cap", func(a *Adaptive) { a.Cap = time.Microsecond }},
		{"budget", func(a *Adaptive) { a.Budget = 2 }},
	}
	for _, tt := range bad {
		field, mod := tt.field, tt.mod
		a := ok
		mod(&a)
		p := Policy{MaxAttempts: 2, NonFatalCodes: codes.NewSet(codes.Busy), Adaptive: &a}
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), "adaptiveDelay."+field) {
			t.Errorf("%s: %v", field, err)
		}
	}
}

// The executor takes each call's delay from Delay and stops hedging when the
// budget is empty, but never refuses the first attempt.
func TestExecutorUsesDelayAndBudget(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	e, err := NewExecutor(ExecutorConfig{
		Policy: Policy{MaxAttempts: 3, HedgingDelay: time.Hour, NonFatalCodes: codes.NewSet(codes.Busy)},
		Clock:  clk, Delay: func() time.Duration { return 10 * time.Millisecond },
		Budget: NewBudget(0, 1), // one hedge, ever
	})
	if err != nil {
		t.Fatal(err)
	}
	run := func() (Result, []int) {
		started := make(chan int, 3)
		release := make(chan struct{})
		done := make(chan Result, 1)
		go func() {
			done <- e.Do(context.Background(), func(ctx context.Context, a retry.Attempt) retry.Outcome {
				started <- a.Number
				if a.Number > 0 {
					return retry.Outcome{} // the hedge wins at once
				}
				select {
				case <-ctx.Done():
					return retry.Outcome{Err: ctx.Err(), Code: codes.Cancelled}
				case <-release:
					return retry.Outcome{Err: context.Canceled, Code: codes.Busy}
				}
			})
		}()
		if n := testwait.Recv(t, started, "the first attempt"); n != 0 {
			t.Fatalf("first attempt was %d", n)
		}
		testwait.Timers(t, clk, 1) // the hedge timer, armed with Delay()
		clk.Add(10 * time.Millisecond)
		close(release)
		r := testwait.Recv(t, done, "the hedged call to return")
		close(started)
		var rest []int
		for n := range started {
			rest = append(rest, n)
		}
		return r, rest
	}
	r, hedges := run()
	if r.Err() != nil || r.Winner != 1 || len(hedges) != 1 {
		t.Fatalf("first call: %+v, hedges %v; want the hedge after 10ms to win", r, hedges)
	}
	r, hedges = run()
	if r.Sent != 1 || len(hedges) != 0 || r.Stop != retry.StopThrottled {
		t.Fatalf("second call: %+v, hedges %v; want the empty budget to stop hedging", r, hedges)
	}
}

func TestEstimatorColdStartUsesCapWithoutAFixedDelay(t *testing.T) {
	e, err := NewEstimator(Adaptive{Quantile: 0.9, Window: 100, Floor: time.Millisecond, Cap: 300 * time.Millisecond}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.Delay(); got != 300*time.Millisecond {
		t.Fatalf("cold start with no hedgingDelay: %v, want the cap", got)
	}
}

// An adaptive policy passed straight to NewExecutor gets its Estimator and
// Budget: the executor hedges at the learned delay, not at HedgingDelay.
func TestNewExecutorBuildsTheAdaptivePolicy(t *testing.T) {
	a := Adaptive{Quantile: 0.5, Window: 10, Floor: time.Millisecond, Cap: time.Second, Budget: 0.1}
	p := Policy{MaxAttempts: 2, HedgingDelay: 800 * time.Millisecond, NonFatalCodes: codes.NewSet(codes.Busy), Adaptive: &a}
	e, err := NewExecutor(ExecutorConfig{Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	est := e.Estimator()
	if est == nil || e.budget == nil {
		t.Fatalf("Estimator %v, budget %v: want both built from Policy.Adaptive", est, e.budget)
	}
	if got := e.delayFn(); got != 800*time.Millisecond {
		t.Fatalf("delay before any sample = %v, want the fallback HedgingDelay 800ms", got)
	}
	for i := 0; i < 10; i++ {
		est.Observe(20 * time.Millisecond)
	}
	if got := e.delayFn(); got != 20*time.Millisecond {
		t.Fatalf("delay after 10 samples of 20ms = %v, want 20ms", got)
	}
	plain, err := NewExecutor(ExecutorConfig{Policy: Policy{MaxAttempts: 2, NonFatalCodes: codes.NewSet(codes.Busy)}})
	if err != nil || plain.Estimator() != nil || plain.budget != nil {
		t.Fatalf("a fixed-delay policy: err %v, estimator %v, budget %v; want none", err, plain.Estimator(), plain.budget)
	}
}
