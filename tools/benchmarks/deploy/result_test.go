package deploy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/tools/benchmarks/load"
)

func TestBound(t *testing.T) {
	for _, tc := range []struct{ steady, want time.Duration }{
		{2 * time.Millisecond, 7 * time.Millisecond},   // + 5 ms
		{5 * time.Millisecond, 10 * time.Millisecond},  // both
		{20 * time.Millisecond, 40 * time.Millisecond}, // x 2
	} {
		if got := bound(tc.steady); got != tc.want {
			t.Errorf("bound(%v) = %v, want %v", tc.steady, got, tc.want)
		}
	}
}

// summarize splits the calls into the steady stretch and the deploys by
// arrival, counts failures by code, and times each new instance's first
// call from when it was available.
func TestSummarize(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var calls []call
	// Warmup: 0-100 ms, a slow call left out.
	calls = append(calls, call{at: at(50), latency: time.Second})
	// Steady: 100-1000 ms, 100 calls of 1..100 ms.
	for i := 1; i <= 100; i++ {
		calls = append(calls, call{at: at(100 + i*5), latency: time.Duration(i) * time.Millisecond})
	}
	// In flight when the first replacement began: a deploys call.
	calls = append(calls, call{at: at(990), latency: 20 * time.Millisecond})
	// Deploys: 1000-2000 ms, 100 calls of 2 ms, two failures.
	for i := range 100 {
		calls = append(calls, call{at: at(1000 + i*10), latency: 2 * time.Millisecond})
	}
	calls = append(calls, call{at: at(1500), latency: time.Second, code: "TIMEOUT", err: context.DeadlineExceeded}, call{at: at(1600), code: "DECLINED"})
	// After the last replacement: left out of both stretches.
	calls = append(calls, call{at: at(2500), latency: time.Second})

	newIn := &instance{firstAt: at(1250)}
	never := &instance{}
	reps := []replacement{
		{old: &instance{handled: 7}, new: newIn, start: at(1000), available: at(1200), leaveFrom: at(1200), left: at(1400)},
		{old: &instance{}, new: never, start: at(1500), available: at(1700), leaveFrom: at(1700), left: at(2000)},
	}
	all := []*instance{reps[0].old, reps[1].old, newIn, never}
	r := summarize(RowDNS, calls, 0, reps, all, t0, at(100), at(3000))
	if r.Calls != len(calls) || r.Failed != 2 || r.FailedByCode["TIMEOUT"] != 1 || r.FailedByCode["DECLINED"] != 1 {
		t.Errorf("calls %d, failed %d %v; want %d, 2 (1 TIMEOUT, 1 DECLINED)", r.Calls, r.Failed, r.FailedByCode, len(calls))
	}
	if r.Examples["TIMEOUT"] != context.DeadlineExceeded.Error() || len(r.Examples) != 1 {
		t.Errorf("examples %v, want the TIMEOUT's error alone", r.Examples)
	}
	if len(r.Failures) != 2 || r.Failures[0].Code != "TIMEOUT" || r.Failures[0].At != load.Seconds(1500*time.Millisecond) ||
		r.Failures[1].Code != "DECLINED" {
		t.Errorf("failures %+v, want the TIMEOUT at 1.5s then the DECLINED", r.Failures)
	}
	if r.Steady.Calls != 100 || r.Steady.P50 != load.Millis(50*time.Millisecond) || r.Steady.P99 != load.Millis(99*time.Millisecond) ||
		r.Steady.Max != load.Millis(100*time.Millisecond) {
		t.Errorf("steady %+v, want 100 calls, p50 50ms, p99 99ms, max 100ms", r.Steady)
	}
	if r.Instances != 4 || r.Idle != 3 {
		t.Errorf("instances %d, idle %d; want 4, 3 (one handled 7)", r.Instances, r.Idle)
	}
	if r.Deploys.Calls != 103 || r.Deploys.Failed != 2 || r.Deploys.P99 != load.Millis(2*time.Millisecond) {
		t.Errorf("deploys %+v, want 103 calls, 2 failed, p99 2ms", r.Deploys)
	}
	if r.OverBound || r.Bound != load.Millis(198*time.Millisecond) {
		t.Errorf("bound %v, over %v; want 198ms, not over", r.Bound, r.OverBound)
	}
	if r.NoFirstCall != 1 || r.FirstCallMax != load.Millis(50*time.Millisecond) || r.FirstCallMedian != r.FirstCallMax {
		t.Errorf("first calls: median %v, max %v, never %d; want 50ms, 50ms, 1", r.FirstCallMedian, r.FirstCallMax, r.NoFirstCall)
	}
	if len(r.Replacements) != 2 || r.Replacements[0].OldHandled != 7 || r.Replacements[0].Leave != load.Millis(200*time.Millisecond) ||
		r.Replacements[1].FirstCall != nil || r.Replacements[0].Start != load.Seconds(time.Second) {
		t.Errorf("replacements %+v", r.Replacements)
	}

	// The calls still out when the load's drain ended fail as HUNG.
	r = summarize(RowDNS, calls, 2, reps, all, t0, at(100), at(3000))
	if r.Calls != len(calls)+2 || r.Failed != 4 || r.FailedByCode[Hung] != 2 || !strings.HasPrefix(r.Examples[Hung], "2 calls still out") ||
		r.Deploys.Failed != 2 || len(r.Failures) != 2 {
		t.Errorf("with 2 hung: calls %d, failed %d %v, examples %v, deploys %+v; want %d, 4 (2 HUNG) and the stretches as before",
			r.Calls, r.Failed, r.FailedByCode, r.Examples, r.Deploys, len(calls)+2)
	}
}

func TestWriteTable(t *testing.T) {
	res := &Result{Config: shortConfig().withDefaults(), Etcd: "embedded etcd 3.x", Rows: []RowResult{
		{Row: RowEtcd, Title: RowEtcd.Title(), Calls: 1000, FailedByCode: map[string]int{},
			Steady:  Stretch{Calls: 500, P50: load.Millis(time.Millisecond), P99: load.Millis(2 * time.Millisecond)},
			Deploys: Stretch{Calls: 500, P50: load.Millis(time.Millisecond), P99: load.Millis(9 * time.Millisecond)},
			Bound:   load.Millis(7 * time.Millisecond), OverBound: true, Replacements: make([]Replacement, 2),
			FirstCallMedian: load.Millis(3 * time.Millisecond), FirstCallMax: load.Millis(4 * time.Millisecond)},
		{Row: RowTChannel, Title: RowTChannel.Title(), Calls: 1000, Failed: 5, FailedByCode: map[string]int{"NETWORK": 2, "DECLINED": 3},
			Replacements: make([]Replacement, 2), NoFirstCall: 2, Instances: 6, Idle: 3},
	}}
	var b strings.Builder
	if err := res.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"| row | calls | failed (by code) |",
		"| Sluice, etcd discovery, Shutdown | 1000 | 0 | 1ms / 2ms | 1ms / 9ms |",
		"| 3ms / 4ms |",
		"| 5 (3 DECLINED, 2 NETWORK) |",
		"| - (2 never called) | 3 of 6 |",
		"p99 during the deploys 9ms, OVER the bound",
		"etcd: embedded etcd 3.x.",
		"3 of 6 instances served no call. tchannel-go's default peer scorer",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
