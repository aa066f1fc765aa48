package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-rpc/sluice/tools/cmd/internal/cli"
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

// -o json (and --json, its deprecated spelling) prints the run by the
// output convention: snake_case keys, durations in ms, null quantiles in a
// second where nothing finished, null limits with no guard.
func TestSimShedJSONAndChart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shed.svg")
	args := []string{"--model", "cpu", "--workers", "2", "--service", "1ms", "--duration", "3s", "--chart", path}
	var out, errb bytes.Buffer
	if code := simShedCmd(append(args, "-o", "json"), &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var res struct {
		Scenario struct {
			Model      string   `json:"model"`
			ServiceMS  float64  `json:"service_ms"`
			FixedLimit *float64 `json:"fixed_limit"`
		} `json:"scenario"`
		Seconds []struct {
			TMS   float64  `json:"t_ms"`
			Done  int      `json:"done"`
			P99MS *float64 `json:"p99_ms"`
			Limit *float64 `json:"limit"`
		} `json:"seconds"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("-o json printed %q: %v", out.String(), err)
	}
	if len(res.Seconds) != 3 || res.Scenario.Model != "cpu" || res.Scenario.ServiceMS != 1 || res.Scenario.FixedLimit != nil ||
		res.Seconds[2].TMS != 3000 || res.Seconds[2].P99MS == nil || res.Seconds[2].Limit == nil {
		t.Errorf("-o json: %+v; want 3 seconds of the cpu model, 1 ms, no fixed limit", res)
	}
	if b, err := os.ReadFile(path); err != nil || !bytes.Contains(b, []byte("<svg")) {
		t.Errorf("chart: %v, %d bytes", err, len(b))
	}
	var legacy bytes.Buffer
	if code := simShedCmd(append(args, "--json"), &legacy, &errb); code != 0 || legacy.String() != out.String() {
		t.Errorf("--json: exit %d, printed something else than -o json:\n%s", code, legacy.String())
	}
	// No guard: no limit; a second in which nothing finished: no quantile.
	out.Reset()
	if code := simShedCmd([]string{"--guard", "none", "--duration", "2s", "--service", "900ms", "--workers", "1", "--load", "0.1", "-o", "json"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	for _, s := range res.Seconds {
		if s.Limit != nil || (s.Done == 0) != (s.P99MS == nil) {
			t.Errorf("guard none: second %+v; want a null limit, and null quantiles exactly when nothing finished", s)
		}
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
		{[]string{"--chart", "/nonexistent/x.png"}, "--chart: /nonexistent is not a directory"},
		{[]string{"-o", "yaml"}, `-o/--output is "yaml", must be table or json`},
		{[]string{"--json", "-o", "table"}, "--json and -o table disagree"},
	} {
		var out, errb bytes.Buffer
		if code := simShedCmd(c.args, &out, &errb); code != cli.ExitUsage || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errb.String(), c.want)
		}
	}
}
