package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/testnet"
	"github.com/sluice-rpc/sluice/tools/benchmarks/load"
)

// benchJSON is `sluice bench -o json`'s report.
type benchJSON struct {
	Mode            string             `json:"mode"`
	Connections     int                `json:"connections"`
	Concurrency     int                `json:"concurrency"`
	MaxInFlight     int                `json:"max_in_flight"`
	WarmupCalls     int                `json:"warmup_calls"`
	Calls           int                `json:"calls"`
	OK              int                `json:"ok"`
	Failed          int                `json:"failed"`
	Refused         int                `json:"refused"`
	ElapsedS        float64            `json:"elapsed_s"`
	OfferedRPS      *float64           `json:"offered_rps"`
	Throughput      float64            `json:"throughput_rps"`
	Latency         map[string]float64 `json:"latency_ms"`
	FailedLatency   map[string]float64 `json:"failed_latency_ms"`
	RefusedLatency  map[string]float64 `json:"refused_latency_ms"`
	Attempts        int                `json:"attempts"`
	AttemptsPerCall float64            `json:"attempts_per_call"`
	ExtraPercent    float64            `json:"extra_requests_percent"`
	Sent            uint64             `json:"sent"`
	Busy            uint64             `json:"busy"`
	Throttled       uint64             `json:"throttled"`
	Errors          map[string]int     `json:"errors"`
	Late            int                `json:"late"`
	Peers           []string           `json:"peers"`
	PeerList        *string            `json:"peer_list"`
	Embedded        *int               `json:"embedded"`
	EmbeddedLatency string             `json:"embedded_latency"`
	FirstResponse   map[string]any     `json:"first_response"`
}

func runBench(t *testing.T, ctx context.Context, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb strings.Builder
	code = benchRun(ctx, args, nil, &out, &errb)
	return code, out.String(), errb.String()
}

