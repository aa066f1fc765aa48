package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rpc/sluice/internal/testkit/slowtest"
	"github.com/sluice-rpc/sluice/tools/benchmarks/deploy"
	"github.com/sluice-rpc/sluice/tools/benchmarks/load"
	"github.com/sluice-rpc/sluice/tools/cmd/internal/cli"
	"github.com/sluice-rpc/sluice/tools/cmd/internal/clitest"
	"go.uber.org/goleak"
)

// TestMain serves as a fleet server when `bench --rolling-deploy`
// re-executes this test binary, as sluice-lab's main does (the fault
// suite's child hook is left out on purpose: TestFaultsChildHookMissing),
// and otherwise runs the tests under goleak.
func TestMain(m *testing.M) {
	deploy.ServeChildIfAsked()
	// The parallel tests here wait on real time (runs of a fixed length).
	slowtest.DefaultParallel(4)
	goleak.VerifyTestMain(m)
}

func runBench(t *testing.T, _ context.Context, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb strings.Builder
	code = run(append([]string{"bench"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// The sluice-lab lines of the exit-code cases (testdata/exitcodes.txt of
// package cli, whose test runs sluice's), run in process.
func TestExitCodes(t *testing.T) {
	cases, err := clitest.ExitCodes("../internal/cli/testdata/exitcodes.txt", map[string]string{"$PEER": "127.0.0.1:1", "$DEAD": "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range cases {
		if !c.Lab {
			continue
		}
		n++
		var out, errOut bytes.Buffer
		if got := run(c.Args, &out, &errOut); got != c.Want {
			t.Errorf("exitcodes.txt:%d: sluice-lab %s: exit %d, want %d\nstderr: %s", c.Line, strings.Join(c.Args, " "), got, c.Want, errOut.String())
		}
	}
	if n < 30 {
		t.Fatalf("%d sluice-lab cases read, want the whole file's", n)
	}
}

// sluice-lab's commands have help as sluice's do; `sluice-lab -h` lists
// them after sluice's; and sluice, asked for each, names sluice-lab.
func TestLabCommands(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"-h"}, &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), "usage: sluice-lab COMMAND") {
		t.Fatalf("-h: exit %d, stderr %q:\n%s", code, errOut.String(), out.String())
	}
	for _, want := range []string{"demo", "call", "bench", "serve", "doorman serve", "sim busy", "sim ratelimit", "sim shed", "sim doorman", "faults", "hostile"} {
		if !regexp.MustCompile(`(?m)^  ` + want + ` +\S`).MatchString(out.String()) {
			t.Errorf("sluice-lab -h lacks %q:\n%s", want, out.String())
		}
	}
	for _, c := range [][]string{{"sim", "busy"}, {"sim", "ratelimit"}, {"sim", "shed"}, {"sim", "doorman"}, {"faults"}, {"hostile"}} {
		clitest.CheckHelp(t, run, "sluice-lab", append(append([]string{}, c...), "-h"), true)
		clitest.CheckHelp(t, run, "sluice-lab", append([]string{"help"}, c...), true)
	}
	clitest.CheckHelp(t, run, "sluice-lab", []string{"sim", "-h"}, false)
	for _, c := range labTable().Commands {
		name := c.Name()
		var out, errOut bytes.Buffer
		if code := cli.Run([]string{name, "-h"}, &out, &errOut, nil); code != cli.ExitUsage || !strings.Contains(errOut.String(), "sluice "+name+" is in sluice-lab") {
			t.Errorf("sluice %s -h: exit %d, stderr %q; want 2, naming sluice-lab", name, code, errOut.String())
		}
	}
}

// main.go's package documentation lists sluice-lab's commands as
// `sluice-lab -h` does.
func TestPackageDocListsEveryCommand(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"-h"}, &out, &errOut); code != 0 {
		t.Fatalf("sluice-lab -h: exit %d: %s", code, errOut.String())
	}
	doc, _, _ := strings.Cut(string(src), "\npackage main")
	lab := map[string]bool{} // the commands sluice-lab adds, and whether -h listed one
	for _, c := range labTable().Commands {
		lab[c.Name()] = false
	}
	for _, l := range strings.Split(out.String(), "\n") {
		f := strings.Fields(l)
		if _, ok := lab[firstOr(f)]; len(f) < 2 || !strings.HasPrefix(l, "  ") || !ok {
			continue
		}
		lab[f[0]] = true
		if !strings.Contains(doc, "//\t"+strings.TrimSpace(l)) && !strings.Contains(doc, "//\t"+strings.TrimPrefix(l, "  ")) {
			t.Errorf("main.go's package doc lacks the line %q", l)
		}
	}
	for name, listed := range lab {
		if !listed {
			t.Errorf("sluice-lab -h lists no line of %s: is the check blind?\n%s", name, out.String())
		}
	}
}

