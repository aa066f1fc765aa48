package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rpc/sluice/busy"
	"github.com/sluice-rpc/sluice/channel/channelz"
	"github.com/sluice-rpc/sluice/internal/testkit/slowtest"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/tools/cmd/internal/clitest"
	"github.com/sluice-rpc/sluice/tools/internal/testkit/testhttp"
)

// TestMain (goleak) lives in setup_test.go.

// startServe runs `sluice serve` in process on 127.0.0.1 and returns its
// address; it stops with the test, which checks that it exited 0.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	addr, _ := startServeStderr(t, args...)
	return addr
}

// startServeStderr is startServe, also returning what the server writes
// on stderr.
func startServeStderr(t *testing.T, args ...string) (string, *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	exit := make(chan int, 1)
	// A short quiet time: the tests end their servers often, with no
	// clients left to wait for.
	go func() {
		exit <- ServeContext(ctx, append([]string{"--listen", "127.0.0.1:0", "--shutdown-quiet", "10ms"}, args...), nil, &out, &errOut)
	}()
	t.Cleanup(func() {
		cancel()
		if code := testwait.Recv(t, exit, "sluice serve to exit"); code != 0 {
			t.Errorf("sluice serve exited %d: %s", code, errOut.String())
		}
	})
	re := regexp.MustCompile(`(?m)^serving echo on (\S+)$`)
	var addr string
	testwait.Until(t, "sluice serve to listen", func() bool {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			addr = m[1]
		}
		return addr != ""
	})
	return addr, &errOut
}

// The exit codes of testdata/exitcodes.txt, the cases scripts/exitcodes.sh
// runs against a built binary, run in process against `sluice serve`:
// sluice's lines exit as wanted, and every line of sluice-lab's exits 2
// here, naming sluice-lab (sluice-lab's test runs those).
func TestExitCodes(t *testing.T) {
	t.Parallel() // waits on real time: overlaps with the other waiting tests
	peer := startServe(t)
	idl, err := filepath.Abs("testdata/exitcodes.thrift")
	if err != nil {
		t.Fatal(err)
	}
	cases, err := clitest.ExitCodes("testdata/exitcodes.txt", map[string]string{"$PEER": peer, "$DEAD": "127.0.0.1:1", "$IDL": idl})
	if err != nil {
		t.Fatal(err)
	}
	labs := 0
	for _, c := range cases {
		var out, errOut bytes.Buffer
		got := run(c.Args, &out, &errOut)
		switch {
		case c.Lab && (got != ExitUsage || !strings.Contains(errOut.String(), "is in sluice-lab")):
			t.Errorf("exitcodes.txt:%d: sluice %s: exit %d, stderr %q; want 2, naming sluice-lab", c.Line, strings.Join(c.Args, " "), got, errOut.String())
		case !c.Lab && got != c.Want:
			t.Errorf("exitcodes.txt:%d: sluice %s: exit %d, want %d\nstderr: %s", c.Line, strings.Join(c.Args, " "), got, c.Want, errOut.String())
		}
		if c.Lab {
			labs++
		}
	}
	if len(cases)-labs < 50 || labs < 30 {
		t.Fatalf("%d cases read, %d of them sluice-lab's; want the whole file", len(cases), labs)
	}
}

// Every command and subcommand has help: asked for, it goes to stdout with
// a usage line, a description, its flags (or subcommands) and examples,
// and nothing goes to stderr. The commands are the command table's.
func TestHelp(t *testing.T) {
	var leafArgs [][]string
	for _, l := range leaves(topLevel(nil).subs) {
		leafArgs = append(leafArgs, strings.Fields(l[0]))
	}
	groups := [][]string{{}}
	for _, c := range topLevel(nil).subs {
		if len(c.subs) > 0 {
			groups = append(groups, []string{c.name})
		}
	}
	if len(leafArgs) != 4 || len(groups) != 1 { // doorman and sim are sluice-lab's
		t.Fatalf("the command table has %d commands and %d groups: %v %v", len(leafArgs), len(groups), leafArgs, groups)
	}
	check := func(args []string, wantFlags bool) {
		t.Helper()
		clitest.CheckHelp(t, run, "sluice", args, wantFlags)
	}
	for _, c := range leafArgs {
		check(append(append([]string{}, c...), "-h"), true)
		check(append(append([]string{}, c...), "--help"), true)
		check(append([]string{"help"}, c...), true)
	}
	for _, g := range groups {
		check(append(append([]string{}, g...), "-h"), false)
		check(append([]string{"help"}, g...), false)
	}
}

