package faults

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

func TestConfigValidate(t *testing.T) {
	ok := Config{Scenario: Kill, Setup: NoPolicy}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string // "" for valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"every field set", func(c *Config) {
			*c = Config{Scenario: Latency, Setup: HedgePolicy, Rate: 50, Duration: millis.Duration(time.Second), Deadline: millis.Duration(time.Second), Format: "json", Payload: 10}
		}, ""},
		{"no scenario", func(c *Config) { c.Scenario = "" }, "Scenario is empty"},
		{"unknown scenario", func(c *Config) { c.Scenario = "flood" }, `Scenario is "flood"`},
		{"no setup", func(c *Config) { c.Setup = "" }, "Setup is empty"},
		{"unknown setup", func(c *Config) { c.Setup = "pray" }, `Setup is "pray"`},
		{"negative rate", func(c *Config) { c.Rate = -1 }, "Rate is -1"},
		{"rate too high", func(c *Config) { c.Rate = MaxRate + 1 }, "Rate is 10001"},
		{"negative duration", func(c *Config) { c.Duration = millis.Duration(-time.Second) }, "Duration is -1s"},
		{"duration too long", func(c *Config) { c.Duration = millis.Duration(MaxDuration + 1) }, "Duration is"},
		{"negative fault time", func(c *Config) { c.FaultAt = millis.Duration(-time.Second) }, "FaultAt is -1s"},
		{"fault after the end", func(c *Config) { c.Duration, c.FaultAt = millis.Duration(time.Second), millis.Duration(2*time.Second) }, "FaultAt is 2s, must be before the end"},
		{"negative deadline", func(c *Config) { c.Deadline = -1 }, "Deadline is"},
		{"format", func(c *Config) { c.Format = "thrift" }, `Format is "thrift"`},
		{"payload", func(c *Config) { c.Payload = MaxPayload + 1 }, "Payload is"},
		{"too many calls", func(c *Config) { c.Rate, c.Duration = MaxRate, millis.Duration(MaxDuration) }, "Rate x Duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate: %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	c := Config{Scenario: Kill, Setup: NoPolicy}.withDefaults()
	if c.Rate != DefaultRate || c.Duration.D() != 15*time.Second || c.FaultAt.D() != 3*time.Second || c.Deadline.D() != DefaultDeadline ||
		c.Format != "raw" || c.Payload != DefaultPayload || c.calls() != 3000 {
		t.Errorf("kill defaults: %+v, %d calls", c, c.calls())
	}
	if c := (Config{Scenario: Kill, Setup: NoPolicy, Duration: millis.Duration(2 * time.Second)}).withDefaults(); c.FaultAt.D() != 500*time.Millisecond {
		t.Errorf("kill over 2s: FaultAt %v, want a quarter in", c.FaultAt)
	}
	if c := (Config{Scenario: Latency, Setup: NoPolicy, FaultAt: millis.Duration(time.Second)}).withDefaults(); c.FaultAt != 0 {
		t.Errorf("latency: FaultAt %v, want 0 (the fault is there from the start)", c.FaultAt)
	}
	if m := (Config{Scenario: Declined, Format: "json"}).method(); m != "declined.json" {
		t.Errorf("declined as JSON calls %q", m)
	}
}

func TestScenariosRunsAndSetups(t *testing.T) {
	for _, s := range Scenarios() {
		if s.Describe() == "" || len(s.Setups()) == 0 {
			t.Errorf("%s: no description or no setups", s)
		}
		for _, z := range []Size{Full, CI} {
			if _, err := (Suite{Scenarios: []Scenario{s}, Size: z}).Configs(); err != nil {
				t.Errorf("%s at %s: %v", s, z, err)
			}
		}
		for _, st := range s.Setups() {
			if _, err := st.serviceConfig(); err != nil {
				t.Errorf("%s: %v", st, err)
			}
		}
	}
	if r := runs(t, Freeze, CI); len(r) != 3 || r[0].Duration.D()-r[0].FaultAt.D() < 5*time.Second {
		t.Errorf("freeze at CI size: %+v; want three setups watching over 5 s after the freeze", r)
	}
	// The slow peer's share is counted from 1 s in: the CI run must go on
	// long enough to count it on a few hundred calls.
	if r := runs(t, Latency, CI); len(r) != 3 || r[0].Duration.D() < 3*time.Second {
		t.Errorf("latency at CI size: %+v; want three setups of at least 3 s", r)
	}
	if r := runs(t, Erroring, CI); len(r) != 3 || r[0].FaultAt != 0 {
		t.Errorf("erroring at CI size: %+v; want three setups, the fault there from the start", r)
	}
	if r, err := (Suite{Scenarios: []Scenario{"flood"}}).Configs(); err == nil {
		t.Errorf("an unknown scenario has runs: %+v", r)
	}
}

// runs returns the Configs of scenario s at size z.
func runs(t *testing.T, s Scenario, z Size) []Config {
	t.Helper()
	cfgs, err := Suite{Scenarios: []Scenario{s}, Size: z}.Configs()
	if err != nil {
		t.Fatal(err)
	}
	return cfgs
}

func TestParseScenarios(t *testing.T) {
	all, err := ParseScenarios("all")
	if err != nil || len(all) != len(Scenarios()) {
		t.Errorf("all: %v, %v", all, err)
	}
	got, err := ParseScenarios("kill, freeze,kill")
	if err != nil || len(got) != 2 || got[0] != Kill || got[1] != Freeze {
		t.Errorf("kill, freeze,kill: %v, %v; want [kill freeze]", got, err)
	}
	if _, err := ParseScenarios("kill,flood"); err == nil || !strings.Contains(err.Error(), `"flood"`) {
		t.Errorf("flood: %v, want an error naming it", err)
	}
}

func TestSuiteConfigs(t *testing.T) {
	cfgs, err := Suite{Scenarios: []Scenario{Kill, Busy}, Size: CI, Rate: 50, Duration: 3 * time.Second}.Configs()
	if err != nil {
		t.Fatal(err)
	}
	if len(cfgs) != 4 {
		t.Fatalf("%d runs, want 3 kill and 1 busy", len(cfgs))
	}
	for _, c := range cfgs {
		if c.Rate != 50 || c.Duration.D() != 3*time.Second || c.FaultAt != 0 {
			t.Errorf("%s/%s: %+v; want the overrides, FaultAt left to its default", c.Scenario, c.Setup, c)
		}
	}
	if _, err := (Suite{Rate: -1}).Configs(); err == nil {
		t.Error("a negative rate is accepted")
	}
}