// firstOr is f's first word, "" if none.
func firstOr(f []string) string {
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

func TestBenchLabFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--rolling-deploy", "-H", "a:b"}, "drop --header"},
		{[]string{"--rolling-deploy", "--tls"}, "--rolling-deploy sets its own servers, load and clients; drop --tls"},
		{[]string{"--rolling-deploy", "--caller", "me"}, "drop --caller"},
		{[]string{"--rolling-deploy", "-f", "body.json"}, "drop --file"},
		{[]string{"--closed-loop", "--chart", "x.gif"}, "must end in .png or .svg"},
		{[]string{"--closed-loop", "--chart", "/nonexistent/x.png"}, "--chart: /nonexistent is not a directory"},
		{[]string{"--rolling-deploy", "--connections", "2"}, "drop --connections"},
		{[]string{"--rolling-deploy", "--rps", "0"}, "--rolling-deploy offers a rate, > 0"},
		{[]string{"--embedded", "1", "--steady", "3s"}, "--steady needs --rolling-deploy"},
		{[]string{"--rolling-deploy", "--rows", "consul"}, `--rows: row "consul", want one of etcd, dns, static, tchannel`},
		{[]string{"--rolling-deploy", "-p", "127.0.0.1:1"}, "drop --peer"},
		{[]string{"--rolling-deploy", "--closed-loop"}, "drop --closed-loop"},
		{[]string{"--rolling-deploy", "--etcd-user", "root"}, "drop --etcd-user"},
		{[]string{"--rolling-deploy", "--retry-max", "3"}, "no retry policy; drop --retry-max"},
		{[]string{"--rolling-deploy", "--steady", "0s"}, "--steady is 0s, must be > 0"},
		{[]string{"--rolling-deploy", "--instances", "0"}, "--instances and --clients must be >= 1"},
		{[]string{"--rolling-deploy", "--instances", "17"}, "Instances is 17, must be in [1, 16]"},
		{[]string{"--rolling-deploy", "--grace", "1s"}, "Grace is 1s, must outlast DNSPeriod (2s)"},
		{[]string{"--rolling-deploy", "--embedded-latency", "heavy-tail"}, "--rolling-deploy needs a fixed service time"},
		{[]string{"--rolling-deploy", "-o", "yaml"}, `-o/--output is "yaml"`},
		{[]string{"--rolling-deploy", "--balancing", "shard"}, "drop --balancing"},
		{[]string{"--balancing", "shard", "--chart", "x.gif"}, "must end in .png or .svg"},
		{[]string{"--balancing", "shard", "--chart", "/nonexistent/x.png"}, "--chart: /nonexistent is not a directory"},
		{[]string{"--rolling-deploy", "--mix", "critical=100"}, "--rolling-deploy sets its own servers, load and clients; drop --mix"},
		{[]string{"--embedded", "1", "--chart", "x.png"}, "--chart and --gogc also --balancing"},
	} {
		code, out, errOut := runBench(t, context.Background(), tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) || out != "" {
			t.Errorf("bench %q: exit %d, stderr %q, stdout %q; want exit 2 and stderr containing %q",
				tc.args, code, errOut, out, tc.want)
		}
	}
}

// TestBenchClosedLoop runs the comparison briefly on a small server: six
// rows after the unloaded run, and a chart.
func TestBenchClosedLoop(t *testing.T) {
	slowtest.Skip(t, "seven 1 s runs of real load")
	chart := t.TempDir() + "/c.svg"
	code, out, errOut := runBench(t, context.Background(), "--closed-loop", "--embedded-workers", "2",
		"--embedded-latency", "fixed:5ms", "-d", "1s", "--chart", chart)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"Server: 2 workers x 5ms (capacity C = 400 calls/s)", "| none | off |", "| adaptive | on |", "chart: " + chart} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(errOut, "running: "); n != 7 {
		t.Errorf("%d progress lines on stderr, want 7:\n%s", n, errOut)
	}
}

