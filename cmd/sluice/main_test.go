package main

import (
	"bytes"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestMain (goleak) lives in doorman_test.go.

func TestSimBusyPresetsMatchTheDesign(t *testing.T) {
	for _, preset := range []string{"steady", "flappy"} {
		want, err := os.ReadFile("../../internal/busysim/testdata/" + preset + ".golden")
		if err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		if code := run([]string{"sim", "busy", "--preset", preset}, &out, &errOut); code != 0 {
			t.Fatalf("exit %d: %s", code, errOut.String())
		}
		if out.String() != string(want) {
			t.Fatalf("--preset %s output differs from the design's table:\n%s", preset, out.String())
		}
	}
}

func TestSimBusyFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"sim", "busy", "--rps", "1000", "--rps-pattern", "linear_grow", "--busy", "200", "--busy-pattern", "flappy"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "start rps=1000 (linear_grow) throttled=0 busy=200 (flappy) limit=9999999") {
		t.Fatalf("output:\n%s", out.String())
	}
	for _, args := range [][]string{
		{"sim", "busy", "--preset", "steady", "--rps", "5"},
		{"sim", "busy", "--preset", "wobbly"},
		{"sim", "busy", "--rps-pattern", "zigzag"},
		{"sim", "busy", "--rps", "-1"},
		{"sim", "nope"},
		{"nope"},
	} {
		errOut.Reset()
		if code := run(args, &out, &errOut); code == 0 || errOut.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q; want an error", args, code, errOut.String())
		}
	}
}

// A short demo: the overloaded peer answers Busy, its limit collapses and
// its traffic goes to the others.
func TestDemoShort(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"demo", "--seconds", "3", "--rps", "300", "--recover-at", "0"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	s := out.String()
	if !strings.Contains(s, "summary:") {
		t.Fatalf("no summary:\n%s", s)
	}
	line := regexp.MustCompile(`(?m)^\s+(\d+)\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+READY(\s+<- overloaded)?$`)
	rows := line.FindAllStringSubmatch(s, -1)
	if len(rows) != 9 {
		t.Fatalf("want 3 seconds x 3 peers lines, got %d:\n%s", len(rows), s)
	}
	busyTotal, lastLimit := 0, -1
	for _, r := range rows {
		if r[7] != "" {
			b, _ := strconv.Atoi(r[4])
			busyTotal += b
			lastLimit, _ = strconv.Atoi(r[6])
		}
	}
	if busyTotal == 0 || lastLimit >= 38 {
		t.Fatalf("overloaded peer: busy %d, final limit %d; want busy answers and a collapsed limit:\n%s", busyTotal, lastLimit, s)
	}
	for _, bad := range [][]string{{"demo", "--seconds", "31"}, {"demo", "--rps", "0"}, {"demo", "--capacity", "-1"},
		{"demo", "--capacity", "+Inf"}, {"demo", "--capacity", "NaN"}} {
		if code := run(bad, &out, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2", bad, code)
		}
	}
}

// Every command takes flags only: a stray word is an error, not the silent
// end of flag parsing (which would drop the flags after it).
func TestCommandsRejectStrayArguments(t *testing.T) {
	for _, args := range [][]string{
		{"call", "--peer", "127.0.0.1:1", "--service", "kv", "--method", "echo", "--raw", "x", "extra", "--retry-max", "1"},
		{"demo", "extra", "--seconds", "1"},
		{"bench", "--embedded", "1", "extra"},
		{"sim", "busy", "extra"},
		{"sim", "ratelimit", "extra"},
		{"doorman", "serve", "--config", "x.yaml", "--listen", "127.0.0.1:0", "extra"},
		{"doorman", "get", "--server", "127.0.0.1:1", "--resource", "r", "--wants", "1", "extra"},
	} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `unexpected argument "extra"`) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and the stray argument named", args, code, errOut.String())
		}
	}
}
