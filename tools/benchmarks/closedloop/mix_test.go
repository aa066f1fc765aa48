package closedloop

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/criticality"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

func TestParseMix(t *testing.T) {
	mix, err := ParseMix("critical_plus=20, critical=30,sheddable=50")
	if err != nil {
		t.Fatal(err)
	}
	want := []Share{{criticality.CriticalPlus, 20}, {criticality.Critical, 30}, {criticality.Sheddable, 50}}
	if len(mix) != len(want) {
		t.Fatalf("ParseMix = %v, want %v", mix, want)
	}
	for i := range want {
		if mix[i] != want[i] {
			t.Errorf("share %d is %v, want %v", i, mix[i], want[i])
		}
	}
	if _, err := ParseMix("sheddable_plus=33.3,critical=33.3,sheddable=33.4"); err != nil {
		t.Errorf("decimals summing to 100: %v", err)
	}
	if _, err := ParseMix("critical=100"); err != nil {
		t.Errorf("one class: %v", err)
	}
	for _, tc := range []struct{ in, want string }{
		{"", `"": want CLASS=PERCENT`},
		{"critical=50,,sheddable=50", `"": want CLASS=PERCENT`},
		{"critical", `"critical": want CLASS=PERCENT`},
		{"urgent=100", `"urgent=100": unknown class "urgent": want critical_plus, critical, sheddable_plus or sheddable`},
		{"critical=fifty,sheddable=50", `"critical=fifty": the percent "fifty" is not a number`},
		{"critical=NaN,sheddable=50", `critical's percent is NaN, must be in (0, 100]`},
		{"critical=0,sheddable=100", `critical's percent is 0, must be in (0, 100]`},
		{"critical=-10,sheddable=110", `critical's percent is -10`},
		{"critical=50,critical=50", "class critical is given twice"},
		{"critical=50,sheddable=40", "the percents sum to 90, must sum to 100"},
		{"critical=60,sheddable=50", "the percents sum to 110, must sum to 100"},
	} {
		if _, err := ParseMix(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseMix(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
}

func TestValidateMixAndCallers(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Mix: []Share{{criticality.Critical, 50}}}, "Mix: the percents sum to 50"},
		{Config{Mix: []Share{{0, 100}}}, "Mix: class unset is not one of"},
		{Config{Callers: 1}, "Callers is 1, must be 0 (one client) or in [2, 100]"},
		{Config{Callers: MaxCallers + 1}, "Callers is 101"},
		{Config{HeavyFactor: 2}, "HeavyFactor is 2, needs Callers"},
		{Config{Callers: 2, HeavyFactor: 0.5}, "HeavyFactor is 0.5, must be in [1, 1000]"},
		{Config{Callers: 2, HeavyFactor: math.Inf(1)}, "HeavyFactor is +Inf"},
		{Config{Sheddings: []Shedding{"lots"}}, `unknown shedding "lots"`},
		{Config{Sheddings: []Shedding{FixedShedding, FixedShedding}}, `"fixed" is given twice`},
		{Config{Sheddings: []Shedding{}}, "Sheddings is empty"},
		{Config{Throttlings: []bool{true, true}}, "on is given twice"},
	} {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", c.cfg, err, c.want)
		}
	}
	if err := (Config{Callers: 10, Mix: []Share{{criticality.Sheddable, 100}}, Sheddings: []Shedding{AdaptiveShedding}, Throttlings: []bool{true}}).Validate(); err != nil {
		t.Errorf("a valid config: %v", err)
	}
}

// The smooth weighted picker gives each index its exact share over a
// whole cycle of the weights, decimals too, and spreads an index's picks
// evenly: the last index waits at most one pick more than its share's
// spacing between two picks.
func TestWeighted(t *testing.T) {
	for _, tc := range []struct {
		weights []float64
		n       int
		want    []int
	}{
		{[]float64{20, 30, 50}, 100, []int{20, 30, 50}},
		{[]float64{33.3, 33.3, 33.4}, 1000, []int{333, 333, 334}},
		{[]float64{10, 1, 1, 1}, 1300, []int{1000, 100, 100, 100}},
		{[]float64{1}, 5, []int{5}},
	} {
		w := newWeighted(tc.weights)
		got := make([]int, len(tc.weights))
		last, gap := -1, 0
		for i := range tc.n {
			k := w.next()
			got[k]++
			if k == len(tc.weights)-1 {
				if last >= 0 {
					gap = max(gap, i-last)
				}
				last = i
			}
		}
		for k := range got {
			if got[k] != tc.want[k] {
				t.Errorf("weights %v: %d picks gave %v, want %v", tc.weights, tc.n, got, tc.want)
				break
			}
		}
		share := tc.weights[len(tc.weights)-1] / w.total
		if even := int(math.Ceil(1/share)) + 1; gap > even {
			t.Errorf("weights %v: the last index waited up to %d picks, want at most %d (one more than its share's spacing)", tc.weights, gap, even)
		}
	}
}