// A small heterogeneous run through the CLI: the JSON holds the three rows
// (weights, none, load reports) and the scenario's five verdicts, and
// --chart draws the scenario to the file named.
func TestBenchBalancing(t *testing.T) {
	t.Parallel() // waits on real time: overlaps with the other waiting tests
	chart := t.TempDir() + "/b.svg"
	code, out, errOut := runBench(t, context.Background(), "--balancing", "heterogeneous", "--ci", "--chart", chart, "-o", "json", "--timeout", "2s")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res balancingJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	h := res.Heterogeneous
	if res.Config.Size != "ci" || len(res.Config.Scenarios) != 1 || res.Config.TimeoutMS != 2000 || h == nil || res.Shard != nil {
		t.Fatalf("config %+v, heterogeneous %v, shard %v: want the CI size, one scenario, 2s, heterogeneous alone", res.Config, h, res.Shard)
	}
	if len(h.With.Servers) != 3 || h.With.Servers[0].Calls == 0 || len(h.Without.Weights) != 3 || h.Without.Weights[2] != 1 || len(res.Verdicts) != 5 {
		t.Errorf("rows %+v, verdicts %+v: want 3 servers that took calls, weights all 1 without, 5 verdicts", h, res.Verdicts)
	}
	if lr := h.LoadReports; !lr.LoadReports || len(lr.Servers) != 3 || lr.Servers[0].Calls == 0 || len(lr.Weights) != 3 || lr.Weights[0] != 1 {
		t.Errorf("load_reports row %+v: want load reports on, weights all 1, 3 servers that took calls", lr)
	}
	if n := strings.Count(errOut, "running: heterogeneous"); n != 3 {
		t.Errorf("%d progress lines on stderr, want 3:\n%s", n, errOut)
	}
	if fi, err := os.Stat(chart); err != nil || fi.Size() == 0 {
		t.Errorf("no chart at %s: %v", chart, err)
	}
}

// A small rolling deploy of two rows through the CLI: the JSON report
// has both, with their calls and replacements, and the Shutdown row
// failed no call; the table names both rows.
//
// The quiet time outlasts the clients' DNS period, as Shutdown's quiet
// is meant to (it ends the grace once the clients have stopped sending).
// At 100 ms against a 300 ms period, and about 30 calls/s to the leaving
// server, a gap of 100 ms between two calls while the clients still held
// its record ended the grace early: it closed under a call in flight
// (1 NETWORK, in 2 of some 60 runs).
func TestBenchRollingDeploy(t *testing.T) {
	t.Parallel() // waits on real time: overlaps with the other waiting tests
	args := []string{"--rolling-deploy", "--rows", "dns,static", "--replacements", "2", "--rps", "100",
		"--warmup-time", "100ms", "--steady", "300ms", "--settle", "200ms", "--dns-period", "300ms", "--dns-min-interval", "100ms",
		"--grace", "1s", "--quiet", "400ms"}
	code, out, errOut := runBench(t, context.Background(), append(args, "-o", "json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res deployJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if len(res.Rows) != 2 || res.Rows[0].Row != "dns" || res.Rows[1].Row != "static" {
		t.Fatalf("rows %+v, want dns then static", res.Rows)
	}
	for _, r := range res.Rows {
		if r.Calls < 50 || len(r.Replacements) != 2 || r.Steady.Calls == 0 {
			t.Errorf("row %s: %d calls, %d replacements, %d steady calls; want about 100/s, 2, some", r.Row, r.Calls, len(r.Replacements), r.Steady.Calls)
		}
	}
	if r := res.Rows[0]; r.Failed != 0 {
		t.Errorf("dns row: %d calls failed (%v), want none", r.Failed, r.FailedByCode)
	}
	for _, want := range []string{"row dns: Sluice, DNS SRV discovery, Shutdown", "replaced 127.0.0.1:"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}

	code, out, errOut = runBench(t, context.Background(), append(args, "--rows", "static", "--replacements", "1")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"| row | calls | failed (by code) |", "| Sluice, static peers, Close in place |", "replace each instance in place"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// deployJSON is the part of `sluice bench --rolling-deploy -o json` the
// test reads.
type deployJSON struct {
	Rows []struct {
		Row          string         `json:"row"`
		Calls        int            `json:"calls"`
		Failed       int            `json:"failed"`
		FailedByCode map[string]int `json:"failed_by_code"`
		Steady       struct {
			Calls int     `json:"calls"`
			P99   float64 `json:"p99_ms"`
		} `json:"steady"`
		Replacements []struct {
			Old, New string
		} `json:"replacements"`
	} `json:"rows"`
}

// balancingJSON is the part of `sluice bench --balancing -o json` the
// test reads.
type balancingJSON struct {
	Config struct {
		Size      string   `json:"size"`
		Scenarios []string `json:"scenarios"`
		TimeoutMS float64  `json:"timeout_ms"`
	} `json:"config"`
	Heterogeneous *struct {
		With, Without struct {
			Weights []float64 `json:"weights"`
			Servers []struct {
				Calls int `json:"calls"`
			} `json:"servers"`
		}
		LoadReports struct {
			Weights     []float64 `json:"weights"`
			LoadReports bool      `json:"load_reports"`
			Servers     []struct {
				Calls int `json:"calls"`
			} `json:"servers"`
		} `json:"load_reports"`
	} `json:"heterogeneous"`
	Shard    any `json:"shard"`
	Verdicts []struct {
		Scenario string `json:"scenario"`
		Holds    bool   `json:"holds"`
	} `json:"verdicts"`
}

func TestSimBusyPresetsMatchTheDesign(t *testing.T) {
	for _, preset := range []string{"steady", "flappy"} {
		want, err := os.ReadFile("../../internal/sim/busysim/testdata/" + preset + ".golden")
		if err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		if code := run([]string{"sim", "busy", "--preset", preset}, &out, &errOut); code != 0 {
			t.Fatalf("exit %d: %s", code, errOut.String())
		}
		if out.String() != string(want) {
			t.Fatalf("--preset %s output differs from the design's table:\n%s", preset, out.String())
		}
	}
}

func TestSimBusyFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"sim", "busy", "--rps", "1000", "--rps-pattern", "linear_grow", "--busy", "200", "--busy-pattern", "flappy"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "start rps=1000 (linear_grow) throttled=0 busy=200 (flappy) limit=9999999") {
		t.Fatalf("output:\n%s", out.String())
	}
	for _, args := range [][]string{
		{"sim", "busy", "--preset", "steady", "--rps", "5"},
		{"sim", "busy", "--preset", "wobbly"},
		{"sim", "busy", "--rps-pattern", "zigzag"},
		{"sim", "busy", "--rps", "-1"},
		{"sim", "nope"},
		{"nope"},
	} {
		errOut.Reset()
		if code := run(args, &out, &errOut); code != 2 || errOut.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and an error", args, code, errOut.String())
		}
	}
}

