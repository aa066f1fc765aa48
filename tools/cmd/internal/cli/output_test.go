package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluice-rpc/sluice/tools/cmd/internal/clitest"
)

// snakeKey is a key of the output convention; dataKey a key that is data
// (an error code such as BUSY or RATE_LIMITED, counted by code).
// Every command with a report prints it with -o json by one convention:
// one JSON object on one line, snake_case keys (no Go field names), each
// run short.
func TestEveryReportIsSnakeCaseJSON(t *testing.T) {
	t.Parallel() // waits on real time: overlaps with the other waiting tests
	peer := startServe(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"bench", []string{"bench", "--embedded", "1", "-n", "50"}},
		{"bench --rps", []string{"bench", "-p", peer, "-s", "echo", "-m", "echo", "--rps", "200", "-n", "20", "--warmup", "0"}},
		{"bench refused", []string{"bench", "-p", "127.0.0.1:1", "-s", "echo", "-m", "echo", "-n", "5", "--warmup", "0"}},
		{"bench --per-peer-stats", []string{"bench", "-p", peer, "-s", "echo", "-m", "fail", "-n", "20", "--per-peer-stats"}},
		{"bench --closed-loop", []string{"bench", "--closed-loop", "--embedded-workers", "2", "--embedded-latency", "fixed:5ms", "-d", "1s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			code := run(append(tc.args, "-o", "json"), &out, &errOut)
			if code != ExitOK && !((tc.name == "bench refused" || tc.name == "bench --per-peer-stats") && code == ExitFail) {
				t.Fatalf("sluice %s -o json: exit %d: %s", strings.Join(tc.args, " "), code, errOut.String())
			}
			s := out.String()
			if strings.Count(s, "\n") != 1 || !strings.HasSuffix(s, "}\n") {
				t.Errorf("want one JSON object on one line, got %d lines:\n%.300s", strings.Count(s, "\n"), s)
			}
			var v any
			if err := json.Unmarshal(out.Bytes(), &v); err != nil {
				t.Fatalf("%v:\n%.500s", err, s)
			}
			if _, ok := v.(map[string]any); !ok {
				t.Errorf("the report is a %T, want an object", v)
			}
			if bad := clitest.BadKeys(v); len(bad) > 0 {
				t.Errorf("keys not in snake_case: %.10q", bad)
			}
		})
	}
}
