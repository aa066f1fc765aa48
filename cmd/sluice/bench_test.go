package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-rpc/sluice/benchmarks/load"
)

// benchJSON is the part of `sluice bench --json` the tests read.
type benchJSON struct {
	Calls           int                `json:"calls"`
	OK              int                `json:"ok"`
	ElapsedS        float64            `json:"elapsed_s"`
	OfferedRPS      float64            `json:"offered_rps"`
	Throughput      float64            `json:"throughput_rps"`
	Latency         map[string]float64 `json:"latency_ms"`
	Attempts        int                `json:"attempts"`
	AttemptsPerCall float64            `json:"attempts_per_call"`
	ExtraPercent    float64            `json:"extra_requests_percent"`
	Sent            uint64             `json:"sent"`
	Busy            uint64             `json:"busy"`
	Throttled       uint64             `json:"throttled"`
	Errors          map[string]int     `json:"errors"`
	Late            int                `json:"late"`
	Peers           []string           `json:"peers"`
	EmbeddedLatency string             `json:"embedded_latency"`
}

func runBench(t *testing.T, ctx context.Context, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb strings.Builder
	code = benchRun(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

// One second at 200/s against three 1 ms servers, hedging after 50 ms:
// every field of the JSON report is there and adds up.
func TestBenchEmbeddedJSON(t *testing.T) {
	code, out, errOut := runBench(t, context.Background(), "--embedded", "3", "--embedded-latency", "fixed:1ms",
		"--rps", "200", "--duration", "1s", "--hedge-max", "2", "--hedge-delay", "50ms", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Errorf("--json printed more than one line:\n%s", out)
	}
	var r benchJSON
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if r.Calls != 200 || r.OK != 200 || len(r.Errors) != 0 {
		t.Errorf("calls %d ok %d errors %v, want 200 calls all ok", r.Calls, r.OK, r.Errors)
	}
	if r.ElapsedS < 0.99 || r.ElapsedS > 10 || r.OfferedRPS != 200 {
		t.Errorf("elapsed %vs offered %v/s, want about 1s at 200/s", r.ElapsedS, r.OfferedRPS)
	}
	if want := float64(r.OK) / r.ElapsedS; r.Throughput < want*0.99 || r.Throughput > want*1.01 || r.Throughput > 202 {
		t.Errorf("throughput %v/s, want ok/elapsed = %v/s (at most the offered 200/s)", r.Throughput, want)
	}
	prev := 0.0
	for _, q := range []string{"p50", "p90", "p95", "p99", "p999", "max"} {
		v, ok := r.Latency[q]
		if !ok || v < prev {
			t.Errorf("latency %s = %v (present %v), want >= the previous quantile %v", q, v, ok, prev)
		}
		prev = v
	}
	if p50 := r.Latency["p50"]; p50 < 1 {
		t.Errorf("p50 %vms, want at least the servers' 1ms", p50)
	}
	// Latencies beyond 50ms (a loaded machine) bring hedges: 1 or 2
	// attempts a call, all of them sent to the peers.
	if r.Attempts < r.Calls || r.AttemptsPerCall < 1 || r.AttemptsPerCall > 2 || r.Sent != uint64(r.Attempts) {
		t.Errorf("attempts %d (%v per call), sent %d: want 1 or 2 a call, all sent", r.Attempts, r.AttemptsPerCall, r.Sent)
	}
	if r.Late < 0 || r.Late > r.Calls {
		t.Errorf("late %d of %d calls", r.Late, r.Calls)
	}
	if d := r.ExtraPercent - (r.AttemptsPerCall-1)*100; d > 1e-9 || d < -1e-9 {
		t.Errorf("extra %v%% != (attempts per call - 1) x 100", r.ExtraPercent)
	}
	if r.Busy != 0 || r.Throttled != 0 {
		t.Errorf("busy %d throttled %d, want none", r.Busy, r.Throttled)
	}
	if len(r.Peers) != 3 || !strings.HasPrefix(r.Peers[0], "127.0.0.1:") || r.EmbeddedLatency != "1ms" {
		t.Errorf("peers %v latency %q, want 3 on 127.0.0.1 with 1ms", r.Peers, r.EmbeddedLatency)
	}
}

// Heavy-tailed servers with adaptive hedging: the text report has every
// line and hedges went out within the budget. (Whether they cut the tail is
// benchmarks/tail's business: latency bounds would be flaky on a loaded CI
// machine.)
func TestBenchHeavyTailAdaptiveText(t *testing.T) {
	code, out, errOut := runBench(t, context.Background(), "--embedded", "4", "--rps", "300", "--duration", "1s",
		"--hedge-max", "3", "--hedge-adaptive", "0.95", "--hedge-window", "100", "--hedge-budget", "0.2", "--warmup", "20")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"servers     4 embedded on 127.0.0.1, latency 500µs-1.5ms,0.03@100ms-200ms",
		"calls       300 in", "300 ok", "latency     p50 ", "p99.9 ", "attempts    ", "busy        0 busy answers, 0 requests throttled",
		"errors      none"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	var attempts int
	var perCall, extra float64
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "attempts") {
			if _, err := fmtSscanf(line, "attempts    %d (%f per call, %f%% extra", &attempts, &perCall, &extra); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
		}
	}
	// The budget: 0.2 hedges a call (warm-up included) on top of the 10 it
	// starts with: at most 10 + 0.2 x 320 = 74 hedges, 24.7%.
	if attempts <= 300 || extra <= 0 || extra > 24.7 || perCall > 3 {
		t.Errorf("%d attempts for 300 calls (%v a call), %v%% extra: want some hedges, within the budget", attempts, perCall, extra)
	}
}