// `sluice -h` lists every command of the command table, the groups'
// subcommands each on a line of its own ("sim shed"),
// with its summary; `sluice sim -h` lists sim's.
func TestTopLevelHelpListsEveryCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"-h"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	ls := leaves(topLevel(nil).subs)
	for _, l := range ls {
		name, summary := l[0], l[1]
		if summary == "" || !regexp.MustCompile(`(?m)^  `+regexp.QuoteMeta(name)+` +`+regexp.QuoteMeta(summary)+`$`).MatchString(out.String()) {
			t.Errorf("sluice -h lacks the line of %q (%q):\n%s", name, summary, out.String())
		}
	}
}

// sluice's main.go's package documentation lists the commands as
// `sluice -h` does, from the same table.
func TestPackageDocListsEveryCommand(t *testing.T) {
	src, err := os.ReadFile("../../sluice/main.go")
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	topLevel(nil).writeCommands(&want, "//\t")
	doc, _, _ := strings.Cut(string(src), "\npackage main")
	if !strings.Contains(doc, want.String()) {
		t.Errorf("main.go's package doc does not list the commands as sluice -h does; want the lines\n%s\nin\n%s", want.String(), doc)
	}
}

// Flags show with their one-letter alias, argument and default, and the
// aliases mean the same flag.
func TestCallHelpFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	run([]string{"call", "-h"}, &out, &errOut)
	for _, want := range []string{
		"  -p, --peer HOST:PORT ", "  -P, --peer-list TARGET ", "  -s, --service SERVICE ", "  -m, --method METHOD ",
		"  -e, --encoding ENCODING ", "(default json, or thrift with -t or --health)", "  -r, --request BODY ", "  -H, --header KEY:VALUE ",
		"      --timeout DURATION ", "(default 1s)", "  -y, --yaml-template FILE ", "  -A, --arg NAME:VALUE ",
		"      --procedure METHOD ", "      --headers MAP ", "      --headers-file FILE ", "  -o, --output FORMAT ", "  -v, --verbose ", "      --service-config FILE ",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("call -h lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "--json") || strings.Contains(out.String(), "--raw") {
		t.Errorf("call -h still has --json or --raw:\n%s", out.String())
	}
}

// Usage errors say what is wrong and where help is, on stderr only.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "sluice: missing command"},
		{[]string{"nope"}, `sluice: unknown command "nope"`},
		{[]string{"doorman", "serve"}, "sluice: sluice doorman is in sluice-lab, which links the heavy modules it needs: go run ./tools/cmd/sluice-lab doorman"},
		{[]string{"call", "-P", "etcd://127.0.0.1:2379/services/kv", "-s", "kv", "-m", "get"}, "sluice call: --peer-list: an etcd:// target is in sluice-lab"},
		{[]string{"serve", "--register", "etcd://127.0.0.1:2379/services/kv"}, "sluice serve: --register: an etcd:// target is in sluice-lab"},
		{[]string{"sim", "busy"}, "sluice: sluice sim is in sluice-lab, which links the heavy modules it needs: go run ./tools/cmd/sluice-lab sim"},
		{[]string{"help", "faults"}, "sluice faults is in sluice-lab"},
		{[]string{"hostile", "-h"}, "sluice hostile is in sluice-lab"},
		{[]string{"call", "--nope"}, "sluice call: flag provided but not defined: -nope\nRun 'sluice call -h' for help.\n"},
		{[]string{"demo", "--rps", "x"}, `sluice demo: invalid value "x" for flag -rps`},
	} {
		var out, errOut bytes.Buffer
		if code := run(tc.args, &out, &errOut); code != 2 || out.Len() > 0 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("sluice %q: exit %d, stdout %q, stderr %q; want 2 and %q on stderr", tc.args, code, out.String(), errOut.String(), tc.want)
		}
	}
}

