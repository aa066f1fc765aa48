package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-rpc/sluice/pacing"
	"github.com/sluice-rpc/sluice/tools/internal/sim/ratesim"
)

func TestSimRatelimitTable(t *testing.T) {
	var out, errb bytes.Buffer
	if code := simRatelimitCmd([]string{"--seed", "1"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	s := out.String()
	for _, want := range []string{
		"| null |", "| exponential backoff x2 |", "| exponential backoff x1.2 |",
		"| exp. increase, gradual decrease |", "| exp. increase, proportional decrease |",
		"| exp. increase, prop. remaining decrease |", "| reserve (Sluice) |",
		"(3.07 %)", "(17.32 s)", "(78.44)", "(84.23 s)", // the seed's figures beside ours
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	var again bytes.Buffer
	simRatelimitCmd([]string{"--seed", "1"}, &again, &errb)
	if again.String() != s {
		t.Error("two runs with the same seed printed different tables")
	}
	var other bytes.Buffer
	simRatelimitCmd([]string{"--seed", "2"}, &other, &errb)
	if other.String() == s {
		t.Error("a different seed printed the same table")
	}
}

// --chart draws a panel per pacer. The chart is an SVG, whose text the
// test can read; package chart's tests write both formats (a PNG of this
// chart is slow to draw under -race).
func TestSimRatelimitChart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sleep.svg")
	var out, errb bytes.Buffer
	if code := simRatelimitCmd([]string{"--chart", path}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "\nchart: "+path+"\n") {
		t.Errorf("output does not name the chart:\n%s", out.String())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("<?xml")) || len(b) < 10000 {
		t.Fatalf("%d bytes starting %q", len(b), b[:min(len(b), 8)])
	}
	for _, e := range ratesim.Entries() {
		if has := bytes.Contains(b, []byte(e.Name+":")); has != (e.Config.Strategy != pacing.StrategyNull) {
			t.Errorf("panel for %q: %v; want one for every pacer but null", e.Name, has)
		}
	}
}

func TestSimRatelimitBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--runs", "0"}, {"--runs", "101"}, {"--runs", "1000000000"}, {"--chart", "x.gif"}, {"extra"}, {"--seed", "x"}} {
		var out, errb bytes.Buffer
		if code := simRatelimitCmd(args, &out, &errb); code != 2 || errb.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errb.String())
		}
	}
	// A chart that cannot be written is refused before the run, in the
	// words of sim shed and sim doorman.
	var out, errb bytes.Buffer
	if code := simRatelimitCmd([]string{"--chart", "x.gif"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `--chart: chart "x.gif": the file name must end in .png or .svg`) {
		t.Errorf("--chart x.gif: exit %d, stderr %q; want 2 and the file name's rule", code, errb.String())
	}
	out.Reset()
	errb.Reset()
	dir := filepath.Join(t.TempDir(), "no", "such")
	if code := simRatelimitCmd([]string{"--chart", filepath.Join(dir, "dir.png")}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--chart: "+dir+" is not a directory") || out.Len() != 0 {
		t.Errorf("chart in a missing directory: exit %d, stdout %q, stderr %q; want 2, nothing run, the directory named", code, out.String(), errb.String())
	}
}
