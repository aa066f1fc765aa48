package faults

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

// JSON calls go to the JSON variant of the method and succeed.
func TestRunJSON(t *testing.T) {
	r, err := Run(context.Background(), Config{Scenario: None, Setup: RetryPolicy, Rate: 100, Duration: millis.Duration(100 * time.Millisecond), Format: "json"})
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
		r, err := Run(ctx, Config{Scenario: None, Setup: NoPolicy, Duration: millis.Duration(time.Minute)})
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

// An erroring run names its failing peer, fails calls with UNEXPECTED
// only, and finds the streak (the seed puts it at the peer's 9th call) in
// time to count the calls after it: what the ejection promise is checked
// on, whatever the client's chooser makes of it.
func TestRunErroring(t *testing.T) {
	r, err := Run(context.Background(), Config{Scenario: Erroring, Setup: NoPolicy, Rate: 1000, Duration: millis.Duration(300 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Problems) > 0 {
		t.Fatalf("problems: %q", r.Problems)
	}
	if r.Faulty == "" || r.FaultAt != 0 || r.Calls != 300 {
		t.Errorf("faulty %q from %v, %d calls; want a failing peer from the start, 300 calls", r.Faulty, r.FaultAt, r.Calls)
	}
	if len(r.Errors) != 1 || r.Errors["UNEXPECTED"] < ErrorStreak || r.OK+r.Errors["UNEXPECTED"] != r.Calls {
		t.Errorf("%d ok, errors %v; want the rest UNEXPECTED, at least %d of them", r.OK, r.Errors, ErrorStreak)
	}
	if !r.Streak || r.StreakAt <= 0 || r.StreakAt >= r.Elapsed {
		t.Errorf("streak %v at %v in a run of %v; want one within the run", r.Streak, r.StreakAt, r.Elapsed)
	}
	if r.CallsAfterStreak <= 0 || r.PickedAfterStreak > r.CallsAfterStreak || r.CallsAfterStreak > r.Calls {
		t.Errorf("%d calls after the streak, %d chose the peer, of %d", r.CallsAfterStreak, r.PickedAfterStreak, r.Calls)
	}
}

// Where nothing listens, the connections are the client's dials, the
// same count as Dials.
func TestRunRefusedCountsDials(t *testing.T) {
	r, err := Run(context.Background(), Config{Scenario: Refused, Setup: NoPolicy, Rate: 100, Duration: millis.Duration(100 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	if r.Dials == 0 || r.Connects != r.Dials || r.Accepts != 0 {
		t.Errorf("%d dials, %d connects, %d accepts; want connects = dials > 0, no accepts", r.Dials, r.Connects, r.Accepts)
	}
}
