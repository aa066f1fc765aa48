package faults

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

func sampleResult() *Result {
	cfg := Config{Scenario: Kill, Setup: RetryPolicy}.withDefaults()
	return &Result{Config: cfg, Calls: 3000, OK: 2990, Errors: map[string]int{"TIMEOUT": 7, "NETWORK": 3},
		Attempts: 3100, Executions: 3000, Dials: 40, Accepts: 3, Connects: 3, ConnectsAfter1s: 0,
		Elapsed: millis.Duration(15 * time.Second), P50: millis.Duration(300 * time.Microsecond), Max: millis.Duration(230 * time.Millisecond), MaxAfter1s: millis.Duration(230 * time.Millisecond),
		CallsAfter1s: 2800, Faulty: "127.0.0.1:1", FaultAt: millis.Duration(3 * time.Second), PickedAfterFault: true,
		LastPick: millis.Duration(11900 * time.Millisecond), FirstShare: 0.85, GoroutinesBefore: 12, GoroutinesAfter: 12,
		HeapBefore: 1 << 20, HeapAfter: 1 << 20}
}

func TestWriteTable(t *testing.T) {
	var text, md strings.Builder
	rs := []*Result{sampleResult()}
	if err := WriteTable(&text, rs, false); err != nil {
		t.Fatal(err)
	}
	if err := WriteTable(&md, rs, true); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kill", "retry", "3000", "TIMEOUT 7, NETWORK 3", "1.03", "11.9s (end)", "85%", "30ms", "12->12"} {
		if !strings.Contains(text.String(), want) || !strings.Contains(md.String(), want) {
			t.Errorf("tables lack %q:\n%s\n%s", want, text.String(), md.String())
		}
	}
	lines := strings.Split(strings.TrimSpace(md.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "|---|") {
		t.Errorf("markdown table:\n%s", md.String())
	}
	if n := strings.Count(lines[0], "|"); n != strings.Count(lines[2], "|") {
		t.Errorf("header has %d cells' pipes, row %d", n, strings.Count(lines[2], "|"))
	}
}

func TestWriteChecks(t *testing.T) {
	good := sampleResult()
	good.PickedAfterFault = false
	good.Max, good.MaxAfter1s = millis.Duration(210*time.Millisecond), millis.Duration(210*time.Millisecond) // within the 20 ms slack
	bad := sampleResult()
	bad.Max, bad.MaxAfter1s = good.Max, good.MaxAfter1s
	bad.Problems = []string{"the child would not exit"}
	var b strings.Builder
	failed, err := WriteChecks(&b, DefaultContract(), []*Result{good, bad})
	if err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if failed != 1 || !strings.Contains(out, "ok   kill/retry") ||
		!strings.Contains(out, "FAIL kill/retry: a dead peer is not chosen: a call chose the killed peer 11.9s after the kill") ||
		!strings.Contains(out, "PROBLEM kill/retry: the child would not exit") {
		t.Errorf("WriteChecks = %d:\n%s", failed, out)
	}
}

func TestPercent(t *testing.T) {
	for share, want := range map[float64]string{0: "0.0%", 0.0026: "0.3%", 0.079: "7.9%", 0.0996: "10%", 0.34: "34%", 1: "100%"} {
		if got := percent(share); got != want {
			t.Errorf("percent(%v) = %q, want %q", share, got, want)
		}
	}
}