// One second at 200/s against three 1 ms servers, hedging after 50 ms:
// every field of the JSON report is there and adds up.
func TestBenchEmbeddedJSON(t *testing.T) {
	t.Parallel() // waits on real time: overlaps with the other waiting tests
	code, out, errOut := runBench(t, context.Background(), "--embedded", "3", "--embedded-latency", "fixed:1ms",
		"--rps", "200", "-d", "1s", "--hedge-max", "2", "--hedge-delay", "50ms", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Errorf("-o json printed more than one line:\n%s", out)
	}
	var r benchJSON
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if r.Calls != 200 || r.OK != 200 || r.Failed != 0 || r.Refused != 0 || len(r.Errors) != 0 {
		t.Errorf("calls %d ok %d failed %d refused %d errors %v, want 200 calls all ok", r.Calls, r.OK, r.Failed, r.Refused, r.Errors)
	}
	if r.Connections < 1 || r.WarmupCalls != 10*r.Connections {
		t.Errorf("%d warmup calls on %d connections, want the default 10 on each", r.WarmupCalls, r.Connections)
	}
	// No value is null, not zeros: no call failed or was refused.
	if r.FailedLatency != nil || r.RefusedLatency != nil || r.PeerList != nil {
		t.Errorf("failed latency %v, refused latency %v, peer list %v: want null, no call failed and no -P", r.FailedLatency, r.RefusedLatency, r.PeerList)
	}
	if r.ElapsedS < 0.99 || r.ElapsedS > 10 || r.OfferedRPS == nil || *r.OfferedRPS != 200 {
		t.Errorf("elapsed %vs offered %v/s, want about 1s at 200/s", r.ElapsedS, r.OfferedRPS)
	}
	if r.Mode != "rate" || r.Connections != 1 || r.Concurrency != 100 || r.MaxInFlight != 100 || r.Latency["count"] != 200 {
		t.Errorf("mode %q connections %d concurrency %d in flight %d count %v; want rate, 1 connection, 100 in all, 200 calls",
			r.Mode, r.Connections, r.Concurrency, r.MaxInFlight, r.Latency["count"])
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
	if len(r.Peers) != 3 || !strings.HasPrefix(r.Peers[0], "127.0.0.1:") || r.EmbeddedLatency != "1ms" || r.Embedded == nil || *r.Embedded != 3 {
		t.Errorf("peers %v latency %q, want 3 on 127.0.0.1 with 1ms", r.Peers, r.EmbeddedLatency)
	}
	if f := r.FirstResponse; f["ok"] != true || f["trace"] != "0" {
		t.Errorf("first_response %v, want yab's envelope of an ok answer", f)
	}
}

// Heavy-tailed servers with adaptive hedging: the text report has every
// line and hedges went out within the budget. (Whether they cut the tail is
// benchmarks/tail's business: latency bounds would be flaky on a loaded CI
// machine.)
func TestBenchHeavyTailAdaptiveText(t *testing.T) {
	code, out, errOut := runBench(t, context.Background(), "--embedded", "4", "-e", "raw", "--rps", "300", "-d", "1s",
		"--hedge-max", "3", "--hedge-adaptive", "0.95", "--hedge-window", "100", "--hedge-budget", "0.2", "--warmup", "20")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"servers     4 embedded on 127.0.0.1, latency 500µs-1.5ms,0.03@100ms-200ms",
		"load        offered 300.0 calls/s on 1 connection, at most 100 calls in flight in all",
		"calls       300 in", "300 ok, 0 failed, 0 refused locally", "latency     ok       p50 ", "p99.9 ", "attempts    ", "busy        0 busy answers, 0 requests throttled",
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
	hps := s.HostPorts()
	args := []string{"-s", "kv", "--method", "get", "-e", "json", "-r", `{"k":"v"}`, "--connections", "2",
		"--rps", "500", "-n", "50", "-o", "json", "-p", hps[0], "-P", writePeerList(t, "peers.yaml", "- "+hps[1]+"\n")}
	code, out, errOut := runBench(t, context.Background(), args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r benchJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Calls != 50 || r.OK != 50 || r.EmbeddedLatency != "" || r.Embedded != nil || len(r.Peers) != 2 {
		t.Errorf("calls %d ok %d peers %v embedded %v %q: want 50 ok calls to the 2 peers", r.Calls, r.OK, r.Peers, r.Embedded, r.EmbeddedLatency)
	}
	if got := s.Received(); got != 71 {
		t.Errorf("servers received %d requests, want 71 (50, 10 warm-up on each of 2 connections, and the first call)", got)
	}
}

// An interrupted run reports what it made and exits 0.
func TestBenchInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	code, out, errOut := runBench(t, ctx, "--embedded", "1", "--embedded-latency", "0", "--rps", "10", "-d", "1m", "-o", "json")
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
		{nil, "give peers (-p HOST:PORT, repeatable, or -P TARGET) or --embedded N"},
		{[]string{"--embedded", "2", "--peer", "127.0.0.1:1"}, "not both"},
		{[]string{"--embedded", "99"}, "--embedded is 99, must be in [1, 16]"},
		{[]string{"--embedded", "-1"}, "--embedded is -1"},
		{[]string{"-p", "127.0.0.1:1"}, "give the service: -s/--service SERVICE, or SERVICE METHOD after the flags"},
		{[]string{"-p", "127.0.0.1:1", "--embedded-latency", "1ms", "-s", "s", "-m", "m"}, "--embedded-latency, --embedded-workers and --embedded-shed need --embedded"},
		{[]string{"-p", "127.0.0.1:1", "--embedded-shed", "adaptive", "-s", "s", "-m", "m"}, "need --embedded"},
		{[]string{"--embedded", "1", "--embedded-shed", "fixed:0"}, `--embedded-shed: "fixed:0": the fixed limit must be a whole number >= 1`},
		{[]string{"--embedded", "1", "--embedded-shed", "lots"}, `want none, adaptive or fixed:N`},
		{[]string{"--embedded", "1", "--embedded-workers", "-1"}, "--embedded-workers is -1"},
		{[]string{"--embedded", "1", "--load", "3"}, "--load, --chart and --gogc need --closed-loop"},
		{[]string{"--embedded", "1", "--gogc", "200"}, "--gogc need --closed-loop"},
		{[]string{"--closed-loop", "--gogc", "0"}, "--gogc is 0, must be a positive percent or -1"},
		{[]string{"--closed-loop", "-p", "127.0.0.1:1"}, "drop --peer"},
		{[]string{"--closed-loop", "--rps", "10"}, "drop --rps"},
		{[]string{"--closed-loop", "-t", "x.thrift"}, "drop --thrift"},
		{[]string{"--closed-loop", "--sk", "k"}, "drop --sk"},
		{[]string{"--closed-loop", "--health"}, "drop --health"},
		{[]string{"--closed-loop", "--seed", "2"}, "drop --seed"},
		{[]string{"--closed-loop", "--embedded", "2"}, "--closed-loop runs one embedded server"},
		{[]string{"--closed-loop", "--embedded-latency", "heavy-tail"}, "needs a fixed service time"},
		{[]string{"--closed-loop", "--load", "0"}, "--load is 0, must be in (0, 100]"},
		{[]string{"--closed-loop", "--gogc", "-2"}, "--gogc is -2, must be a positive percent or -1"},
		{[]string{"-p", "10.1.2.3:4040", "-s", "s", "-m", "m"}, `peer "10.1.2.3:4040" is not a loopback address`},
		{[]string{"-P", writePeerList(t, "remote.txt", "127.0.0.1:1\n10.1.2.3:4040\n"), "-s", "s", "-m", "m"}, `peer "10.1.2.3:4040" is not a loopback address`},
		{[]string{"-p", "nonsense", "-s", "s", "-m", "m"}, `--peer: peer: bad host:port "nonsense"`},
		{[]string{"-P", writePeerList(t, "bad.json", "[\"127.0.0.1:1\",\n\"nonsense\"]"), "-s", "s", "-m", "m"}, `line 2: peer: bad host:port "nonsense"`},
		{[]string{"--embedded", "1", "--embedded-latency", "slowish"}, `--embedded-latency: load: shape "slowish"`},
		{[]string{"--embedded", "1", "-e", "thrift"}, "-e thrift needs the IDL: -t/--thrift FILE.thrift"},
		{[]string{"--embedded", "1", "-o", "yaml"}, `-o/--output is "yaml", must be table or json`},
		{[]string{"--embedded", "1", "-e", "json", "-r", "{"}, "the request body is not valid JSON"},
		{[]string{"--embedded", "1", "--rps", "-1"}, "--rps is -1, must be in [0, 100000] (0: unbounded)"},
		{[]string{"--embedded", "1", "--connections", "0"}, "--connections is 0, must be in [1, 1000]"},
		{[]string{"--embedded", "1", "--connections", "1001"}, "--connections is 1001"},
		{[]string{"--embedded", "1", "--connections", "100", "--concurrency", "101"}, "--connections 100 x --concurrency 101 is 10100 calls in flight, more than 10000"},
		{[]string{"--closed-loop", "--connections", "2"}, "drop --connections"},
		{[]string{"--embedded", "1", "-d", "0s"}, "-d/--max-duration is 0s"},
		{[]string{"--embedded", "1", "--max-duration", "1h"}, "-d/--max-duration is 1h0m0s, must be in (0, 10m0s]"},
		{[]string{"--embedded", "1", "-n", "-5"}, "-n/--max-requests is -5"},
		{[]string{"--embedded", "1", "--concurrency", "0"}, "--concurrency is 0"},
		{[]string{"--embedded", "1", "--timeout", "0s"}, "--timeout is 0s"},
		{[]string{"--embedded", "1", "--warmup", "-1"}, "--warmup is -1"},
		{[]string{"--embedded", "1", "--retry-max", "3", "--hedge-max", "2"}, "--retry-max and --hedge-max are exclusive"},
		{[]string{"--embedded", "1", "--service-config", "x.json", "--hedge-max", "2"}, "--service-config cannot be combined"},
		{[]string{"--embedded", "1", "--service-config", "/nonexistent/x.json"}, "--service-config /nonexistent/x.json: open"},
		{[]string{"--embedded", "1", "--retry-max", "1"}, "--retry-max is 1, must be >= 2"},
		{[]string{"--embedded", "1", "--hedge-max", "1"}, "--hedge-max is 1, must be >= 2"},
		{[]string{"--embedded", "1", "--hedge-max", "2", "--hedge-delay", "-1s"}, "--hedge-delay is -1s"},
		{[]string{"--embedded", "1", "--hedge-max", "2", "--hedge-codes", "SLOW"}, "--hedge-codes"},
		{[]string{"--embedded", "1", "--hedge-adaptive", "0.9"}, "--hedge-adaptive needs --hedge-max"},
		{[]string{"--embedded", "1", "--hedge-max", "2", "--hedge-adaptive", "1.5"}, "--hedge-adaptive is 1.5, must be in (0, 1)"},
		{[]string{"--embedded", "1", "--hedge-max", "2", "--hedge-adaptive", "0.9", "--hedge-window", "3"}, "--hedge-window is 3, must be in [10, 1000000]"},
		{[]string{"--embedded", "1", "--hedge-max", "2", "--hedge-adaptive", "0.9", "--hedge-cap", "0s"}, "--hedge-cap is 0s"},
		{[]string{"--embedded", "1", "--hedge-max", "2", "--hedge-adaptive", "0.9", "--hedge-budget", "2"}, "--hedge-budget is 2, must be in [0, 1]"},
		{[]string{"--embedded", "1", "--debug-listen", "nonsense"}, `--debug-listen "nonsense": want host:port`},
		{[]string{"--embedded", "1", "--debug-listen", "127.0.0.1:http"}, "the port must be a number"},
		{[]string{"--embedded", "1", "extra"}, `the word "extra" after the flags is the service`},
		{[]string{"--embedded", "1", "--json"}, "flag provided but not defined: -json"}, // bench never had --json
		{[]string{"--embedded", "1", "--duration", "1s"}, "flag provided but not defined: -duration"},
		{[]string{"--no-such-flag"}, "flag provided but not defined: -no-such-flag"},
		{[]string{"--balancing", "flood"}, `--balancing: unknown scenario "flood"; the scenarios are scale-out, heterogeneous, shard, erroring (or all)`},
		{[]string{"--balancing", ""}, `--balancing: unknown scenario ""`},
		{[]string{"--balancing", "shard", "--rps", "10"}, "--balancing sets its own servers, load and client; drop --rps"},
		{[]string{"--balancing", "shard", "-p", "127.0.0.1:1"}, "drop --peer"},
		{[]string{"--balancing", "shard", "-d", "1s"}, "drop --max-duration"},
		{[]string{"--balancing", "shard", "--embedded", "3"}, "drop --embedded"},
		{[]string{"--balancing", "all", "--retry-max", "3"}, "--balancing makes calls with no retries or hedges; drop --retry-max"},
		{[]string{"--balancing", "shard", "--closed-loop"}, "--closed-loop sets its own servers, load and client; drop --balancing"},
		{[]string{"--balancing", "shard", "--gogc", "0"}, "--gogc is 0, must be a positive percent or -1"},
		{[]string{"--balancing", "shard", "--timeout", "0s"}, "--timeout is 0s, must be > 0"},
		{[]string{"--balancing", "shard", "--seed", "0"}, "--seed is 0, must be >= 1"},
		{[]string{"--embedded", "1", "--mix", "critical=100"}, "--mix, --callers, --heavy-factor, --shedding and --throttling need --closed-loop"},
		{[]string{"--embedded", "1", "--callers", "3"}, "need --closed-loop"},
		{[]string{"--embedded", "1", "--throttling", "on"}, "need --closed-loop"},
		{[]string{"--balancing", "shard", "--callers", "3"}, "--balancing sets its own servers, load and client; drop --callers"},
		{[]string{"--closed-loop", "--mix", "urgent=100"}, `--mix: "urgent=100": unknown class "urgent": want critical_plus, critical, sheddable_plus or sheddable`},
		{[]string{"--closed-loop", "--mix", "critical=50,critical=50"}, "--mix: class critical is given twice"},
		{[]string{"--closed-loop", "--mix", "critical=half,sheddable=50"}, `--mix: "critical=half": the percent "half" is not a number`},
		{[]string{"--closed-loop", "--mix", "critical=-5,sheddable=105"}, "--mix: critical's percent is -5, must be in (0, 100]"},
		{[]string{"--closed-loop", "--mix", "critical=20,sheddable=70"}, "--mix: the percents sum to 90, must sum to 100"},
		{[]string{"--closed-loop", "--mix", "critical"}, `--mix: "critical": want CLASS=PERCENT`},
		{[]string{"--closed-loop", "--callers", "1"}, "--callers is 1, must be in [2, 100]"},
		{[]string{"--closed-loop", "--callers", "101"}, "--callers is 101, must be in [2, 100]"},
		{[]string{"--closed-loop", "--heavy-factor", "10"}, "--heavy-factor needs --callers"},
		{[]string{"--closed-loop", "--callers", "10", "--heavy-factor", "0.5"}, "--heavy-factor is 0.5, must be in [1, 1000]"},
		{[]string{"--closed-loop", "--callers", "10", "--heavy-factor", "NaN"}, "--heavy-factor is NaN"},
		{[]string{"--closed-loop", "--shedding", "adaptive,lots"}, `--shedding: unknown "lots", want none, fixed, adaptive`},
		{[]string{"--closed-loop", "--shedding", "fixed,fixed"}, `--shedding: "fixed" is given twice`},
		{[]string{"--closed-loop", "--throttling", "yes"}, `--throttling: unknown "yes", want off, on`},
		{[]string{"--closed-loop", "--throttling", ""}, `--throttling: unknown "", want off, on`},
		{[]string{"--embedded", "1", "--ci"}, "--ci needs --balancing"},
		{[]string{"--balancing", "shard", "extra"}, `unexpected argument "extra": --closed-loop, --rolling-deploy and --balancing call servers of their own`},
		{[]string{"--rolling-deploy", "--rows", "dns"}, "bench --rolling-deploy (it may embed an etcd server) is in sluice-lab"},
		{[]string{"--embedded", "1", "--steady", "3s"}, "flag provided but not defined: -steady"},
		{[]string{"--closed-loop", "--chart", "c.png"}, "bench --chart (charts link gonum's plot) is in sluice-lab"},
		{[]string{"--balancing", "shard", "--chart=b.svg"}, "bench --chart (charts link gonum's plot) is in sluice-lab"},
	} {
		code, out, errOut := runBench(t, context.Background(), tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) || out != "" {
			t.Errorf("bench %q: exit %d, stderr %q, stdout %q; want exit 2 and stderr containing %q",
				tc.args, code, errOut, out, tc.want)
		}
	}
}

