package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSimDoormanTable(t *testing.T) {
	var out, errb bytes.Buffer
	// Seed 3's first mishap comes at 2m55s.
	args := []string{"--scenario", "tree-mishaps", "--duration", "4m", "--seed", "3"}
	if code := simDoormanCmd(args, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	s := out.String()
	for _, want := range []string{
		"Scenario tree-mishaps: the design's scenario seven",
		"Tree: fanout 3 x 3 under the root, 5 clients per leaf (45 in all) wanting 14 each; capacity 500, FAIR_SHARE",
		"Leases: 1m0s, refresh 5s at the root (halved per level), learning mode 1m0s",
		"Run: 4m0s simulated, a sample every 1s, seed 3;",
		"capacity used (from 1m0s, the end of the root's learning mode): ",
		"\nmishap at ", "\n  minute      wants        has", "\n       3 ",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	var again bytes.Buffer
	simDoormanCmd(args, &again, &errb)
	if again.String() != s {
		t.Error("two runs with the same seed printed different tables")
	}
}

// -o json (and --json, its deprecated spelling) prints the run by the
// output convention: snake_case keys, the algorithm by name, null where
// the table says n/a.
func TestSimDoormanJSONAndChart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "doorman.svg")
	var out, errb bytes.Buffer
	if code := simDoormanCmd([]string{"--scenario", "root", "--duration", "3m", "-o", "json", "--chart", path}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var res struct {
		Scenario struct {
			Name       string  `json:"name"`
			Algorithm  string  `json:"algorithm"`
			LearningMS float64 `json:"learning_ms"`
		} `json:"scenario"`
		Summary struct {
			Used               *float64 `json:"used"`
			MishapReconvergeMS *float64 `json:"mishap_reconverge_ms"`
		} `json:"summary"`
		Samples []map[string]any `json:"samples"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("-o json printed %q: %v", out.String(), err)
	}
	if len(res.Samples) != 181 || res.Scenario.Name != "root" || res.Summary.Used == nil || *res.Summary.Used < 0.9 {
		t.Errorf("-o json: %d samples, scenario %q, used %v; want 181, root and most of the capacity", len(res.Samples), res.Scenario.Name, res.Summary.Used)
	}
	if res.Scenario.Algorithm != "FAIR_SHARE" || res.Scenario.LearningMS != 60000 || res.Summary.MishapReconvergeMS != nil {
		t.Errorf("algorithm %q learning %vms mishap re-convergence %v; want FAIR_SHARE, 60000 and null (no mishap)",
			res.Scenario.Algorithm, res.Scenario.LearningMS, res.Summary.MishapReconvergeMS)
	}
	if b, err := os.ReadFile(path); err != nil || !bytes.Contains(b, []byte("<svg")) {
		t.Errorf("chart: %v, %d bytes", err, len(b))
	}
	var legacy bytes.Buffer
	if code := simDoormanCmd([]string{"--scenario", "root", "--duration", "3m", "--json"}, &legacy, &errb); code != 0 || legacy.String() != out.String() {
		t.Errorf("--json: exit %d, printed something else than -o json", code)
	}
	// A run that ends in learning mode has no capacity used: null.
	out.Reset()
	if code := simDoormanCmd([]string{"--scenario", "root", "--duration", "30s", "-o", "json"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.Summary.Used != nil {
		t.Errorf("a run in learning mode: %v, used %v; want null", err, res.Summary.Used)
	}
}

func TestSimDoormanUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--scenario", "forest"}, `unknown scenario "forest"; want one of root, tree, tree-mishaps, large`},
		{[]string{"--duration", "48h"}, "duration is 48h0m0s, must be 1s to 24h"},
		{[]string{"--duration", "-1s"}, "duration is -1s, must be 1s to 24h"},
		{[]string{"--chart", "x.gif"}, "must end in .png or .svg"},
		{[]string{"--chart", "/nonexistent/x.svg"}, "--chart: /nonexistent is not a directory"},
		{[]string{"--seed", "x"}, "invalid value"},
	} {
		var out, errb bytes.Buffer
		if code := simDoormanCmd(c.args, &out, &errb); code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errb.String(), c.want)
		}
		if out.Len() != 0 {
			t.Errorf("%v: printed %q on stdout", c.args, out.String())
		}
	}
}
