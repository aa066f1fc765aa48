package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
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

func TestSimRatelimitChart(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"sleep.png", "sleep.svg"} {
		path := filepath.Join(dir, name)
		var out, errb bytes.Buffer
		if code := simRatelimitCmd([]string{"--chart", path}, &out, &errb); code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, errb.String())
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		magic := "\x89PNG"
		if strings.HasSuffix(name, ".svg") {
			magic = "<?xml"
		}
		if !bytes.HasPrefix(b, []byte(magic)) || len(b) < 10000 {
			t.Fatalf("%s: %d bytes starting %q", name, len(b), b[:min(len(b), 8)])
		}
		if strings.HasSuffix(name, ".svg") && !bytes.Contains(b, []byte("reserve (Sluice)")) {
			t.Errorf("%s has no panel for the reserve pacer", name)
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
	var out, errb bytes.Buffer
	if code := simRatelimitCmd([]string{"--chart", filepath.Join(t.TempDir(), "no", "such", "dir.png")}, &out, &errb); code != 1 {
		t.Errorf("unwritable chart: exit %d", code)
	}
}
