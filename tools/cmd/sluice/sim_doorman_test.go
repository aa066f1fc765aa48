package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-rpc/sluice/tools/internal/sim/doormansim"
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

func TestSimDoormanJSONAndChart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "doorman.svg")
	var out, errb bytes.Buffer
	if code := simDoormanCmd([]string{"--scenario", "root", "--duration", "3m", "--json", "--chart", path}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var res doormansim.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("--json printed %q: %v", out.String(), err)
	}
	if len(res.Samples) != 181 || res.Scenario.Name != "root" || res.Summary.Used < 0.9 {
		t.Errorf("--json: %d samples, scenario %q, used %v; want 181, root and most of the capacity", len(res.Samples), res.Scenario.Name, res.Summary.Used)
	}
	if b, err := os.ReadFile(path); err != nil || !bytes.Contains(b, []byte("<svg")) {
		t.Errorf("chart: %v, %d bytes", err, len(b))
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
