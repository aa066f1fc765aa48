package amplification

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A tiny comparison runs every scenario in both modes; the naive chain
// multiplies a down leaf's load by far more than the bounded one.
func TestRunCI(t *testing.T) {
	res, err := Run(context.Background(), CI())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 8 {
		t.Fatalf("%d rows, want 8", len(res.Rows))
	}
	for _, r := range res.Rows {
		t.Logf("%+v", r)
		if r.Calls == 0 {
			t.Errorf("%s %s: no calls", r.Scenario, r.Mode)
		}
		if (r.RecoverMS != nil) && r.Scenario != Recovery {
			t.Errorf("%s %s: recover_ms set outside recovery", r.Scenario, r.Mode)
		}
		// The deadline figures are the deadline scenario's, and only its.
		// How many were late depends on the machine's load: the judged
		// figures come from a full run (docs/signals.md).
		for _, n := range []*int64{r.LateAttempts, r.LateRetries, r.LateRuns, r.SkippedDeadline, r.RefusedDeadline} {
			if (n != nil) != (r.Scenario == Deadline) {
				t.Errorf("%s %s: deadline figures %v, %v, %v, %v, %v", r.Scenario, r.Mode, r.LateAttempts, r.LateRetries, r.LateRuns, r.SkippedDeadline, r.RefusedDeadline)
				break
			}
		}
	}
	naive, bounded := res.Rows[0], res.Rows[1]
	if naive.Scenario != Down || naive.Mode != Naive || bounded.Mode != Bounded {
		t.Fatalf("rows out of order: %+v, %+v", naive, bounded)
	}
	if naive.LeafPerCall < 3 || bounded.LeafPerCall >= naive.LeafPerCall {
		t.Errorf("down: naive %.2f, bounded %.2f leaf requests per call; want naive >= 3 and above bounded", naive.LeafPerCall, bounded.LeafPerCall)
	}
	var b strings.Builder
	if err := res.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "| down | naive |") {
		t.Errorf("table lacks the down naive row:\n%s", b.String())
	}
}

func TestRecoverMS(t *testing.T) {
	ok := make([]bool, 100) // 10 ms apart: 1 s; the leaves return at 300 ms
	for i := 45; i < 100; i++ {
		ok[i] = true
	}
	ok[60] = false // one failure in a bucket of 10 is below 95%
	got := recoverMS(ok, 10*time.Millisecond, 300*time.Millisecond)
	if got == nil || *got != 400 {
		t.Errorf("recoverMS = %v, want 400", got)
	}
	if recoverMS(make([]bool, 100), 10*time.Millisecond, 300*time.Millisecond) != nil {
		t.Error("recoverMS of a run that never recovered is not nil")
	}
}

func TestParseScenarios(t *testing.T) {
	if s, err := ParseScenarios("all"); err != nil || len(s) != 4 {
		t.Errorf("all = %v, %v", s, err)
	}
	if s, err := ParseScenarios("flaky,down"); err != nil || len(s) != 2 || s[0] != Flaky {
		t.Errorf("flaky,down = %v, %v", s, err)
	}
	for _, bad := range []string{"", "up", "down,down"} {
		if _, err := ParseScenarios(bad); err == nil {
			t.Errorf("ParseScenarios(%q) = nil error", bad)
		}
	}
}