func TestVersion(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"--version"}, &out, &errOut); code != 0 || out.String() != "sluice "+version()+"\n" || version() == "" {
		t.Fatalf("--version: exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
}

// demoRow matches a per-second line of the demo; its last group holds the
// line's marks ("  <- overloaded", "  <- slow: probed only", ...).
var demoRow = regexp.MustCompile(`(?m)^\s+(\d+)\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+READY((?:\s+<- [^<\n]*[^<\s])*)$`)

// demoLine is a per-second line of the demo.
type demoLine struct {
	sec, sent, busy int
	peer            string
	limit           float64
	overloaded      bool
}

// demoLines runs the demo for seconds at 300 requests a second, its
// overloaded peer never healing, and returns its output and per-second
// lines, one per second and peer.
func demoLines(t *testing.T, seconds int) (string, []demoLine) {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := run([]string{"demo", "--seconds", strconv.Itoa(seconds), "--rps", "300", "--recover-at", "0"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	s := out.String()
	if !strings.Contains(s, "summary:") {
		t.Fatalf("no summary:\n%s", s)
	}
	rows := demoRow.FindAllStringSubmatch(s, -1)
	if len(rows) != 3*seconds {
		t.Fatalf("want %d seconds x 3 peers lines, got %d:\n%s", seconds, len(rows), s)
	}
	var lines []demoLine
	for _, r := range rows {
		l := demoLine{peer: r[2], overloaded: strings.Contains(r[7], "<- overloaded")}
		l.sec, _ = strconv.Atoi(r[1])
		l.sent, _ = strconv.Atoi(r[3])
		l.busy, _ = strconv.Atoi(r[4])
		var err error
		if l.limit, err = strconv.ParseFloat(r[6], 64); err != nil {
			t.Fatalf("limit %q: %v", r[6], err)
		}
		lines = append(lines, l)
	}
	return s, lines
}

// A short demo: the overloaded peer answers Busy and its limit collapses;
// the summary tells it with the counts. What holds on any machine: where
// the traffic goes depends also on the peers' latencies, which a loaded
// machine sets (see TestDemoTrafficMovesAway).
func TestDemoShort(t *testing.T) {
	t.Parallel() // waits on real time: overlaps with the other waiting tests
	s, lines := demoLines(t, 2)
	// How far the limit falls depends on how many Busy answers the peer
	// gave in one second, which depends on its share of real-time traffic
	// (a loaded machine gave it 11 in second 1, so 9999999*4/2^11, not
	// 38): the test asserts that it fell. The least fall is to half the
	// ceiling exactly: three Busy answers, x4/2^3 (fewer leave it capped).
	busyTotal, minLimit := 0, math.Inf(1)
	var bad string
	for _, l := range lines {
		if l.overloaded {
			busyTotal += l.busy
			minLimit = min(minLimit, l.limit)
			bad = l.peer
		}
	}
	if busyTotal == 0 || minLimit > busy.DefaultCeiling/2 || minLimit <= 0 {
		t.Fatalf("overloaded peer: busy %d, lowest limit %v; want busy answers and a limit fallen from the ceiling, above 0:\n%s", busyTotal, minLimit, s)
	}
	// The closing sentence is the counts': the overloaded peer and the
	// attempts it got while overloaded, both seconds of them.
	if !strings.Contains(s, "While "+bad+" was overloaded (seconds 1-2): ") {
		t.Errorf("summary does not tell the overloaded peer's story:\n%s", s)
	}
	if !regexp.MustCompile(`it got [0-9.]+% of the attempts \(\d+ of \d+\)`).MatchString(s) {
		t.Errorf("summary gives no share of the attempts:\n%s", s)
	}
	var out, errOut bytes.Buffer
	for _, bad := range [][]string{{"demo", "--seconds", "31"}, {"demo", "--rps", "0"}, {"demo", "--capacity", "-1"},
		{"demo", "--capacity", "+Inf"}, {"demo", "--capacity", "NaN"}} {
		if code := run(bad, &out, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2", bad, code)
		}
	}
}

// By the demo's last second the overloaded peer's traffic has gone to the
// other two: it is sent fewer requests than each of them. On a loaded
// machine a pause can make a healthy peer's latency stand 5x above the
// others', and the slow-peer rule then sends it only probes (0 requests
// in a second), so this runs behind the slow-test gate, on a quiet
// machine.
func TestDemoTrafficMovesAway(t *testing.T) {
	slowtest.Skip(t, "3 s of real time, and a quiet machine")
	s, lines := demoLines(t, 3)
	lastSec := map[bool][]int{} // the last second's sent counts: overloaded or not
	for _, l := range lines {
		if l.sec == 3 {
			lastSec[l.overloaded] = append(lastSec[l.overloaded], l.sent)
		}
	}
	if len(lastSec[true]) != 1 || len(lastSec[false]) != 2 || lastSec[true][0] >= min(lastSec[false][0], lastSec[false][1]) {
		t.Fatalf("second 3: the overloaded peer was sent %v, the others %v; want fewer than each of them:\n%s", lastSec[true], lastSec[false], s)
	}
}

// An interrupted demo stops at once, says so, and exits 0 as an
// interrupted bench or faults run does.
func TestDemoInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errOut bytes.Buffer
	if code := demoRun(ctx, []string{"--seconds", "30"}, &out, &errOut, nil); code != 0 || !strings.Contains(errOut.String(), "sluice demo: interrupted") {
		t.Fatalf("exit %d, stderr %q; want 0 and a note", code, errOut.String())
	}
}

// The demo's summary is derived from what it measured: other counts, other
// sentences.
func TestDemoSummaryFollowsTheCounts(t *testing.T) {
	sec := func(overloaded bool, sent, badSent, badBusy, badThrottled uint64) demoSecond {
		return demoSecond{overloaded: overloaded, sent: sent, badSent: badSent, badBusy: badBusy, badThrottled: badThrottled}
	}
	quick := demoMeasure{overloaded: "127.0.0.1:9", recoverAt: 2, seconds: []demoSecond{
		sec(true, 300, 100, 80, 0), sec(true, 300, 3, 2, 97), sec(false, 300, 0, 0, 100), sec(false, 300, 90, 0, 10)}}
	slow := demoMeasure{overloaded: "127.0.0.1:9", recoverAt: 3, seconds: []demoSecond{
		sec(true, 300, 100, 80, 0), sec(true, 300, 100, 85, 0), sec(true, 300, 20, 18, 80), sec(false, 300, 30, 0, 70)}}
	never := demoMeasure{overloaded: "127.0.0.1:9", recoverAt: 0, seconds: []demoSecond{
		sec(true, 200, 50, 10, 0), sec(true, 200, 60, 12, 0)}}
	for _, tc := range []struct {
		m    demoMeasure
		want []string
	}{
		{quick, []string{
			"While 127.0.0.1:9 was overloaded (seconds 1-2): before its limiter refused any request (second 1) it got 33.3% of the attempts (100 of 300) and answered Busy to 80; ",
			"once its limiter refused requests (second 2) it got 1.0% of the attempts (3 of 300), answered Busy to 2, and its limiter kept 97 requests from it.\n",
			"After it healed (seconds 3-4) its limiter kept 110 requests from it while its limit grew back; in the last second it got 30.0% of the attempts (90 of 300), against an even share of 33.3%.\n",
		}},
		{slow, []string{
			"before its limiter refused any request (seconds 1-2) it got 33.3% of the attempts (200 of 600) and answered Busy to 165; ",
			"once its limiter refused requests (second 3) it got 6.7% of the attempts (20 of 300), answered Busy to 18, and its limiter kept 80 requests from it.\n",
			"After it healed (second 4) its limiter kept 70 requests from it while its limit grew back; in the last second it got 10.0% of the attempts (30 of 300)",
		}},
		{never, []string{
			"While 127.0.0.1:9 was overloaded (seconds 1-2): its limiter never refused a request; it got 27.5% of the attempts (110 of 400) and answered Busy to 22.\n",
		}},
	} {
		got := tc.m.summary()
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("summary lacks %q:\n%s", w, got)
			}
		}
	}
	if strings.Contains(never.summary(), "healed") {
		t.Errorf("a peer that never healed is said to have healed:\n%s", never.summary())
	}
}