// The reports of sluice-lab's commands and modes follow sluice's JSON
// convention (package cli's TestEveryReportIsSnakeCaseJSON): one JSON
// object on one line, snake_case keys, each run short.
func TestEveryLabReportIsSnakeCaseJSON(t *testing.T) {
	t.Parallel() // waits on real time: overlaps with the other waiting tests
	// A Sluice server to attack (a plain tchannel-go one dies of the
	// checksum attack).
	servers, err := load.StartServers(1, load.ServerConfig{Service: "echo", Method: "echo", Format: "json"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(servers.Close)
	peer := servers.HostPorts()[0]
	self := strconv.Itoa(os.Getpid())
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"bench --rolling-deploy", []string{"bench", "--rolling-deploy", "--rows", "static", "--replacements", "1", "--rps", "100",
			"--warmup-time", "100ms", "--steady", "300ms", "--settle", "200ms", "--dns-period", "300ms", "--dns-min-interval", "100ms",
			"--grace", "1s", "--quiet", "100ms"}},
		{"sim busy", []string{"sim", "busy"}},
		{"sim ratelimit", []string{"sim", "ratelimit"}},
		{"sim shed", []string{"sim", "shed", "--duration", "3s"}},
		{"sim doorman", []string{"sim", "doorman", "--scenario", "tree-mishaps", "--duration", "4m", "--seed", "3"}},
		{"faults", []string{"faults", "--ci", "--scenarios", "none", "--duration", "300ms"}},
		{"hostile", []string{"hostile", "--ci", "--attacks", "checksum", "--target", peer, "--pid", self}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			if code := run(append(tc.args, "-o", "json"), &out, &errOut); code != cli.ExitOK {
				t.Fatalf("sluice-lab %s -o json: exit %d: %s", strings.Join(tc.args, " "), code, errOut.String())
			}
			s := out.String()
			if strings.Count(s, "\n") != 1 || !strings.HasSuffix(s, "}\n") {
				t.Errorf("want one JSON object on one line, got %d lines:\n%.300s", strings.Count(s, "\n"), s)
			}
			var v any
			if err := json.Unmarshal(out.Bytes(), &v); err != nil {
				t.Fatalf("%v:\n%.500s", err, s)
			}
			if bad := clitest.BadKeys(v); len(bad) > 0 {
				t.Errorf("keys not in snake_case: %.10q", bad)
			}
		})
	}
}

// Every lab command takes flags only: a stray word is an error.
func TestLabCommandsRejectStrayArguments(t *testing.T) {
	for _, args := range [][]string{{"sim", "busy", "extra"}, {"sim", "ratelimit", "extra"}, {"faults", "extra"}} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `unexpected argument "extra"`) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and the stray argument named", args, code, errOut.String())
		}
	}
}
