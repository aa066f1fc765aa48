package faults

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
)

// JSON calls go to the JSON variant of the method and succeed.
func TestRunJSON(t *testing.T) {
	r, err := Run(context.Background(), Config{Scenario: None, Setup: RetryPolicy, Rate: 100, Duration: 100 * time.Millisecond, Format: "json"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Calls != 10 || r.OK != 10 || r.Executions != 10 {
		t.Errorf("%d calls, %d ok, %d executions; want 10 of each", r.Calls, r.OK, r.Executions)
	}
}

// A run whose context ends stops its arrivals at once and returns the
// calls made so far.
func TestRunStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *Result, 1)
	go func() {
		r, err := Run(ctx, Config{Scenario: None, Setup: NoPolicy, Duration: time.Minute})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	cancel()
	r := testwait.Recv(t, done, "Run's return once its context ended")
	if r != nil && r.Calls >= 12000 {
		t.Errorf("%d calls: the run did not stop", r.Calls)
	}
}

// An invalid Config is an error naming the field, before anything starts.
func TestRunRejectsAnInvalidConfig(t *testing.T) {
	if _, err := Run(context.Background(), Config{Scenario: None}); err == nil {
		t.Error("Run without a Setup succeeded")
	}
}
