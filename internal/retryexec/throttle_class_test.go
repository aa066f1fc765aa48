package retryexec

import (
	"context"
	"testing"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/criticality"
	"github.com/sluice-rpc/sluice/retry"
)

// The lower classes stop retrying at a higher fill: sheddable above 3/4
// of MaxTokens, sheddable_plus above 5/8, critical and critical_plus (and
// Allow, and an unset class) above gRPC's 1/2. Draining a bucket of 16
// one failure at a time finds each threshold exactly.
func TestThrottleAllowForKeepsAReserveForHigherClasses(t *testing.T) {
	th, err := NewThrottle(retry.ThrottleConfig{MaxTokens: 16, TokenRatio: 1})
	if err != nil {
		t.Fatal(err)
	}
	// lastAllowed is the lowest fill at which each class may still retry.
	lastAllowed := map[criticality.Class]float64{
		criticality.Sheddable:     13, // > 12 = 3/4
		criticality.SheddablePlus: 11, // > 10 = 5/8
		criticality.Critical:      9,  // > 8 = 1/2
		criticality.CriticalPlus:  9,
		0:                         9,
	}
	for fill := 16.0; fill >= 0; fill-- {
		if th.Tokens() != fill {
			t.Fatalf("tokens %v, want %v", th.Tokens(), fill)
		}
		for c, least := range lastAllowed {
			if got, want := th.AllowFor(c), fill >= least; got != want {
				t.Errorf("AllowFor(%s) at %v tokens of 16: %v, want %v", c, fill, got, want)
			}
		}
		if th.Allow() != th.AllowFor(criticality.Critical) {
			t.Errorf("Allow and AllowFor(critical) differ at %v tokens", fill)
		}
		th.RecordFailure()
	}
	// Successes refill it: sheddable retries resume above 3/4.
	for range 13 {
		th.RecordSuccess()
	}
	if !th.AllowFor(criticality.Sheddable) {
		t.Errorf("sheddable refused at %v tokens of 16", th.Tokens())
	}
	var none *Throttle
	if !none.AllowFor(criticality.Sheddable) {
		t.Error("a nil Throttle refused a sheddable retry")
	}
}

// A retry executor for each class, the bucket between the thresholds
// when the first attempt's failure is counted (7 of 10): a critical or
// sheddable_plus call retries, a sheddable one stops, throttled.
func TestExecutorRetriesByClass(t *testing.T) {
	for _, tc := range []struct {
		class    criticality.Class
		attempts int
		stop     retry.StopReason
	}{
		{criticality.Sheddable, 1, retry.StopThrottled},
		{criticality.SheddablePlus, 2, retry.StopSucceeded},
		{criticality.Critical, 2, retry.StopSucceeded},
		{criticality.CriticalPlus, 2, retry.StopSucceeded},
	} {
		th, err := NewThrottle(retry.ThrottleConfig{MaxTokens: 10, TokenRatio: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		th.RecordFailure()
		th.RecordFailure() // 8; the first attempt's failure takes it to 7
		p := validPolicy() // 4 attempts, BUSY retryable
		e, err := NewExecutor(ExecutorConfig{Policy: &p, Throttle: th, Clock: autoClock{clock.NewFake(epoch)}, Rand: half})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		res := e.DoSizedFor(context.Background(), 1, tc.class, func(context.Context, Attempt) Outcome {
			n++
			if n == 1 {
				return busyO
			}
			return okO
		})
		if res.Attempts != tc.attempts || res.Stop != tc.stop {
			t.Errorf("%s call, first attempt Busy, bucket at 7 of 10 after it: %d attempts, stop %v; want %d, %v",
				tc.class, res.Attempts, res.Stop, tc.attempts, tc.stop)
		}
	}
}
