package ratesim

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/slowtest"
	"github.com/sluice-rpc/sluice/pacing"
)

var t0 = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

func TestServerGCRA(t *testing.T) {
	s := NewServer(4500, 0, time.Hour, t0)
	if ok, h := s.Handle(t0); ok || h[pacing.HeaderRemaining] != "0" {
		t.Fatalf("empty bucket: ok=%v headers=%v", ok, h)
	}
	// One request's worth refills in 0.8 s.
	if ok, _ := s.Handle(t0.Add(799 * time.Millisecond)); ok {
		t.Fatal("allowed before 0.8 s")
	}
	if ok, h := s.Handle(t0.Add(800 * time.Millisecond)); !ok || h[pacing.HeaderRemaining] != "0" {
		t.Fatalf("at 0.8 s: ok=%v headers=%v", ok, h)
	}
	// After two hours the bucket is full, not fuller.
	at := t0.Add(2 * time.Hour)
	if got := s.Remaining(at); got != 4500 {
		t.Fatalf("Remaining after 2h = %d, want 4500", got)
	}
	for i := range 4500 {
		if ok, _ := s.Handle(at); !ok {
			t.Fatalf("request %d of a full bucket refused", i)
		}
	}
	if ok, _ := s.Handle(at); ok {
		t.Fatal("request 4501 allowed")
	}
}

func TestServerWithoutRefill(t *testing.T) {
	s := NewServer(4500, 2, 0, t0)
	for i, want := range []string{"1", "0", "0"} {
		ok, h := s.Handle(t0.Add(time.Duration(i) * time.Hour))
		if ok != (i < 2) || h[pacing.HeaderRemaining] != want {
			t.Fatalf("request %d: ok=%v remaining=%s", i, ok, h[pacing.HeaderRemaining])
		}
	}
}

func prd() pacing.Config {
	return pacing.Config{Strategy: pacing.StrategyProportionalRemainingDecrease}
}

func TestRunIsDeterministic(t *testing.T) {
	s := Steady()
	a, err := Run(s, prd(), 7)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Run(s, prd(), 7)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two runs with the same seed differ")
	}
	c, _ := Run(s, prd(), 8)
	if reflect.DeepEqual(a.Clients, c.Clients) {
		t.Fatal("runs with different seeds are identical: the seed is not used")
	}
}

// The server never lets more through than its bucket allows, and a null
// pacer hammers it.
func TestRunRespectsTheQuota(t *testing.T) {
	s := Steady()
	for _, cfg := range []pacing.Config{{}, prd()} {
		r, err := Run(s, cfg, 1)
		if err != nil {
			t.Fatal(err)
		}
		var ok int64
		for _, c := range r.Clients {
			ok += c.Requests - c.RateLimited
		}
		if max := int64(s.Duration.D()/(time.Hour/4500)) + 1; ok > max || ok < max*9/10 {
			t.Fatalf("%s: %d successes in 30 min, want at most %d and most of it used", cfg.Strategy, ok, max)
		}
		if r.HeaderErrors != 0 {
			t.Fatalf("%d header errors", r.HeaderErrors)
		}
		if cfg.Strategy == "" && r.RetryRate() < 0.9 {
			t.Fatalf("null pacer retry rate %v, want > 90%%", r.RetryRate())
		}
	}
}

