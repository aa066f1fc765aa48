package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-rpc/sluice/tools/internal/sim/shedsim"
)

func TestSimShedTable(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"--duration", "12s", "--step", "6s:4ms"}
	if code := simShedCmd(args, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	s := out.String()
	for _, want := range []string{
		"a pool of 8 workers with a queue, service time 2ms (capacity 4000/s)",
		"Step: at 6s the service time becomes 4ms",
		"limit (min-max)", "\n   12s      4ms ",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	var again bytes.Buffer
	simShedCmd(args, &again, &errb)
	if again.String() != s {
		t.Error("two runs with the same seed printed different tables")
	}
}

func TestSimShedJSONAndChart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shed.svg")
	var out, errb bytes.Buffer
	if code := simShedCmd([]string{"--model", "cpu", "--workers", "2", "--service", "1ms", "--duration", "3s", "--json", "--chart", path}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var res shedsim.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("--json printed %q: %v", out.String(), err)
	}
	if len(res.Seconds) != 3 || res.Scenario.Model != shedsim.CPU {
		t.Errorf("--json: %d seconds, model %q; want 3 and cpu", len(res.Seconds), res.Scenario.Model)
	}
	if b, err := os.ReadFile(path); err != nil || !bytes.Contains(b, []byte("<svg")) {
		t.Errorf("chart: %v, %d bytes", err, len(b))
	}
}

func TestSimShedUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--guard", "fixed:0"}, "the fixed limit must be a whole number >= 1"},
		{[]string{"--guard", "some"}, `--guard is "some"`},
		{[]string{"--step", "3s"}, "want AT:SERVICE"},
		{[]string{"--step", "90s:2ms", "--duration", "60s"}, "step 1: at 1m30s"},
		{[]string{"--workers", "0"}, "workers is 0"},
		{[]string{"--load", "NaN"}, "load is NaN"},
		{[]string{"--chart", "x.gif"}, "must end in .png or .svg"},
	} {
		var out, errb bytes.Buffer
		if code := simShedCmd(c.args, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errb.String(), c.want)
		}
	}
}
