package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestBenchAmplificationUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--amplification", "up"}, `--amplification: unknown scenario "up"`},
		{[]string{"--amplification", "down", "-p", "127.0.0.1:1"}, "--amplification sets its own servers, load and client; drop --peer"},
		{[]string{"--amplification", "down", "--retry-max", "3"}, "--amplification sets every layer's retry policy itself; drop --retry-max"},
		{[]string{"--amplification", "down", "--rps", "100000"}, "rate 100000, must be in (0, 5000]"},
		{[]string{"--amplification", "down", "--seed", "0"}, "--seed is 0, must be >= 1"},
		{[]string{"--amplification", "down", "extra"}, `unexpected argument "extra"`},
	} {
		code, out, errOut := runBench(t, context.Background(), tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) || out != "" {
			t.Errorf("bench %q: exit %d, stderr %q, stdout %q; want exit 2 and stderr containing %q", tc.args, code, errOut, out, tc.want)
		}
	}
}

// A tiny run prints {config, rows}, each row with its scenario, mode,
// leaf requests per call, success and recover_ms (null outside recovery).
func TestBenchAmplificationJSON(t *testing.T) {
	code, out, errOut := runBench(t, context.Background(), "--amplification", "down,recovery", "--ci", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res struct {
		Config map[string]any   `json:"config"`
		Rows   []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if res.Config == nil || len(res.Rows) != 4 {
		t.Fatalf("config %v, %d rows; want a config and 4 rows", res.Config, len(res.Rows))
	}
	for i, r := range res.Rows {
		for _, k := range []string{"scenario", "mode", "leaf_per_call", "success", "recover_ms"} {
			if _, ok := r[k]; !ok {
				t.Errorf("row %d lacks %q: %v", i, k, r)
			}
		}
		if (r["scenario"] == "down") != (r["recover_ms"] == nil) {
			t.Errorf("row %d: recover_ms %v in scenario %v", i, r["recover_ms"], r["scenario"])
		}
	}
}