func TestRunClearStops(t *testing.T) {
	s := Clear()
	r, err := Run(s, pacing.Config{Strategy: pacing.StrategyExponentialBackoff}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Stopped || r.End <= 0 || r.End > 5*time.Minute {
		t.Fatalf("clear run: stopped=%v end=%v", r.Stopped, r.End)
	}
	for i, c := range r.Clients {
		if c.Done <= 0 || c.Done > r.End {
			t.Fatalf("client %d done at %v, run ended %v", i, c.Done, r.End)
		}
	}
	// 4490 requests, 165 ms each, over 10 clients.
	if lo := time.Duration(449) * DefaultLatency; r.End < lo-time.Second || r.End > lo+5*time.Second {
		t.Fatalf("exponential backoff cleared in %v, want about %v", r.End, lo)
	}
}

func TestScenarioValidate(t *testing.T) {
	for _, s := range []Scenario{{}, {Clients: 1, Capacity: 1, Latency: -1, Duration: 1}, {Clients: 1, Capacity: 1, Latency: 1, Duration: 1, StopRemaining: -2}} {
		if _, err := Run(s, prd(), 1); err == nil || !strings.HasPrefix(err.Error(), "ratesim: ") {
			t.Errorf("Run(%+v) error = %v", s, err)
		}
	}
	bad := pacing.Config{Strategy: "nope"}
	if _, err := Run(Steady(), bad, 1); err == nil {
		t.Error("Run with an invalid pacer config did not fail")
	}
}

func TestMetrics(t *testing.T) {
	r := Result{Clients: []Client{
		{Requests: 10, RateLimited: 1, MaxSleep: time.Second},
		{Requests: 30, RateLimited: 9, MaxSleep: 3 * time.Second},
	}}
	if got := r.RetryRate(); got != 0.2 { // mean of 10% and 30%
		t.Errorf("RetryRate = %v, want 0.2", got)
	}
	if got := r.MaxSleep(); got != 3*time.Second {
		t.Errorf("MaxSleep = %v", got)
	}
	if got := r.RequestStdev(); got != 10 {
		t.Errorf("RequestStdev = %v, want 10", got)
	}
	if got := r.Requests(); got != 40 {
		t.Errorf("Requests = %v", got)
	}
}

func row(t *testing.T, rows []Row, s pacing.Strategy, mult float64) Row {
	t.Helper()
	for _, r := range rows {
		if r.Config.Strategy == s && r.Config.Multiplier == mult {
			return r
		}
	}
	t.Fatalf("no row for %s", s)
	return Row{}
}

// The acceptance targets, on the default seed (the figures in
// benchmarks/README.md): the proportional-remaining-decrease pacer has the
// lowest retry rate of the article's greedy strategies and clears the
// workload in the same order of time as exponential backoff; the reserve
// pacer beats it on at least three metrics and loses by at most 10% on the
// fourth.
func TestCompareAcceptance(t *testing.T) {
	rows, err := Compare(Entries(), Steady(), Clear(), 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	p := row(t, rows, pacing.StrategyProportionalRemainingDecrease, 0)
	for _, r := range rows {
		if r.Published != nil && r.Name != p.Name && r.Mean.RetryRate <= p.Mean.RetryRate {
			t.Errorf("%s retry rate %.2f%% <= proportional remaining decrease %.2f%%", r.Name, 100*r.Mean.RetryRate, 100*p.Mean.RetryRate)
		}
	}
	e := row(t, rows, pacing.StrategyExponentialBackoff, 0)
	if p.Mean.Clear > 2*e.Mean.Clear {
		t.Errorf("time to clear %v, exponential backoff %v", p.Mean.Clear, e.Mean.Clear)
	}
	checkBeats(t, row(t, rows, pacing.StrategyReserve, 0).Mean, p.Mean)
}

// The reserve pacer's advantage is not one lucky seed: it holds on the
// mean of 20 runs.
func TestReserveBeatsProportionalRemainingOnAverage(t *testing.T) {
	slowtest.Skip(t, "20 runs")
	var entries []Entry
	for _, e := range Entries() {
		if e.Config.Strategy == pacing.StrategyProportionalRemainingDecrease || e.Config.Strategy == pacing.StrategyReserve {
			entries = append(entries, e)
		}
	}
	rows, err := Compare(entries, Steady(), Clear(), 100, 20)
	if err != nil {
		t.Fatal(err)
	}
	checkBeats(t, rows[1].Mean, rows[0].Mean)
}

func checkBeats(t *testing.T, a, b Figures) {
	t.Helper()
	ratios := []float64{a.RetryRate / b.RetryRate, float64(a.MaxSleep) / float64(b.MaxSleep),
		a.RequestStdev / b.RequestStdev, float64(a.Clear) / float64(b.Clear)}
	wins := 0
	for _, r := range ratios {
		if r < 1 {
			wins++
		} else if r > 1.1 {
			t.Errorf("loses by more than 10%%: ratios %v (%+v vs %+v)", ratios, a, b)
		}
	}
	if wins < 3 {
		t.Errorf("wins %d of 4 metrics: ratios %v", wins, ratios)
	}
}

func TestWriteTable(t *testing.T) {
	rows, err := Compare(Entries()[4:6], Steady(), Clear(), 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteTable(&b, rows); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"| pacer |", "(3.07 %)", "(84.23 s)", "(551.10 s)", "exp. increase, prop. remaining decrease"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "\n"); n != 4 {
		t.Errorf("table has %d lines, want 4:\n%s", n, out)
	}
}

func BenchmarkRunSteady(b *testing.B) {
	s := Steady()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Run(s, prd(), 1); err != nil {
			b.Fatal(err)
		}
	}
}
