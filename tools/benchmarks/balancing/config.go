package balancing

import (
	"fmt"
	"slices"
	"time"

	"github.com/sluice-rpc/sluice/serviceconfig"
	"github.com/sluice-rpc/sluice/tools/benchmarks/load"
	"github.com/sluice-rpc/sluice/tools/internal/benchrun"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

// Scenario is one of the benchmark's scenarios, each run with the feature
// it measures and without it.
type Scenario string

// The scenarios, in the order Run runs them.
const (
	ScaleOut      Scenario = "scale-out"     // cold servers join a loaded fleet; slow start
	Heterogeneous Scenario = "heterogeneous" // servers of 1, 2 and 4 workers; weights, load reports
	Shard         Scenario = "shard"         // cached servers, Zipf keys and a hot key; shard keys
	Erroring      Scenario = "erroring"      // servers answering UNEXPECTED; outlier ejection
)

// Scenarios returns every scenario, in Run's order.
func Scenarios() []Scenario { return []Scenario{ScaleOut, Heterogeneous, Shard, Erroring} }

// ParseScenarios reads a comma-separated list of scenario names; "all" is
// every scenario. The list keeps Run's order whatever order it is given in.
func ParseScenarios(list string) ([]Scenario, error) {
	picked, err := benchrun.ParseList(list, Scenarios(), "scenario")
	if err != nil {
		return nil, fmt.Errorf("balancing: %w", err)
	}
	return slices.DeleteFunc(Scenarios(), func(s Scenario) bool { return !slices.Contains(picked, s) }), nil
}

// Size is how long a run's stretches are: Full, the (about five
// minutes in all), or CI, a second or two a run (the cold start and the
// slow-start window shrunk to match).
type Size = benchrun.Size

// The sizes.
const (
	Full = benchrun.Full
	CI   = benchrun.CI
)

// Config is a balancing benchmark: the scenarios to run and their
// parameters. Its zero value runs every scenario at full size with the
// issue's parameters; a zero field takes its size's default.
type Config struct {
	Scenarios []Scenario      `json:"scenarios"`  // in Run's order; nil: all
	Size      Size            `json:"size"`       // sets the default stretches
	Seed      uint64          `json:"seed"`       // of every draw, both rows alike; default 1
	Timeout   millis.Duration `json:"timeout_ms"` // each call's deadline; default 1 s
	// GCPercent is GOGC while Run runs (the generator, client and servers
	// share one process). Default 400; negative keeps the process's.
	GCPercent int `json:"gc_percent"`

	ScaleOut      ScaleOutConfig      `json:"scale_out"`
	Heterogeneous HeterogeneousConfig `json:"heterogeneous"`
	Shard         ShardConfig         `json:"shard"`
	Erroring      ErroringConfig      `json:"erroring"`

	// Progress, if not nil, is told what Run is doing as it goes.
	Progress func(string) `json:"-"`
}

// ScaleOutConfig is the scale-out scenario: Servers warm servers at Load
// times their capacity; after Warmup and Steady, Added more start cold
// (ColdFactor times the cost, falling linearly to 1 over ColdWindow) and
// join; the run goes on for After. Defaults given as (full, CI).
type ScaleOutConfig struct {
	Servers int             `json:"servers"`    // default 3
	Added   int             `json:"added"`      // default 3
	Workers int             `json:"workers"`    // per server, default 4
	Service millis.Duration `json:"service_ms"` // default 5 ms
	Load    float64         `json:"load"`       // of the first Servers' capacity, default 0.7
	Warmup  millis.Duration `json:"warmup_ms"`  // left out: 1 s, 200 ms
	Steady  millis.Duration `json:"steady_ms"`  // before the scale-out: 10 s, 600 ms
	// After is the stretch after it: 30 s, 3 s (at 1.2 s the new servers'
	// first calls, before their latency marks them cold, set the p99).
	After      millis.Duration `json:"after_ms"`
	ColdFactor float64         `json:"cold_factor"`    // default 5
	ColdWindow millis.Duration `json:"cold_window_ms"` // 10 s, 600 ms
	// SlowStartWindow is the "with" row's window; 0: the library's (10 s),
	// the ColdWindow at the CI size.
	SlowStartWindow millis.Duration `json:"slow_start_window_ms"`
	// WithConfig, if set, is the "with" row's service config (JSON).
	WithConfig string `json:"with_config"`
}

// HeterogeneousConfig is the heterogeneous scenario: one server per entry
// of Workers, all with the same Service time, weighted Weights in the
// "with" row (all 1 in the other), at Load times their total capacity.
type HeterogeneousConfig struct {
	Workers  []int           `json:"workers"`     // default 1, 2, 4
	Weights  []float64       `json:"weights"`     // default: as Workers
	Service  millis.Duration `json:"service_ms"`  // default 5 ms
	Load     float64         `json:"load"`        // default 0.8
	Warmup   millis.Duration `json:"warmup_ms"`   // left out: 1 s, 200 ms
	Duration millis.Duration `json:"duration_ms"` // measured: 20 s, 1.5 s
}

// ShardConfig is the shard scenario: Servers servers, each with an LRU
// cache of CacheSize keys (a hit costs Hit, a miss Miss and then caches
// the key) and Workers workers, called at Rate with keys drawn from Keys
// keys by a Zipf distribution of exponent Zipf, or, HotShare of the
// calls, one hot key. Hit and Miss are at least MinService: on Linux a Go
// timer under a millisecond fires after about 1.1 ms (load.Pool), so the
// report gives the costs as served (ShardRow.HitCost, MissCost).
type ShardConfig struct {
	Servers   int             `json:"servers"`     // default 10
	Workers   int             `json:"workers"`     // default 2
	CacheSize int             `json:"cache_size"`  // default 2,000
	Hit       millis.Duration `json:"hit_ms"`      // default 1 ms
	Miss      millis.Duration `json:"miss_ms"`     // default 10 ms, more than Hit
	Keys      int             `json:"keys"`        // default 100,000
	Zipf      float64         `json:"zipf"`        // default 1.1
	HotShare  float64         `json:"hot_share"`   // default 0.3
	Rate      float64         `json:"rate"`        // default 2,000
	Warmup    millis.Duration `json:"warmup_ms"`   // fills the caches: 10 s, 300 ms
	Duration  millis.Duration `json:"duration_ms"` // measured: 20 s, 1.5 s
	// Sample is how often the client's peers are read to check the
	// bounded load (ShardRow.Bound): 10 ms.
	Sample millis.Duration `json:"sample_ms"`
	// LooseFactor > 0 adds a third row with this shardBalanceFactor, to
	// tell the ring's effect from the bound's: 10 at full size, none at CI.
	LooseFactor float64 `json:"loose_factor"`
	// Probe keys are routed one at a time to check the ring: 2,000, 200.
	Probe int `json:"probe"`
	// Fleets more fleets on random ports show the spread of a leave's
	// moves: 100, 5.
	Fleets int `json:"fleets"`
}

// ErroringConfig is the erroring scenario: Servers servers at Rate, of
// which the first one (then the first Many) answer UNEXPECTED to
// ErrorShare of their calls, after the service time.
type ErroringConfig struct {
	Servers    int             `json:"servers"`     // default 4
	Many       int             `json:"many"`        // default 3
	Workers    int             `json:"workers"`     // default 4
	Service    millis.Duration `json:"service_ms"`  // default 5 ms
	Rate       float64         `json:"rate"`        // calls/s, default 800
	ErrorShare float64         `json:"error_share"` // default 0.5
	Duration   millis.Duration `json:"duration_ms"` // 20 s, 1.5 s
	Sample     millis.Duration `json:"sample_ms"`   // reads of the peers: 10 ms
}

// Bounds of a Config.
const (
	MaxServers  = 32
	MaxWorkers  = 1000
	MaxStretch  = 10 * time.Minute
	MaxRate     = 20_000
	MaxKeys     = 1_000_000
	MaxCache    = 1_000_000
	MaxProbe    = 100_000
	MaxService  = time.Second
	MinService  = time.Millisecond // a Go timer's floor on Linux
	MaxColdCost = 100
)

// field is one of a Config's settings: def, if not nil, sets its default
// for a size if it is zero; err is its range's check, nil if it holds,
// as it read when listed.
type field struct {
	def func(Size)
	err error
}

// set sets *v to full or ci by size if it is zero.
func set[T comparable](v *T, full, ci T) func(Size) {
	return func(z Size) { benchrun.Default(v, benchrun.Pick(z, full, ci)) }
}

// check returns an error of format and args if bad, else nil.
func check(bad bool, format string, args ...any) error {
	if bad {
		return fmt.Errorf(format, args...)
	}
	return nil
}

// in is the number at v, named name: default full or ci, in [lo, hi].
func in[T int | millis.Duration](name string, v *T, full, ci, lo, hi T) field {
	return field{set(v, full, ci), check(*v < lo || *v > hi, "%s is %v, must be in [%v, %v]", name, *v, lo, hi)}
}

// over is in for a float, in (lo, hi].
func over(name string, v *float64, full, ci, lo, hi float64) field {
	return field{set(v, full, ci), check(!(*v > lo && *v <= hi), "%s is %v, must be in (%v, %v]", name, *v, lo, hi)}
}

// fields lists c's settings in the order Validate checks them, their
// ranges read from c as it is.
func (c *Config) fields() []field {
	const ms, sec = millis.Duration(time.Millisecond), millis.Duration(time.Second)
	minS, maxS, maxT := millis.Duration(MinService), millis.Duration(MaxService), millis.Duration(MaxStretch)
	s, h, sh, e := &c.ScaleOut, &c.Heterogeneous, &c.Shard, &c.Erroring
	f := []field{
		{def: set(&c.Seed, 1, 1)},
		{set(&c.Timeout, sec, sec), check(c.Timeout < 0 || c.Timeout.D() > load.MaxTimeout, "Timeout is %v, must be in (0, %v]", c.Timeout, load.MaxTimeout)},
		{def: set(&c.GCPercent, benchrun.DefaultGCPercent, benchrun.DefaultGCPercent)},
		in("ScaleOut.Servers", &s.Servers, 3, 3, 1, MaxServers),
		in("ScaleOut.Added", &s.Added, 3, 3, 1, MaxServers-s.Servers),
		in("ScaleOut.Workers", &s.Workers, 4, 4, 1, MaxWorkers),
		in("ScaleOut.Service", &s.Service, 5*ms, 5*ms, minS, maxS),
		over("ScaleOut.Load", &s.Load, 0.7, 0.7, 0, 10),
		in("ScaleOut.Warmup", &s.Warmup, sec, 200*ms, 0, maxT),
		in("ScaleOut.Steady", &s.Steady, 10*sec, 600*ms, 100*ms, maxT),
		in("ScaleOut.After", &s.After, 30*sec, 3*sec, 100*ms, maxT),
		{set(&s.ColdFactor, 5, 5), check(!(s.ColdFactor >= 1 && s.ColdFactor <= MaxColdCost),
			"ScaleOut.ColdFactor is %v, must be in [1, %d]", s.ColdFactor, MaxColdCost)},
		in("ScaleOut.ColdWindow", &s.ColdWindow, 10*sec, 600*ms, 0, maxT),
		in("ScaleOut.SlowStartWindow", &s.SlowStartWindow, 0, 0, 0, maxT), // CI: ColdWindow (withDefaults)
	}
	if s.WithConfig != "" {
		_, err := serviceconfig.Parse([]byte(s.WithConfig))
		f = append(f, field{err: check(err != nil, "ScaleOut.WithConfig: %v", err)})
	}
	f = append(f, in("Heterogeneous.Workers' length", new(len(h.Workers)), 0, 0, 1, MaxServers),
		field{err: check(len(h.Weights) != len(h.Workers), "Heterogeneous.Weights has %d weights for %d servers, must have one per server", len(h.Weights), len(h.Workers))})
	for i := range h.Workers {
		f = append(f, in(fmt.Sprintf("Heterogeneous.Workers[%d]", i), &h.Workers[i], 0, 0, 1, MaxWorkers))
	}
	for i := range h.Weights {
		f = append(f, over(fmt.Sprintf("Heterogeneous.Weights[%d]", i), &h.Weights[i], 0, 0, 0, 1e6))
	}
	return append(f,
		in("Heterogeneous.Service", &h.Service, 5*ms, 5*ms, minS, maxS),
		over("Heterogeneous.Load", &h.Load, 0.8, 0.8, 0, 10),
		in("Heterogeneous.Warmup", &h.Warmup, sec, 200*ms, 0, maxT),
		in("Heterogeneous.Duration", &h.Duration, 20*sec, 1500*ms, 100*ms, maxT),

		in("Shard.Servers", &sh.Servers, 10, 10, 2, MaxServers-1), // the probe adds one
		in("Shard.Workers", &sh.Workers, 2, 2, 1, MaxWorkers),
		in("Shard.CacheSize", &sh.CacheSize, 2000, 2000, 1, MaxCache),
		in("Shard.Hit", &sh.Hit, ms, ms, minS, maxS),
		in("Shard.Miss", &sh.Miss, 10*ms, 10*ms, minS, maxS),
		field{err: check(sh.Miss <= sh.Hit, "Shard.Miss is %v, must be more than Shard.Hit, %v", sh.Miss, sh.Hit)},
		in("Shard.Keys", &sh.Keys, 100_000, 100_000, 2, MaxKeys),
		over("Shard.Zipf", &sh.Zipf, 1.1, 1.1, 1, 10), // rand.Zipf needs s > 1
		field{set(&sh.HotShare, 0.3, 0.3), check(!(sh.HotShare >= 0 && sh.HotShare < 1), "Shard.HotShare is %v, must be in [0, 1)", sh.HotShare)},
		over("Shard.Rate", &sh.Rate, 2000, 2000, 0, MaxRate),
		in("Shard.Warmup", &sh.Warmup, 10*sec, 300*ms, 0, maxT),
		in("Shard.Duration", &sh.Duration, 20*sec, 1500*ms, 100*ms, maxT),
		in("Shard.Sample", &sh.Sample, 10*ms, 10*ms, ms, sec),
		in("Shard.Probe", &sh.Probe, 2000, 200, 1, min(MaxProbe, sh.Keys)),
		in("Shard.Fleets", &sh.Fleets, 100, 5, 1, 10_000),
		field{set(&sh.LooseFactor, 10, 0), check(sh.LooseFactor > 0 && sh.LooseFactor <= 1 || sh.LooseFactor > 1e6,
			"Shard.LooseFactor is %v, must be > 1 (or <= 0: no third row)", sh.LooseFactor)},

		in("Erroring.Servers", &e.Servers, 4, 4, 2, MaxServers),
		in("Erroring.Many", &e.Many, 3, 3, 1, e.Servers-1),
		in("Erroring.Workers", &e.Workers, 4, 4, 1, MaxWorkers),
		in("Erroring.Service", &e.Service, 5*ms, 5*ms, minS, maxS),
		over("Erroring.Rate", &e.Rate, 800, 800, 0, MaxRate),
		over("Erroring.ErrorShare", &e.ErrorShare, 0.5, 0.5, 0, 1),
		in("Erroring.Duration", &e.Duration, 20*sec, 1500*ms, 100*ms, maxT),
		in("Erroring.Sample", &e.Sample, 10*ms, 10*ms, ms, sec),
		rate("ScaleOut", s.Load*float64(s.Servers)*PoolCapacity(s.Workers, s.Service.D())),
		rate("Heterogeneous", h.Load*h.Capacity()))
}

// rate checks a scenario's offered rate.
func rate(name string, r float64) field {
	return field{err: check(r > MaxRate, "%s's offered rate would be %.0f calls/s, more than %d", name, r, MaxRate)}
}

func (c Config) withDefaults() Config {
	if c.Scenarios == nil {
		c.Scenarios = Scenarios()
	}
	h := &c.Heterogeneous
	if h.Workers == nil {
		h.Workers = []int{1, 2, 4}
	}
	if h.Weights == nil {
		for _, w := range h.Workers {
			h.Weights = append(h.Weights, float64(w))
		}
	}
	for _, f := range c.fields() {
		if f.def != nil {
			f.def(c.Size)
		}
	}
	if c.Size == CI {
		benchrun.Default(&c.ScaleOut.SlowStartWindow, c.ScaleOut.ColdWindow)
	}
	return c
}

// Validate reports the first field out of range, naming it; zero fields
// take their defaults.
func (c Config) Validate() error {
	if c.Scenarios != nil && len(c.Scenarios) == 0 {
		return fmt.Errorf("balancing: Scenarios is empty; give at least one of %s (nil means all)", benchrun.Names(Scenarios()))
	}
	for _, s := range c.Scenarios {
		if !slices.Contains(Scenarios(), s) {
			return fmt.Errorf("balancing: Scenarios holds %q, want scenarios among %s", s, benchrun.Names(Scenarios()))
		}
	}
	if c.Size != Full && c.Size != CI {
		return fmt.Errorf("balancing: Size is %d, must be Full or CI", c.Size)
	}
	c = c.withDefaults()
	for _, f := range c.fields() {
		if f.err != nil {
			return fmt.Errorf("balancing: %w", f.err)
		}
	}
	return nil
}

// PoolCapacity is a pool's calls per second: workers / service time.
func PoolCapacity(workers int, service time.Duration) float64 {
	return float64(workers) / service.Seconds()
}

// Capacity is the heterogeneous servers' calls per second in all.
func (h HeterogeneousConfig) Capacity() float64 {
	var c float64
	for _, w := range h.Workers {
		c += PoolCapacity(w, h.Service.D())
	}
	return c
}

func (c Config) progress(format string, args ...any) {
	if c.Progress != nil {
		c.Progress(fmt.Sprintf(format, args...))
	}
}
