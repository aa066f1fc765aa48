package doormansim

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluice-rpc/sluice/internal/testkit/slowtest"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func scenario(t *testing.T, name string) Scenario {
	t.Helper()
	sc, ok := Lookup(name)
	if !ok {
		t.Fatalf("no scenario %q", name)
	}
	return sc
}

func run(t *testing.T, sc Scenario) Result {
	t.Helper()
	start := time.Now()
	res, err := Run(sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s seed %d (%v simulated, %v): used %.2f%%, over %d samples in %d episodes, max %.2f, re-convergence %v after %s; %d mishaps, %d RPCs",
		sc.Name, sc.Seed, sc.Duration, time.Since(start).Round(time.Millisecond), 100*res.Summary.Used, res.Summary.Over,
		res.Summary.Episodes, res.Summary.Max, res.Summary.Reconverge, res.Summary.ReconvergeAfter, len(res.Mishaps), res.Summary.RPCs)
	return res
}

// The targets, on the scenarios as defined (seed 1): the design
// doc's 96.8% and 96.6% used, 106.05% at most, beaten. The tree scenarios
// are an hour of a simulated tree, 14 s each under -race: they run behind
// the slow-test gate.
func TestScenariosMeetTheTargets(t *testing.T) {
	for _, tt := range []struct {
		name string
		used float64
		slow bool
	}{{"root", 0.99, false}, {"tree", 0.98, true}, {"tree-mishaps", 0.98, true}} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.slow {
				slowtest.Skip(t, "an hour of a simulated tree, 14 s under -race")
			}
			t.Parallel()
			sc := scenario(t, tt.name)
			res := run(t, sc)
			if res.Summary.Used < tt.used {
				t.Errorf("capacity used %.4f, want >= %v", res.Summary.Used, tt.used)
			}
			if limit := 1.03 * sc.Capacity; res.Summary.Max > limit {
				t.Errorf("the clients held up to %v, want <= %v (103%% of capacity)", res.Summary.Max, limit)
			}
			if tt.name == "tree-mishaps" {
				kinds := map[string]int{}
				for _, m := range res.Mishaps {
					kinds[m.Kind]++
				}
				if len(res.Mishaps) < 10 || kinds["spike"] == 0 || kinds["crash"] == 0 || kinds["failover"] == 0 {
					t.Errorf("mishaps in an hour: %v, want about 12 (one every 5 minutes on average) of every kind", kinds)
				}
				// The design doc: "a max of 2 minutes to catch up".
				if res.Summary.MishapReconverge == 0 || res.Summary.MishapReconverge.D() > 2*time.Minute {
					t.Errorf("re-convergence after a mishap took %v (%s), want some, and at most 2 minutes",
						res.Summary.MishapReconverge, res.Summary.MishapReconvergeAfter)
				}
			}
			if n := len(res.Samples); n != int(sc.Duration/sc.Sample)+1 {
				t.Errorf("%d samples, want one every %v", n, sc.Sample)
			}
		})
	}
}

// The 10,000-client scenario: all 10 simulated minutes without -race
// (about 25 s), 3 under it (about a minute). The figure includes the
// seconds after learning mode ends, when the clients, which held nothing
// while it lasted, fill up: over a short run they weigh more (90 s gives
// 95%).
func TestLargeTreeConverges(t *testing.T) {
	slowtest.Skip(t, "25 s, a minute under -race")
	t.Parallel()
	sc := scenario(t, "large")
	if slowtest.Race {
		sc.Duration = millis.Duration(3 * time.Minute)
	}
	res := run(t, sc)
	if res.Summary.Used < 0.98 {
		t.Errorf("capacity used %.4f, want >= 0.98", res.Summary.Used)
	}
	if res.Summary.Max > sc.Capacity*1.03 {
		t.Errorf("the clients held up to %v of %v", res.Summary.Max, sc.Capacity)
	}
	if n := sc.NumClients(); n != 10000 {
		t.Errorf("%d clients, want 10000", n)
	}
}

// A run is a function of its scenario: the same seed gives the same
// samples, mishaps and figures; another seed does not.
func TestRunsAreDeterministic(t *testing.T) {
	sc := scenario(t, "tree-mishaps")
	// About nine mishaps a run, of every kind, between which the tree
	// still converges.
	sc.Duration, sc.MishapEvery = millis.Duration(5*time.Minute), millis.Duration(30*time.Second)
	first, second := run(t, sc), run(t, sc)
	if !reflect.DeepEqual(first, second) {
		t.Errorf("two runs of seed %d differ: %+v and %+v", sc.Seed, first.Summary, second.Summary)
	}
	sc.Seed++
	other := run(t, sc)
	if reflect.DeepEqual(first.Samples, other.Samples) {
		t.Errorf("seeds %d and %d gave the same samples", sc.Seed-1, sc.Seed)
	}
}

func TestValidateNamesTheField(t *testing.T) {
	good := scenario(t, "tree")
	for name, tt := range map[string]struct {
		change func(*Scenario)
		want   string
	}{
		"capacity":  {func(s *Scenario) { s.Capacity = 0 }, "capacity is 0"},
		"clients":   {func(s *Scenario) { s.Clients = 0 }, "clients per leaf is 0"},
		"lease":     {func(s *Scenario) { s.LeaseLength = millis.Duration(1500 * time.Millisecond) }, "lease length is 1.5s"},
		"refresh":   {func(s *Scenario) { s.RefreshInterval = millis.Duration(2 * time.Minute) }, "refresh interval is 2m0s"},
		"changes":   {func(s *Scenario) { s.ChangeMax = millis.Duration(time.Second) }, "demand changes every 30s to 1s"},
		"step":      {func(s *Scenario) { s.Step = 1 }, "demand step is 1"},
		"duration":  {func(s *Scenario) { s.Duration = millis.Duration(25 * time.Hour) }, "duration is 25h0m0s"},
		"fanout":    {func(s *Scenario) { s.Fanout = []int{3, 0} }, "fanout 0 (level 2)"},
		"too large": {func(s *Scenario) { s.Fanout = []int{1000, 1000} }, "more than 100000 leaf nodes"},
		"mishaps":   {func(s *Scenario) { s.MishapEvery, s.Downtime = millis.Duration(time.Minute), 0 }, "downtime must be > 0"},
	} {
		sc := good
		tt.change(&sc)
		err := sc.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Validate() = %v, want an error containing %q", name, err, tt.want)
		}
		if _, err := Run(sc); err == nil {
			t.Errorf("%s: Run accepted an invalid scenario", name)
		}
	}
	if err := good.Validate(); err != nil {
		t.Errorf("the tree scenario: %v", err)
	}
}
