package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestTemplateMatching(t *testing.T) {
	cfg, err := ParseRepository([]byte(`
resources:
- identifier_glob: "db-*"
  capacity: 10
  algorithm: {kind: STATIC, lease_length: 60, refresh_interval: 15}
- identifier_glob: "db-main"
  capacity: 20
  algorithm: {kind: STATIC, lease_length: 60, refresh_interval: 15}
- identifier_glob: "*"
  capacity: 30
  algorithm: {kind: STATIC, lease_length: 60, refresh_interval: 15}
`))
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]float64{"db-main": 20, "db-other": 10, "web/x": 30} {
		if got := cfg.Match(id).Capacity; got != want {
			t.Errorf("Match(%q).Capacity = %v, want %v", id, got, want)
		}
	}
}

func TestParseRepositoryDesignExample(t *testing.T) {
	cfg, err := ParseRepository([]byte(`
resources:
- identifier_glob: "fair"
  capacity: 1000
  safe_capacity: 10
  description: "fair share example"
  algorithm:
    kind: FAIR_SHARE
    lease_length: 60
    refresh_interval: 15
- identifier_glob: "*"
  capacity: 100
  algorithm:
    kind: PROPORTIONAL_SHARE
    lease_length: 60
    refresh_interval: 15
    learning_mode_duration: 0
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Resources) != 2 || *cfg.Resources[0].SafeCapacity != 10 || cfg.Resources[0].Description != "fair share example" ||
		cfg.Resources[1].Algorithm.Kind != ProportionalShare {
		t.Fatalf("parsed %+v", cfg.Resources)
	}
	if d := cfg.Resources[0].LearningDuration(); d != 60*time.Second {
		t.Errorf("absent learning_mode_duration gave %v, want lease_length 60s", d)
	}
	if d := cfg.Resources[1].LearningDuration(); d != 0 {
		t.Errorf("explicit learning_mode_duration 0 gave %v, want 0", d)
	}
}

// Configurations the original Doorman's server loads (it reads YAML with
// github.com/ghodss/yaml into the generated ResourceRepository: field
// names in any case, enums by name or number, integral floats for
// integers, unknown fields ignored) load here too, with the same meaning.
func TestOriginalConfigsLoad(t *testing.T) {
	tests := []struct {
		name, config string
		check        func(t *testing.T, r *Repository)
	}{
		{"the original's doc/simplecluster/config.yml", `resources:
  - identifier_glob: proportional
    capacity: 100
    safe_capacity: 10
    description: proportional example
    algorithm:
      kind: PROPORTIONAL_SHARE
      lease_length: 15
      refresh_interval: 5
  - identifier_glob: fair
    capacity: 1000
    safe_capacity: 10
    description: fair share example
    algorithm:
      kind: FAIR_SHARE
      lease_length: 15
      refresh_interval: 5
  - identifier_glob: "*"
    capacity: 1000
    safe_capacity: 10
    description: default
    algorithm:
      kind: FAIR_SHARE
      lease_length: 60
      refresh_interval: 15
`, func(t *testing.T, r *Repository) {
			if p := r.Match("proportional"); p.Algorithm.LeaseLength != 15 || p.Algorithm.RefreshInterval != 5 || p.Algorithm.Kind != ProportionalShare {
				t.Errorf("proportional: %+v", p)
			}
		}},
		{"lease_length 5", `
resources:
- identifier_glob: "*"
  capacity: 10
  algorithm: {kind: FAIR_SHARE, lease_length: 5, refresh_interval: 5}
`, func(t *testing.T, r *Repository) {
			if a := r.Resources[0].Algorithm; a.LeaseLength != 5 || a.RefreshInterval != 5 {
				t.Errorf("algorithm %+v", a)
			}
		}},
		{"lease_length 1, the original's least", `
resources:
- identifier_glob: "*"
  capacity: 10
  algorithm: {kind: FAIR_SHARE, lease_length: 1, refresh_interval: 1}
`, func(t *testing.T, r *Repository) {
			if a := r.Resources[0].Algorithm; a.LeaseLength != 1 || a.RefreshInterval != 1 {
				t.Errorf("algorithm %+v", a)
			}
		}},
		{"numeric kinds", `
resources:
- {identifier_glob: "n", capacity: 1, algorithm: {kind: 0, lease_length: 60, refresh_interval: 15}}
- {identifier_glob: "s", capacity: 1, algorithm: {kind: 1, lease_length: 60, refresh_interval: 15}}
- {identifier_glob: "p", capacity: 1, algorithm: {kind: 2, lease_length: 60, refresh_interval: 15}}
- {identifier_glob: "f", capacity: 1, algorithm: {kind: 3, lease_length: 60, refresh_interval: 15}}
`, func(t *testing.T, r *Repository) {
			for i, want := range []Kind{NoAlgorithm, Static, ProportionalShare, FairShare} {
				if got := r.Resources[i].Algorithm.Kind; got != want {
					t.Errorf("template %d: kind %v, want %v", i, got, want)
				}
			}
		}},
		{"JSON, with a numeric kind", `{"resources": [
  {"identifier_glob": "a", "capacity": 50, "algorithm": {"kind": 2, "lease_length": 30, "refresh_interval": 10}},
  {"identifier_glob": "*", "capacity": 10, "safe_capacity": -1,
   "algorithm": {"kind": "FAIR_SHARE", "lease_length": 60, "refresh_interval": 15, "learning_mode_duration": 0}}
]}`, func(t *testing.T, r *Repository) {
			if a := r.Match("a"); a.Capacity != 50 || a.Algorithm.Kind != ProportionalShare {
				t.Errorf("a: %+v", a)
			}
			if star := r.Match("x"); *star.SafeCapacity != -1 || star.LearningDuration() != 0 {
				t.Errorf("*: %+v", star)
			}
		}},
		{"field names in other cases, integral floats", `
Resources:
- Identifier_Glob: "*"
  CAPACITY: 10
  Algorithm: {Kind: STATIC, Lease_Length: 60.0, refresh_INTERVAL: 15.0}
`, func(t *testing.T, r *Repository) {
			if a := r.Resources[0].Algorithm; a.Kind != Static || a.LeaseLength != 60 || a.RefreshInterval != 15 {
				t.Errorf("algorithm %+v", a)
			}
		}},
		{"negative learning_mode_duration: no learning mode", `
resources:
- identifier_glob: "*"
  capacity: 10
  algorithm: {kind: FAIR_SHARE, lease_length: 60, refresh_interval: 15, learning_mode_duration: -1}
`, func(t *testing.T, r *Repository) {
			if d := r.Resources[0].LearningDuration(); d != 0 {
				t.Errorf("learning duration %v, want 0", d)
			}
		}},
		{"a template without algorithm takes the * template's", `
resources:
- identifier_glob: "plain"
  capacity: 7
- identifier_glob: "*"
  capacity: 10
  algorithm:
    kind: PROPORTIONAL_SHARE
    lease_length: 30
    refresh_interval: 10
    parameters:
    - name: decay_factor
      value: "0.5"
    - name: flag
`, func(t *testing.T, r *Repository) {
			p := r.Match("plain")
			if p.Capacity != 7 || p.Algorithm.Kind != ProportionalShare || p.Algorithm.LeaseLength != 30 || len(p.Algorithm.Parameters) != 2 {
				t.Errorf("plain: %+v", p)
			}
			if ps := r.Match("x").Algorithm.Parameters; ps[0] != (Parameter{"decay_factor", "0.5"}) || ps[1] != (Parameter{Name: "flag"}) {
				t.Errorf("parameters %+v", ps)
			}
		}},
		{"empty", ``, func(t *testing.T, r *Repository) {
			if len(r.Resources) != 0 {
				t.Errorf("%+v", r)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseRepository([]byte(tt.config))
			if err != nil {
				t.Fatalf("ParseRepository: %v", err)
			}
			tt.check(t, r)
			if _, err := New(Config{Repository: r}); err != nil {
				t.Fatalf("New: %v", err)
			}
		})
	}
}

// What the original accepts and Sluice refuses is refused with an error
// naming the template, the field and the rule, and saying what the
// original would have done. Other mistakes name the template and rule.
func TestBadConfigsRejected(t *testing.T) {
	tests := map[string]struct{ yaml, want string }{
		"unknown field": {`
resources:
- identifier_glob: "a"
  capacty: 10
`, `template 0 ("a"): line 4: unknown field "capacty" in a template (known: algorithm, capacity, description, identifier_glob, safe_capacity): the original Doorman ignores unknown fields; Sluice refuses them`},
		"unknown algorithm field": {`
resources:
- identifier_glob: "a"
  capacity: 10
  algorithm: {kind: FAIR_SHARE, lease_lenght: 60, refresh_interval: 15}
`, `template 0 ("a"): line 5: unknown field "lease_lenght" in algorithm`},
		"kind missing": {`
resources:
- identifier_glob: "a"
  capacity: 10
  algorithm: {lease_length: 60, refresh_interval: 15}
`, `template 0 ("a"): algorithm kind is missing: the original Doorman then takes NO_ALGORITHM`},
		"kind out of range": {`
resources:
- identifier_glob: "a"
  capacity: 10
  algorithm: {kind: 7, lease_length: 60, refresh_interval: 15}
`, `template 0 ("a"): line 5: algorithm kind is 7, must be 0 to 3`},
		"unknown algorithm": {`
resources:
- identifier_glob: "a"
  capacity: 10
  algorithm: {kind: BEST_EFFORT, lease_length: 60, refresh_interval: 15}
`, `template 0 ("a"): line 5: unknown algorithm kind "BEST_EFFORT"`},
		"negative capacity": {`
resources:
- identifier_glob: "neg"
  capacity: -1
  algorithm: {kind: FAIR_SHARE, lease_length: 60, refresh_interval: 15}
`, `template 0 ("neg"): capacity is -1, must be a finite number >= 0 (the original Doorman takes a negative one`},
		"duplicate glob": {`
resources:
- {identifier_glob: "a", capacity: 1, algorithm: {kind: STATIC, lease_length: 60, refresh_interval: 15}}
- {identifier_glob: "a", capacity: 2, algorithm: {kind: STATIC, lease_length: 60, refresh_interval: 15}}
`, `template 1 ("a"): identifier_glob already used by template 0, so this one would never be used`},
		"star not last": {`
resources:
- identifier_glob: "*"
  capacity: 10
  algorithm: {kind: FAIR_SHARE, lease_length: 60, refresh_interval: 15}
- identifier_glob: "b"
  capacity: 10
  algorithm: {kind: FAIR_SHARE, lease_length: 60, refresh_interval: 15}
`, `template 0 ("*"): the "*" template must be the last one`},
		"malformed yaml": {"resources: [\n- identifier_glob: \"a\"\n  capacity: {", "malformed configuration"},
		"text protobuf (the original does not load it either)": {`resources { identifier_glob: "*" capacity: 10 }`, "malformed configuration"},
		"capacity missing": {`
resources:
- identifier_glob: "a"
  algorithm: {kind: FAIR_SHARE, lease_length: 60, refresh_interval: 15}
`, `template 0 ("a"): capacity is missing`},
		"capacity not a number": {`
resources:
- identifier_glob: "a"
  capacity: lots
  algorithm: {kind: FAIR_SHARE, lease_length: 60, refresh_interval: 15}
`, `template 0 ("a"): line 4: capacity is "lots", not a number`},
		"lease_length missing": {`
resources:
- identifier_glob: "a"
  capacity: 10
  algorithm: {kind: FAIR_SHARE, refresh_interval: 15}
`, `template 0 ("a"): algorithm lease_length is missing`},
		"fractional lease": {`
resources:
- identifier_glob: "a"
  capacity: 10
  algorithm: {kind: FAIR_SHARE, lease_length: 2.5, refresh_interval: 1}
`, `template 0 ("a"): line 5: algorithm lease_length is 2.5, must be a whole number of seconds`},
		"refresh longer than lease": {`
resources:
- identifier_glob: "a"
  capacity: 10
  algorithm: {kind: FAIR_SHARE, lease_length: 10, refresh_interval: 15}
`, `template 0 ("a"): algorithm refresh_interval is 15, must be > 0 and <= lease_length (10)`},
		"zero refresh": {`
resources:
- identifier_glob: "a"
  capacity: 10
  algorithm: {kind: FAIR_SHARE, lease_length: 10, refresh_interval: 0}
`, `template 0 ("a"): algorithm refresh_interval is 0, must be > 0`},
		"lease of a year": {`
resources:
- identifier_glob: "a"
  capacity: 10
  algorithm: {kind: FAIR_SHARE, lease_length: 31536000, refresh_interval: 15}
`, `template 0 ("a"): algorithm lease_length is 31536000, must be > 0 and <= 2592000 seconds (30 days: a longer lease is a unit mistake`},
		"learning mode of a year": {`
resources:
- identifier_glob: "a"
  capacity: 10
  algorithm: {kind: FAIR_SHARE, lease_length: 60, refresh_interval: 15, learning_mode_duration: 31536000}
`, `template 0 ("a"): algorithm learning_mode_duration is 31536000`},
		"missing algorithm and no * template": {`
resources:
- identifier_glob: "a"
  capacity: 10
`, `template 0 ("a"): algorithm is missing, and there is no "*" template`},
		"bad glob": {`
resources:
- identifier_glob: "a["
  capacity: 10
  algorithm: {kind: FAIR_SHARE, lease_length: 60, refresh_interval: 15}
`, `template 0 ("a["): identifier_glob "a[" is not a valid glob`},
		"top level not a mapping": {`- identifier_glob: a`, "the top level must be a mapping"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseRepository([]byte(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ParseRepository error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestLoadRepository(t *testing.T) {
	file := filepath.Join(t.TempDir(), "doorman.yaml")
	if err := os.WriteFile(file, []byte("resources:\n- {identifier_glob: a, capacity: -2, algorithm: {kind: 3, lease_length: 5, refresh_interval: 5}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadRepository(file)
	if err == nil || !strings.Contains(err.Error(), `server: template 0 ("a"): capacity is -2`) || !strings.Contains(err.Error(), "(in "+file+")") {
		t.Fatalf("LoadRepository: %v, want the template's error and the file", err)
	}
	if _, err := LoadRepository(filepath.Join(t.TempDir(), "none.yaml")); err == nil || !strings.Contains(err.Error(), "reading configuration") {
		t.Fatalf("LoadRepository of a missing file: %v", err)
	}
}
