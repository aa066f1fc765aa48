package hedgeexec

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/latency"
	"github.com/sluice-rpc/sluice/retry"
)

// fakeDeadline is a context whose deadline is on the harness's fake clock
// (in the wall clock's past) and that never ends by itself.
type fakeDeadline struct {
	context.Context
	dl time.Time
}

func (c fakeDeadline) Deadline() (time.Time, bool) { return c.dl, true }

// No hedge is sent with less time left than the method's expected
// latency: hedging stops (retry.StopDeadline) and the call ends with the
// first attempt's outcome. With time enough, the hedge goes out (and
// wins).
func TestHedgeSkippedWhenDeadlineTooShort(t *testing.T) {
	epoch := time.Unix(1_700_000_000, 0) // the harness's fake clock's start
	for _, tt := range []struct {
		name string
		left time.Duration // at the start
		sent int
	}{
		{"too little left", 1200 * ms, 1},
		{"enough left", time.Hour, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			est := new(latency.Low)
			for i := 0; i < latency.MinSamples; i++ {
				est.Observe(time.Second)
			}
			ctx := fakeDeadline{context.Background(), epoch.Add(tt.left)}
			h := start(t, ExecutorConfig{Policy: policy(500 * ms), Latency: est}, ctx)
			h.expectStarted(0)
			h.waitTimers(1)
			h.fake.Add(500 * ms) // 700 ms left of 1.2 s: under the expected 1 s
			if tt.sent == 2 {
				h.expectStarted(1)
				h.reply(1, okO)
			} else {
				h.reply(0, busyO)
			}
			r := h.result()
			if tt.sent == 1 && (r.Stop != retry.StopDeadline || r.Sent != 1 || r.Err() != errBusy) {
				t.Fatalf("Result %+v, want StopDeadline after 1 attempt with its error", r)
			}
			if tt.sent == 2 && (r.Stop != retry.StopSucceeded || r.Sent != 2 || r.Winner != 1) {
				t.Fatalf("Result %+v, want hedges sent and a success", r)
			}
		})
	}
}