// A progress line a second on stderr while the run lasts; the report on
// stdout alone.
func TestBenchProgress(t *testing.T) {
	t.Parallel() // waits on real time: overlaps with the other waiting tests
	code, out, errOut := runBench(t, context.Background(), "--embedded", "1", "--embedded-latency", "0", "--rps", "100",
		"-d", "1500ms", "--warmup", "0", "--timeout", "30s") // the lines' format, not the latency, is tested: no call may time out
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	line := regexp.MustCompile(`(?m)^ +(\d+\.\d)s  (\d+) calls: (\d+) ok, 0 failed, 0 refused locally; (\d+\.\d) calls/s$`)
	m := line.FindAllStringSubmatch(errOut, -1)
	if len(m) == 0 {
		t.Fatalf("no progress line on stderr:\n%s", errOut)
	}
	for _, p := range m {
		if p[2] != p[3] || p[2] == "0" {
			t.Errorf("progress %q: want every returned call ok, and some", p[0])
		}
	}
	if strings.Contains(out, " calls: ") || !strings.Contains(out, "calls       150 in") {
		t.Errorf("stdout should hold the report alone:\n%s", out)
	}
}

// Calls refused locally (here UNAVAILABLE: nothing listens) are counted
// and timed apart from successes and failures; a run in which no call
// succeeded exits 1.
func TestBenchRefusedCallsApart(t *testing.T) {
	code, out, errOut := runBench(t, context.Background(), "-p", testnet.Refused(t), "-s", "kv", "-m", "get",
		"--rps", "200", "-n", "20", "--warmup", "0", "-o", "json")
	var r benchJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("exit %d: %v in %q; stderr %s", code, err, out, errOut)
	}
	if code != 1 || !strings.Contains(errOut, "sluice bench: no call succeeded: UNAVAILABLE 20") {
		t.Errorf("exit %d, stderr %q; want 1 and the errors named", code, errOut)
	}
	if r.Calls != 20 || r.Refused != 20 || r.OK != 0 || r.Failed != 0 || r.Errors["UNAVAILABLE"] != 20 {
		t.Errorf("calls %d refused %d ok %d failed %d errors %v; want 20 refused, UNAVAILABLE", r.Calls, r.Refused, r.OK, r.Failed, r.Errors)
	}
	if r.RefusedLatency["max"] <= 0 || r.Latency["max"] != 0 || r.FailedLatency["max"] != 0 {
		t.Errorf("latency ok %v failed %v refused %v; want only refused latencies", r.Latency, r.FailedLatency, r.RefusedLatency)
	}
}