// A plan spreads each class's calls over the callers in the callers'
// proportions, so that a class and a caller are independent even when
// their cycles line up (two classes half and half, two callers alike).
func TestPlanIndependent(t *testing.T) {
	p := newPlan(Config{Mix: []Share{{criticality.Critical, 50}, {criticality.Sheddable, 50}}, Callers: 2, HeavyFactor: 1})
	var n [2][2]int
	for i := range 400 {
		n[p.classOf(i)][p.callerOf(i)]++
	}
	if n != [2][2]int{{100, 100}, {100, 100}} {
		t.Errorf("calls by class and caller: %v, want 100 in each", n)
	}
}

// watch is a server's inbound middleware that counts the calls it takes
// by caller and class.
type watch struct {
	mu    sync.Mutex
	calls map[string]map[criticality.Class]int
}

func (w *watch) option() channel.Option {
	return channel.WithInboundMiddleware(func(ctx context.Context, in *channel.Inbound, next func(context.Context) error) error {
		w.mu.Lock()
		if w.calls == nil {
			w.calls = map[string]map[criticality.Class]int{}
		}
		if w.calls[in.Caller] == nil {
			w.calls[in.Caller] = map[criticality.Class]int{}
		}
		w.calls[in.Caller][criticality.FromContext(ctx)]++
		w.mu.Unlock()
		return next(ctx)
	})
}

