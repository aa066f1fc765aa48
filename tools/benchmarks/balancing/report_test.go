package balancing

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkOutputs checks what a command prints of res: the Markdown tables
// with both rows and the verdicts of each scenario, JSON that reads back,
// and a chart per scenario.
func checkOutputs(t *testing.T, res *Result) {
	t.Helper()
	var buf bytes.Buffer
	if err := res.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	t.Log("\n" + out)
	for _, want := range []string{
		"### scale-out", "| on |", "| off |",
		"### heterogeneous", "| 1, 2, 4 |", "| 1, 1, 1 |",
		"### shard", "| every call |", "| every call, balance factor 10 |", "| none (least pending) |", "keys move when",
		"### erroring", "| 1 of 4 | on |", "| 3 of 4 | off |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q", want)
		}
	}
	if n := strings.Count(out, "holds: ") + strings.Count(out, "FALLS SHORT: "); n != len(res.Verdicts) {
		t.Errorf("%d verdict lines, want %d", n, len(res.Verdicts))
	}
	js, err := json.Marshal(res)
	if err != nil {
		t.Fatalf("the result does not encode as JSON: %v", err)
	}
	var back map[string]any
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"config", "scale_out", "heterogeneous", "shard", "erroring", "verdicts"} {
		if back[k] == nil {
			t.Errorf("the JSON lacks %q", k)
		}
	}
	// Durations in milliseconds, as the other benchmarks' reports.
	if c, ok := back["config"].(map[string]any); !ok || c["timeout_ms"] != 1000.0 || c["size"] != "ci" ||
		c["shard"].(map[string]any)["hit_ms"] != 1.0 {
		t.Errorf("the JSON's config %v: want timeout_ms 1000, size ci, shard.hit_ms 1", back["config"])
	}
	// The keys in the structs' field order, as every report has them, not
	// sorted.
	at := -1
	for _, k := range []string{`"config":{"scenarios":`, `"size":`, `"seed":`, `"timeout_ms":`, `"gc_percent":`, `"scale_out":{"servers":`, `"added":`,
		`"service_ms":`, `"heterogeneous":{"workers":`, `"shard":{"servers":`, `"erroring":{"servers":`, `"verdicts":`} {
		i := bytes.Index(js, []byte(k))
		if i <= at {
			t.Errorf("the JSON has %s at %d, want it after %d: %s", k, i, at, js)
			break
		}
		at = i
	}
	// SVGs: package chart's tests write the PNG, slow to draw under -race.
	path := filepath.Join(t.TempDir(), "b.svg")
	if err := drawCharts(res, path); err != nil {
		t.Fatal(err)
	}
	paths := res.ChartPaths(path)
	if len(paths) != 4 || paths[Shard] != filepath.Join(filepath.Dir(path), "b-shard.svg") {
		t.Errorf("chart paths %v, want one per scenario, such as b-shard.svg", paths)
	}
	for s, p := range paths {
		if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
			t.Errorf("the %s chart: %v", s, err)
		}
	}
	one := &Result{Shard: res.Shard, Config: res.Config}
	if p := one.ChartPaths(path); p[Shard] != path {
		t.Errorf("one scenario's chart path %v, want %s", p, path)
	}
}