func fmtSscanf(s, format string, a ...any) (int, error) { return fmt.Sscanf(s, format, a...) }

// closedLoopJSON is the part of `sluice bench --closed-loop -o json` the
// paired test reads; the figures are read by name, so that a key spelt
// otherwise is missed.
type closedLoopJSON struct {
	Config map[string]any `json:"config"`
	Rows   []struct {
		Shedding   string           `json:"shedding"`
		Throttling bool             `json:"throttling"`
		Aware      *bool            `json:"aware"`
		Classes    []map[string]any `json:"classes"`
		Callers    []map[string]any `json:"callers"`
	} `json:"rows"`
}

// --mix and --callers through the CLI, one combination (--shedding,
// --throttling): its two rows, unaware then aware, each with the classes
// and callers arrays, their elements' keys exactly the issue's.
func TestBenchClosedLoopPaired(t *testing.T) {
	t.Parallel() // waits on real time: overlaps with the other waiting tests
	code, out, errOut := runBench(t, context.Background(), "--closed-loop", "--embedded-workers", "2", "--embedded-latency", "fixed:5ms",
		"-d", "1s", "--mix", "critical_plus=20,critical=30,sheddable=50", "--callers", "3", "--heavy-factor", "2.5",
		"--shedding", "adaptive", "--throttling", "on", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if n := strings.Count(errOut, "running: "); n != 3 || !strings.Contains(errOut, "running: shedding adaptive, client busy throttling on, aware of classes and callers") {
		t.Errorf("want 3 progress lines on stderr, the unloaded run and the pair:\n%s", errOut)
	}
	var res closedLoopJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if res.Config["callers"] != 3.0 || res.Config["heavy_factor"] != 2.5 || len(res.Rows) != 2 {
		t.Fatalf("config %v, %d rows; want 3 callers, heavy factor 2.5, 2 rows", res.Config, len(res.Rows))
	}
	keys := func(m map[string]any) string {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return strings.Join(ks, ",")
	}
	for i, r := range res.Rows {
		if r.Shedding != "adaptive" || !r.Throttling || r.Aware == nil || *r.Aware != (i == 1) || len(r.Classes) != 3 || len(r.Callers) != 3 {
			t.Fatalf("row %d: %s/%v aware %v, %d classes, %d callers; want adaptive/on, aware %v, 3 and 3", i, r.Shedding, r.Throttling, r.Aware, len(r.Classes), len(r.Callers), i == 1)
		}
		for j, c := range r.Classes {
			if got := keys(c); got != "name,offered_rps,ok_rps,p99_ms,served" {
				t.Errorf("row %d class %d: keys %s", i, j, got)
			}
			if want := []string{"critical_plus", "critical", "sheddable"}[j]; c["name"] != want {
				t.Errorf("row %d class %d is %v, want %s", i, j, c["name"], want)
			}
		}
		offered := 0.0
		for j, c := range r.Callers {
			if got := keys(c); got != "heavy,name,offered_rps,ok_rps,p99_ms,served" {
				t.Errorf("row %d caller %d: keys %s", i, j, got)
			}
			if c["name"] != fmt.Sprintf("caller-%d", j+1) || c["heavy"] != (j == 0) {
				t.Errorf("row %d caller %d: %v, heavy %v; want caller-%d, heavy only caller-1", i, j, c["name"], c["heavy"], j+1)
			}
			if s, _ := c["served"].(float64); !(s >= 0 && s <= 1) {
				t.Errorf("row %d caller %d: served %v, want in [0, 1]", i, j, c["served"])
			}
			offered += c["offered_rps"].(float64)
		}
		// 2 x 400 calls/s, caller-1 2.5 of 4.5 parts.
		if math.Abs(offered-800) > 1 || math.Abs(r.Callers[0]["offered_rps"].(float64)-800*2.5/4.5) > 1 {
			t.Errorf("row %d: the callers offered %.1f calls/s, caller-1 %v; want 800, 444.4", i, offered, r.Callers[0]["offered_rps"])
		}
	}
}

// Interrupted before its first scenario, --balancing prints what it has
// (the heading) and exits 0, saying so.
func TestBenchBalancingInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	code, out, errOut := runBench(t, ctx, "--balancing", "all", "--ci")
	if code != 0 || !strings.Contains(out, "Balancing, ci size") || !strings.Contains(errOut, "interrupted; the scenarios made so far are above") {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0, the heading, and the interruption named", code, out, errOut)
	}
}