// TestPairedRows makes an unaware and an aware run, 300 ms each, of a
// class mix from three callers, the first heavy, on a small server with
// adaptive shedding and client throttling at twice its capacity, and
// checks the figures by class and by caller against the plan and against
// what the server saw: the classes and callers the calls carried.
func TestPairedRows(t *testing.T) {
	cfg := Config{Workers: 2, Service: millis.Duration(5 * time.Millisecond), Duration: millis.Duration(300 * time.Millisecond), GCPercent: 300,
		Mix:     []Share{{criticality.CriticalPlus, 25}, {criticality.Sheddable, 75}},
		Callers: 3, HeavyFactor: 4}.withDefaults()
	defer debug.SetGCPercent(debug.SetGCPercent(cfg.GCPercent))
	ctx := context.Background()
	unloaded, err := runOne(ctx, Config{Workers: 2, Service: millis.Duration(5 * time.Millisecond), Duration: millis.Duration(300 * time.Millisecond)}.withDefaults(), NoShedding, false, false, 0.25)
	if err != nil {
		t.Fatal(err)
	}
	res := Result{Config: cfg, Unloaded: unloaded.Report}
	secs := cfg.Duration.D().Seconds()
	// 2 x 400 calls/s for 0.3 s: 240 calls, a quarter critical_plus; of
	// each class, caller-1 4/6 and the others 1/6 each.
	wantClass := map[string]int{"critical_plus": 60, "sheddable": 180}
	wantCaller := map[string]int{"caller-1": 160, "caller-2": 40, "caller-3": 40}
	for _, aware := range []bool{false, true} {
		var w watch
		row, err := runOne(ctx, cfg, AdaptiveShedding, true, aware, cfg.Load, w.option())
		if err != nil {
			t.Fatal(err)
		}
		res.Rows = append(res.Rows, row)
		rep := row.Report
		if row.Aware == nil || *row.Aware != aware || len(row.Classes) != 2 || len(row.Callers) != 3 {
			t.Fatalf("aware %v: row aware %v, %d classes, %d callers; want %v, 2, 3", aware, row.Aware, len(row.Classes), len(row.Callers), aware)
		}
		if rep.Calls != 240 || rep.Records != nil {
			t.Errorf("aware %v: %d calls, records kept %v; want 240 and none kept", aware, rep.Calls, rep.Records != nil)
		}
		okByCaller := map[string]int{}
		var sumOK [2]float64
		for i, f := range row.Classes {
			if f.Name != cfg.Mix[i].Class.String() {
				t.Errorf("aware %v: class %d is %q, want %v", aware, i, f.Name, cfg.Mix[i].Class)
			}
			checkFigures(t, f, wantClass[f.Name], secs)
			sumOK[0] += f.OKRPS * secs
		}
		for i, c := range row.Callers {
			if c.Name != callerName(i) || c.Heavy != (i == 0) {
				t.Errorf("aware %v: caller %d is %q, heavy %v; want %s, heavy only caller-1", aware, i, c.Name, c.Heavy, callerName(i))
			}
			checkFigures(t, c.Figures, wantCaller[c.Name], secs)
			sumOK[1] += c.OKRPS * secs
			okByCaller[c.Name] = int(math.Round(c.OKRPS * secs))
		}
		if math.Round(sumOK[0]) != float64(rep.OK) || math.Round(sumOK[1]) != float64(rep.OK) {
			t.Errorf("aware %v: ok calls by class add up to %.0f, by caller to %.0f; the run had %d", aware, sumOK[0], sumOK[1], rep.OK)
		}
		// The server saw the callers by name, every successful call (and
		// the warmup's), and the classes only from the aware run.
		for name, byClass := range w.calls {
			n := 0
			for cls, k := range byClass {
				n += k
				switch {
				case !aware && cls != criticality.Critical:
					t.Errorf("unaware: the server took %d calls of class %v from %s; want none but critical (no class)", k, cls, name)
				case aware && cls != criticality.Critical && wantClass[cls.String()] == 0:
					t.Errorf("aware: the server took %d calls of class %v, not in the mix", k, cls)
				}
			}
			if _, ok := wantCaller[name]; !ok {
				t.Errorf("aware %v: the server took %d calls from %q, not one of the callers", aware, n, name)
			} else if n < okByCaller[name] {
				t.Errorf("aware %v: the server took %d calls from %s, fewer than its %d successful ones", aware, n, name, okByCaller[name])
			}
		}
		if aware {
			var n [2]int
			for _, byClass := range w.calls {
				n[0] += byClass[criticality.CriticalPlus]
				n[1] += byClass[criticality.Sheddable]
			}
			if float64(n[0]) < row.Classes[0].OKRPS*secs-0.5 || float64(n[1]) < row.Classes[1].OKRPS*secs-0.5 || n[0]+n[1] == 0 {
				t.Errorf("aware: the server took %d critical_plus and %d sheddable calls; want at least the successful ones (%.0f, %.0f)",
					n[0], n[1], row.Classes[0].OKRPS*secs, row.Classes[1].OKRPS*secs)
			}
		}
	}
	var buf bytes.Buffer
	if err := res.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	t.Log("\n" + out)
	for _, want := range []string{
		"Classes of the offered calls: critical_plus 25%, sheddable 75%.",
		"Callers: 3, caller-1 to caller-3, each a client of its own; caller-1 (heavy) offers 4x each other's rate.",
		"| adaptive | on | nothing (FCFS) | ", "| adaptive | on | classes, callers | ",
		"| adaptive | on | classes, callers | critical_plus | 200 | ",
		"| adaptive | on | nothing (FCFS) | caller-1 (heavy) | 533 | ", "| adaptive | on | nothing (FCFS) | caller-3 | 133 | ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q", want)
		}
	}
	js, err := json.Marshal(&res)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"aware":false,"classes":[{"name":"critical_plus","offered_rps":200,"ok_rps":`,
		`"callers":[{"name":"caller-1","offered_rps":533.3333333333334,"ok_rps":`, `"heavy":true}`, `"heavy":false}`, `"aware":true`,
		`"mix":[{"class":"critical_plus","percent":25},{"class":"sheddable","percent":75}],"callers":3,"heavy_factor":4`} {
		if !bytes.Contains(js, []byte(want)) {
			t.Errorf("the JSON lacks %s:\n%s", want, js)
		}
	}
}

// checkFigures checks one class's or caller's figures: offered as
// planned, served in [0, 1] and ok over offered, a p99 when any call
// succeeded.
func checkFigures(t *testing.T, f Figures, offered int, secs float64) {
	t.Helper()
	if got := f.OfferedRPS * secs; math.Abs(got-float64(offered)) > 1e-6 {
		t.Errorf("%s: %.1f calls offered, want %d", f.Name, got, offered)
	}
	if !(f.Served >= 0 && f.Served <= 1) || math.Abs(f.Served-f.OKRPS/f.OfferedRPS) > 1e-9 {
		t.Errorf("%s: served %v, ok %v/s of %v/s offered; want ok over offered, in [0, 1]", f.Name, f.Served, f.OKRPS, f.OfferedRPS)
	}
	if (f.OKRPS > 0) != (f.P99 > 0) {
		t.Errorf("%s: p99 %v with %v ok/s", f.Name, f.P99, f.OKRPS)
	}
}