// --peer mode against servers started outside the command.
func TestBenchPeers(t *testing.T) {
	s, err := load.StartServers(2, load.ServerConfig{Service: "kv", Method: "get", Format: "json"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	args := []string{"--service", "kv", "--method", "get", "--format", "json", "--body", `{"k":"v"}`,
		"--rps", "500", "--calls", "50", "--json"}
	for _, hp := range s.HostPorts() {
		args = append(args, "--peer", hp)
	}
	code, out, errOut := runBench(t, context.Background(), args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r benchJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Calls != 50 || r.OK != 50 || r.EmbeddedLatency != "" || len(r.Peers) != 2 {
		t.Errorf("calls %d ok %d peers %v embedded %q: want 50 ok calls to the 2 peers", r.Calls, r.OK, r.Peers, r.EmbeddedLatency)
	}
	if got := s.Received(); got != 60 {
		t.Errorf("servers received %d requests, want 60 (50 and 10 warm-up)", got)
	}
}

// An interrupted run reports what it made and exits 0.
func TestBenchInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	code, out, errOut := runBench(t, ctx, "--embedded", "1", "--embedded-latency", "0", "--rps", "10", "--duration", "1m", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r benchJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Calls > 1 {
		t.Errorf("an interrupted run made %d calls", r.Calls)
	}
}

func TestBenchFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "give --peer (repeatable) or --embedded N"},
		{[]string{"--embedded", "2", "--peer", "127.0.0.1:1"}, "not both"},
		{[]string{"--embedded", "99"}, "--embedded is 99, must be in [1, 16]"},
		{[]string{"--embedded", "-1"}, "--embedded is -1"},
		{[]string{"--peer", "127.0.0.1:1"}, "--service and --method are required"},
		{[]string{"--peer", "127.0.0.1:1", "--embedded-latency", "1ms", "--service", "s", "--method", "m"}, "--embedded-latency needs --embedded"},
		{[]string{"--peer", "10.1.2.3:4040", "--service", "s", "--method", "m"}, `--peer "10.1.2.3:4040" is not a loopback address`},
		{[]string{"--peer", "nonsense", "--service", "s", "--method", "m"}, `--peer "nonsense": want host:port`},
		{[]string{"--embedded", "1", "--embedded-latency", "slowish"}, `--embedded-latency: load: shape "slowish"`},
		{[]string{"--embedded", "1", "--format", "thrift"}, `--format is "thrift"`},
		{[]string{"--embedded", "1", "--format", "json", "--body", "{"}, "--body is not valid JSON"},
		{[]string{"--embedded", "1", "--rps", "0"}, "--rps is 0, must be in (0, 100000]"},
		{[]string{"--embedded", "1", "--duration", "0s"}, "--duration is 0s"},
		{[]string{"--embedded", "1", "--duration", "1h"}, "--duration is 1h0m0s, must be in (0, 10m0s]"},
		{[]string{"--embedded", "1", "--calls", "-5"}, "--calls is -5"},
		{[]string{"--embedded", "1", "--concurrency", "0"}, "--concurrency is 0"},
		{[]string{"--embedded", "1", "--timeout", "0s"}, "--timeout is 0s"},
		{[]string{"--embedded", "1", "--warmup", "-1"}, "--warmup is -1"},
		{[]string{"--embedded", "1", "--retry-max", "3", "--hedge-max", "2"}, "--retry-max and --hedge-max are exclusive"},
		{[]string{"--embedded", "1", "--config", "x.json", "--hedge-max", "2"}, "--config cannot be combined"},
		{[]string{"--embedded", "1", "--config", "/nonexistent/x.json"}, "--config /nonexistent/x.json: open"},
		{[]string{"--embedded", "1", "--retry-max", "1"}, "--retry-max is 1, must be >= 2"},
		{[]string{"--embedded", "1", "--hedge-max", "1"}, "--hedge-max is 1, must be >= 2"},
		{[]string{"--embedded", "1", "--hedge-max", "2", "--hedge-delay", "-1s"}, "--hedge-delay is -1s"},
		{[]string{"--embedded", "1", "--hedge-max", "2", "--hedge-codes", "SLOW"}, "--hedge-codes"},
		{[]string{"--embedded", "1", "--hedge-adaptive", "0.9"}, "--hedge-adaptive needs --hedge-max"},
		{[]string{"--embedded", "1", "--hedge-max", "2", "--hedge-adaptive", "1.5"}, "--hedge-adaptive is 1.5, must be in (0, 1)"},
		{[]string{"--embedded", "1", "--hedge-max", "2", "--hedge-adaptive", "0.9", "--hedge-window", "3"}, "--hedge-window is 3, must be in [10, 1000000]"},
		{[]string{"--embedded", "1", "--hedge-max", "2", "--hedge-adaptive", "0.9", "--hedge-cap", "0s"}, "--hedge-cap is 0s"},
		{[]string{"--embedded", "1", "--hedge-max", "2", "--hedge-adaptive", "0.9", "--hedge-budget", "2"}, "--hedge-budget is 2, must be in [0, 1]"},
		{[]string{"--embedded", "1", "extra"}, `unexpected argument "extra"`},
		{[]string{"--no-such-flag"}, "flag provided but not defined: -no-such-flag"},
	} {
		code, out, errOut := runBench(t, context.Background(), tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) || out != "" {
			t.Errorf("bench %q: exit %d, stderr %q, stdout %q; want exit 2 and stderr containing %q",
				tc.args, code, errOut, out, tc.want)
		}
	}
}

func fmtSscanf(s, format string, a ...any) (int, error) { return fmt.Sscanf(s, format, a...) }