// yab's `-n N` alone: exactly N calls as fast as the connections allow,
// with no duration cap (the old defaults, --rps 100 and -d 5s, sent 500
// of 2000 in 5 s), in unbounded mode with yab's defaults: 2 x GOMAXPROCS
// connections, one call in flight on each.
func TestBenchNAloneIsUnbounded(t *testing.T) {
	start := time.Now()
	code, out, errOut := runBench(t, context.Background(), "--embedded", "1", "--embedded-latency", "0", "-n", "2000", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r benchJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	conns := 2 * runtime.GOMAXPROCS(0)
	if r.Calls != 2000 || r.OK != 2000 || r.Mode != "unbounded" || r.OfferedRPS != nil || r.Connections != conns || r.Concurrency != 1 || r.MaxInFlight != conns {
		t.Errorf("calls %d ok %d mode %q offered %v connections %d concurrency %d in flight %d; want 2000 ok, unbounded, no rate, %d x 1",
			r.Calls, r.OK, r.Mode, r.OfferedRPS, r.Connections, r.Concurrency, r.MaxInFlight, conns)
	}
	if r.Throughput <= 0 || r.Latency["count"] != 2000 || r.Latency["p50"] <= 0 {
		t.Errorf("throughput %v latency %v", r.Throughput, r.Latency)
	}
	t.Logf("2000 calls in %.2fs (%v wall), %.0f calls/s", r.ElapsedS, time.Since(start).Round(time.Millisecond), r.Throughput)
}

// --rps 0 is unbounded too (it was refused), and -d bounds it; the table
// says how it ran, with the same figures as the JSON (connections,
// concurrency, calls, throughput, quantiles p50 to p99.9 and max).
func TestBenchRPSZeroIsUnbounded(t *testing.T) {
	code, out, errOut := runBench(t, context.Background(), "--embedded", "2", "--embedded-latency", "0", "--rps", "0", "-d", "300ms",
		"--connections", "3", "--concurrency", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^load        unbounded: 3 connections x 2 calls in flight \(6 in all\), each call started when one returns$`),
		regexp.MustCompile(`(?m)^calls       \d+ in 0\.[3-9]\ds: \d+ ok, 0 failed, 0 refused locally; throughput \d+\.\d calls/s$`),
		regexp.MustCompile(`(?m)^latency     ok       p50 \S+  p90 \S+  p95 \S+  p99 \S+  p99.9 \S+  max \S+  mean \S+$`),
	} {
		if !want.MatchString(out) {
			t.Errorf("the table lacks a line matching %s:\n%s", want, out)
		}
	}
}

// --connections N makes N channels, each with its own connections and
// --concurrency calls in flight: never more than N x C at the servers,
// each channel warmed up, and the report says so.
func TestBenchConnectionsAndConcurrency(t *testing.T) {
	s, err := load.StartServers(2, load.ServerConfig{Service: "kv", Method: "get", Format: "raw", Shape: load.Fixed(time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hps := s.HostPorts()
	code, out, errOut := runBench(t, context.Background(), "-s", "kv", "-m", "get", "-e", "raw", "-p", hps[0], "-p", hps[1],
		"--connections", "3", "--concurrency", "2", "-n", "300", "--warmup", "2", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r benchJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if r.Calls != 300 || r.OK != 300 || r.Connections != 3 || r.Concurrency != 2 || r.MaxInFlight != 6 {
		t.Errorf("calls %d ok %d connections %d concurrency %d in flight %d; want 300 ok on 3 x 2", r.Calls, r.OK, r.Connections, r.Concurrency, r.MaxInFlight)
	}
	if got := s.Received(); got != 307 {
		t.Errorf("servers received %d requests, want 307 (300, 2 warm-up calls on each of 3 connections, and the first call)", got)
	}
	if m := s.MaxInFlight(); m > 6 || m < 2 {
		t.Errorf("servers saw at most %d requests at once, want 2 to 6 (3 connections x 2)", m)
	}
}

// -o text, bench's older spelling of the table, still works.
func TestBenchOutputTextAlias(t *testing.T) {
	code, out, errOut := runBench(t, context.Background(), "--embedded", "1", "--embedded-latency", "0", "-n", "20", "-o", "text", "--no-first-response")
	if code != 0 || !strings.Contains(out, "calls       20 in ") || strings.HasPrefix(out, "{") {
		t.Errorf("-o text: exit %d, stderr %q, stdout:\n%s\nwant the table", code, errOut, out)
	}
}

// perPeerJSON is the part of `sluice bench --per-peer-stats -o json` the
// per-peer test reads.
type perPeerJSON struct {
	Calls   int `json:"calls"`
	PerPeer []struct {
		Peer    string             `json:"peer"`
		Calls   int                `json:"calls"`
		OK      int                `json:"ok"`
		Errors  map[string]int     `json:"errors"`
		Latency map[string]float64 `json:"latency_ms"`
		Sent    int                `json:"sent"`
		Left    bool               `json:"left"`
	} `json:"per_peer"`
	FirstResponse *struct {
		Body map[string]any `json:"body"`
		OK   bool           `json:"ok"`
	} `json:"first_response"`
}

// --per-peer-stats against three servers: a per_peer element for each,
// with its calls and latency, adding up to the run's; the first response,
// as yab prints it, in first_response. The table has a row per peer and
// the first response above it, as yab prints it; --no-first-response
// leaves it out, and without --per-peer-stats there is no per_peer.
func TestBenchPerPeerStats(t *testing.T) {
	t.Parallel() // waits on real time: overlaps with the other waiting tests
	peers := []string{startServe(t), startServe(t), startServe(t)}
	// 3 s of calls: a peer whose first calls were slow (its connection's
	// first use, under the race detector) may be judged slow before the
	// run and then get only a probe every 2 s (balancing.ProbeInterval);
	// a shorter run could leave it without a call, and without a row.
	// The runs without --per-peer-stats have no rows to wait for: 0.5 s.
	args := []string{"-p", peers[0], "-p", peers[1], "-p", peers[2], "-s", "echo", "-m", "echo", "-r", `{"k":"v"}`, "--rps", "300", "-n", "900"}
	short := append(args[:len(args)-1:len(args)-1], "150") // -n 150
	code, out, errOut := runBench(t, context.Background(), append(args, "--per-peer-stats", "-o", "json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r perPeerJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if len(r.PerPeer) != 3 {
		t.Fatalf("per_peer %+v, want one element for each of the 3 peers", r.PerPeer)
	}
	calls := 0
	for _, p := range r.PerPeer {
		calls += p.Calls
		if !slices.Contains(peers, p.Peer) || p.Calls == 0 || p.OK != p.Calls || p.Sent != p.Calls || p.Left || len(p.Errors) != 0 ||
			!(p.Latency["p50"] > 0 && p.Latency["p99"] >= p.Latency["p50"]) || p.Latency["count"] != float64(p.OK) {
			t.Errorf("per_peer element %+v: want one of %v with calls, all ok, timed", p, peers)
		}
	}
	if calls != r.Calls || calls != 900 {
		t.Errorf("per_peer calls add up to %d, the run made %d; want 900", calls, r.Calls)
	}
	if f := r.FirstResponse; f == nil || !f.OK || f.Body["k"] != "v" {
		t.Errorf("first_response %+v, want the echo of {\"k\":\"v\"}, ok", f)
	}

	code, out, errOut = runBench(t, context.Background(), append(args, "--per-peer-stats")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	wantFirst := "{\n  \"body\": {\n    \"k\": \"v\"\n  },\n  \"ok\": true,\n  \"trace\": \"0\"\n}\n\nservers     "
	if !strings.HasPrefix(out, wantFirst) {
		t.Errorf("the table does not start with the first response as yab prints it, then the report:\n%s", out)
	}
	for _, p := range peers {
		if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(p) + ` +\d+ +\d+ +0 +0 +\S+ +\S+ +\S+ +\d+ +0 +0 +none$`).MatchString(out) {
			t.Errorf("no per-peer row for %s:\n%s", p, out)
		}
	}

	code, out, errOut = runBench(t, context.Background(), append(short, "--no-first-response", "-o", "json")...)
	if code != 0 || strings.Contains(out, `"per_peer"`) || !strings.Contains(out, `"first_response":null`) {
		t.Errorf("exit %d, stderr %q; want no per_peer and a null first_response:\n%s", code, errOut, out)
	}
	code, out, errOut = runBench(t, context.Background(), append(short, "--no-first-response")...)
	if code != 0 || !strings.HasPrefix(out, "servers     ") || strings.Contains(out, "per peer") {
		t.Errorf("exit %d, stderr %q; want the report alone, no per-peer rows:\n%s", code, errOut, out)
	}
}

// A first call that fails is said on stderr, and the run goes on to report
// its calls' failures.
func TestBenchFirstCallFails(t *testing.T) {
	code, out, errOut := runBench(t, context.Background(), "-p", "127.0.0.1:1", "-s", "echo", "-m", "echo", "-n", "5", "--warmup", "0")
	if code != ExitFail || !strings.Contains(errOut, "sluice bench: the first call, before the run: ") || !strings.HasPrefix(out, "servers     ") ||
		!strings.Contains(out, "UNAVAILABLE 5") {
		t.Errorf("exit %d, stderr %q, stdout:\n%s\nwant 1, the first call's failure on stderr, and the run's 5 UNAVAILABLE", code, errOut, out)
	}
}
