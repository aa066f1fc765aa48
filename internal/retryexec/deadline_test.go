package retryexec

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/latency"
	"github.com/sluice-rpc/sluice/retry"
)

// warmLow returns a latency.Low that has observed d n times.
func warmLow(n int, d time.Duration) *latency.Low {
	l := new(latency.Low)
	for i := 0; i < n; i++ {
		l.Observe(d)
	}
	return l
}

// No retry is sent with less time left than the method's expected
// latency: the call ends with the last attempt's error and
// retry.StopDeadline. Before the estimate rests on latency.MinSamples
// observations (the cold start), or without a deadline, retries go on.
// Time is the fake clock's: each attempt takes took, the backoff waits
// (autoClock) take 50 ms; the deadline is an hour after the start, far
// in the wall clock's future too (ctxerr reads it).
func TestExecutorSkipsDoomedRetries(t *testing.T) {
	const hour = time.Hour
	for _, tt := range []struct {
		name     string
		est      *latency.Low
		took     time.Duration
		deadline bool
		stop     retry.StopReason
		attempts int
	}{
		{"too little left", warmLow(latency.MinSamples, 40*time.Minute), 30 * time.Minute, true, retry.StopDeadline, 1},
		{"enough left once", warmLow(latency.MinSamples, 40*time.Minute), 10 * time.Minute, true, retry.StopDeadline, 2},
		{"cold start", warmLow(latency.MinSamples-1, 40*time.Minute), 30 * time.Minute, true, retry.StopExhausted, 4},
		{"no deadline", warmLow(latency.MinSamples, 40*time.Minute), 30 * time.Minute, false, retry.StopExhausted, 4},
		{"no estimate", nil, 30 * time.Minute, true, retry.StopExhausted, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fake := clock.NewFake(time.Now())
			p := validPolicy()
			e, err := NewExecutor(ExecutorConfig{Policy: &p, Clock: autoClock{fake}, Rand: half, Latency: tt.est})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if tt.deadline {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, fake.Now().Add(hour))
				defer cancel()
			}
			n := 0
			res := e.Do(ctx, func(context.Context, Attempt) Outcome { n++; fake.Add(tt.took); return busyO })
			if res.Stop != tt.stop || res.Attempts != tt.attempts || n != tt.attempts {
				t.Fatalf("Stop %v after %d attempts (%d made), want %v after %d", res.Stop, res.Attempts, n, tt.stop, tt.attempts)
			}
			if res.Err() != errBusy {
				t.Errorf("Err() = %v, want the last attempt's error %v", res.Err(), errBusy)
			}
		})
	}
}

func TestStopDeadlineString(t *testing.T) {
	if s := retry.StopDeadline.String(); s != "deadline too short" {
		t.Errorf("StopDeadline.String() = %q", s)
	}
}
