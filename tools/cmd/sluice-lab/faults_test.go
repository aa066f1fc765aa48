package main

import (
	"context"
	"strings"
	"testing"
)

func runFaults(t *testing.T, ctx context.Context, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb strings.Builder
	code = faultsRun(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

// -h describes the command, lists the scenarios and shows examples, on
// stdout, and exits 0 as every command's help does.
func TestFaultsHelp(t *testing.T) {
	code, out, errOut := runFaults(t, context.Background(), "-h")
	if code != 0 || errOut != "" {
		t.Errorf("-h: exit %d, stderr %q; want 0 and nothing on stderr", code, errOut)
	}
	for _, want := range []string{"usage: sluice-lab faults", "Scenarios: none, refused, accept-close", "busy, erroring", "Examples:",
		"sluice-lab faults --scenarios kill,freeze", "--rps", "--ci", "--timeout duration"} {
		if !strings.Contains(out, want) {
			t.Errorf("-h lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "DESIGN.md") || strings.Contains(out, "seeds/") {
		t.Errorf("-h refers to files outside the repository:\n%s", out)
	}
}

func TestFaultsBadUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--scenarios", "flood"},
		{"--rps", "0"},
		{"--rps", "20000"},
		{"--duration", "-1s"},
		{"--timeout", "0s"},
		{"--deadline", "1s"},
		{"--ci", "kill"},
	} {
		code, out, errOut := runFaults(t, context.Background(), args...)
		if code != 2 || out != "" || errOut == "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and an error", args, code, out, errOut)
		}
	}
}

// A small run of three scenarios prints a row per setup and a verdict line
// per run (the verdicts themselves are benchmarks/faults' tests).
func TestFaultsSmallRun(t *testing.T) {
	t.Parallel() // waits on real time: overlaps with the other waiting tests
	code, out, errOut := runFaults(t, context.Background(), "--small", "--scenarios", "none,declined,erroring", "--duration", "300ms")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"scenario", "conn/call", "fault->last pick", "none      none", "declined  hedge",
		"erroring  retry", "UNEXPECTED", "runs broke the failure handling contract"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "none/") + strings.Count(out, "declined/") + strings.Count(out, "erroring/"); n < 9 {
		t.Errorf("%d verdict lines, want one per run (9):\n%s", n, out)
	}
	if !strings.Contains(errOut, "9 runs, ci size") {
		t.Errorf("stderr lacks the plan:\n%s", errOut)
	}
}

// kill re-executes this binary as a child server; the test binary does
// not call faults.ServeChildIfAsked (sluice-lab's main does), so the run cannot
// be made, and says why, at once.
func TestFaultsChildHookMissing(t *testing.T) {
	t.Parallel() // waits on real time: overlaps with the other waiting tests
	code, _, errOut := runFaults(t, context.Background(), "--ci", "--scenarios", "kill", "--duration", "300ms")
	if code != 1 || !strings.Contains(errOut, "ServeChildIfAsked") {
		t.Errorf("exit %d, stderr %q; want exit 1 naming faults.ServeChildIfAsked", code, errOut)
	}
}

// An interrupt before the first run: nothing to print, exit 0.
func TestFaultsInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	code, out, errOut := runFaults(t, ctx, "--ci", "--scenarios", "none")
	if code != 0 || out != "" || !strings.Contains(errOut, "interrupted") {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 0, nothing printed, a note", code, out, errOut)
	}
}