func TestFormatLimit(t *testing.T) {
	for _, tc := range []struct {
		limit float64
		want  string
	}{
		{9999999, "9999999"}, {152.6, "152"}, {38.15, "38.1"}, {2.4, "2.4"}, {0.1, "0.1"},
		{0.0373, "0.037"}, {0.000149, "0.00015"}, {3.6e-5, "3.6e-05"},
	} {
		if got := formatLimit(tc.limit); got != tc.want {
			t.Errorf("formatLimit(%v) = %q, want %q", tc.limit, got, tc.want)
		}
	}
}

// With --debug-listen the demo serves its metrics through tally's
// Prometheus reporter: a scrape at the end of a run has call latency as a
// Prometheus histogram, the profiles are beside it.
func TestDemoServesMetrics(t *testing.T) {
	t.Parallel() // waits on real time: overlaps with the other waiting tests
	var out, errOut bytes.Buffer
	var metrics, pprofIndex, live string
	code := demoRun(context.Background(), []string{"--seconds", "1", "--rps", "200", "--debug-listen", "127.0.0.1:0"},
		&out, &errOut, func(addr string) {
			if addr == "" {
				t.Error("no debug listener")
				return
			}
			metrics = testhttp.OK(t, "http://"+addr+"/metrics")
			pprofIndex = testhttp.OK(t, "http://"+addr+"/debug/pprof/")
			live = testhttp.OK(t, "http://"+addr+"/debug/sluice")
		})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !regexp.MustCompile(`(?m)^sluice demo: debug endpoints on http://127\.0\.0\.1:\d+/ \(/metrics /debug/pprof/ /debug/sluice\)$`).MatchString(errOut.String()) {
		t.Errorf("the demo did not say where its debug listener is:\n%s", errOut.String())
	}
	for _, want := range []string{`call_latency_bucket{`, `le="+Inf"} `, "\ncalls{", "\npeer_busy{"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, metrics)
		}
	}
	if !strings.Contains(pprofIndex, "goroutine") {
		t.Errorf("/debug/pprof/ is not the profile index:\n%s", pprofIndex)
	}
	var state channelz.State
	if err := json.Unmarshal([]byte(live), &state); err != nil {
		t.Fatalf("/debug/sluice is not the channel's state: %v\n%s", err, live)
	}
	if len(state.Services) != 1 || state.Services[0].Name != "kv" || len(state.Services[0].Peers) != 3 {
		t.Errorf("/debug/sluice: want service kv with 3 peers, got %+v", state.Services)
	}
}

// Every command takes flags only: a stray word is an error, not the silent
// end of flag parsing (which would drop the flags after it).
func TestCommandsRejectStrayArguments(t *testing.T) {
	for _, args := range [][]string{
		{"call", "-p", "127.0.0.1:1", "-s", "kv", "-m", "echo", "-e", "raw", "-r", "x", "extra", "--retry-max", "1"},
		{"demo", "extra", "--seconds", "1"},
		{"bench", "--embedded", "1", "-s", "bench", "-m", "echo", "extra"},
		{"serve", "extra"},
	} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `unexpected argument "extra"`) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and the stray argument named", args, code, errOut.String())
		}
	}
}
