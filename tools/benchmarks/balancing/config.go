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

// ms picks a duration by size.
func ms(z Size, full, ci time.Duration) millis.Duration {
	return millis.Duration(benchrun.Pick(z, full, ci))
}

func (c Config) withDefaults() Config {
	if c.Scenarios == nil {
		c.Scenarios = Scenarios()
	}
	z := c.Size
	benchrun.Default(&c.Seed, 1)
	benchrun.Default(&c.Timeout, millis.Duration(time.Second))
	benchrun.Default(&c.GCPercent, benchrun.DefaultGCPercent)
	five := millis.Duration(5 * time.Millisecond)
	s := &c.ScaleOut
	benchrun.Default(&s.Servers, 3)
	benchrun.Default(&s.Added, 3)
	benchrun.Default(&s.Workers, 4)
	benchrun.Default(&s.Service, five)
	benchrun.Default(&s.Load, 0.7)
	benchrun.Default(&s.Warmup, ms(z, time.Second, 200*time.Millisecond))
	benchrun.Default(&s.Steady, ms(z, 10*time.Second, 600*time.Millisecond))
	benchrun.Default(&s.After, ms(z, 30*time.Second, 3*time.Second))
	benchrun.Default(&s.ColdFactor, 5)
	benchrun.Default(&s.ColdWindow, ms(z, 10*time.Second, 600*time.Millisecond))
	if z == CI {
		benchrun.Default(&s.SlowStartWindow, s.ColdWindow)
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
	benchrun.Default(&h.Service, five)
	benchrun.Default(&h.Load, 0.8)
	benchrun.Default(&h.Warmup, ms(z, time.Second, 200*time.Millisecond))
	benchrun.Default(&h.Duration, ms(z, 20*time.Second, 1500*time.Millisecond))

	sh := &c.Shard
	benchrun.Default(&sh.Servers, 10)
	benchrun.Default(&sh.Workers, 2)
	benchrun.Default(&sh.CacheSize, 2000)
	benchrun.Default(&sh.Hit, millis.Duration(time.Millisecond))
	benchrun.Default(&sh.Miss, millis.Duration(10*time.Millisecond))
	benchrun.Default(&sh.Keys, 100_000)
	benchrun.Default(&sh.Zipf, 1.1)
	benchrun.Default(&sh.HotShare, 0.3)
	benchrun.Default(&sh.Rate, 2000)
	benchrun.Default(&sh.Warmup, ms(z, 10*time.Second, 300*time.Millisecond))
	benchrun.Default(&sh.Duration, ms(z, 20*time.Second, 1500*time.Millisecond))
	benchrun.Default(&sh.Sample, millis.Duration(10*time.Millisecond))
	benchrun.Default(&sh.Probe, benchrun.Pick(z, 2000, 200))
	benchrun.Default(&sh.Fleets, benchrun.Pick(z, 100, 5))
	if z == Full {
		benchrun.Default(&sh.LooseFactor, 10)
	}

	e := &c.Erroring
	benchrun.Default(&e.Servers, 4)
	benchrun.Default(&e.Many, 3)
	benchrun.Default(&e.Workers, 4)
	benchrun.Default(&e.Service, five)
	benchrun.Default(&e.Rate, 800)
	benchrun.Default(&e.ErrorShare, 0.5)
	benchrun.Default(&e.Duration, ms(z, 20*time.Second, 1500*time.Millisecond))
	benchrun.Default(&e.Sample, millis.Duration(10*time.Millisecond))
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
	if c.Timeout < 0 || c.Timeout.D() > load.MaxTimeout {
		return fmt.Errorf("balancing: Timeout is %v, must be in (0, %v]", c.Timeout, load.MaxTimeout)
	}
	var errs []error
	check := func(bad bool, format string, args ...any) {
		if bad {
			errs = append(errs, fmt.Errorf("balancing: "+format, args...))
		}
	}
	ints := func(name string, v, lo, hi int) {
		check(v < lo || v > hi, "%s is %d, must be in [%d, %d]", name, v, lo, hi)
	}
	durs := func(name string, v, lo, hi time.Duration) {
		check(v < lo || v > hi, "%s is %v, must be in [%v, %v]", name, v, lo, hi)
	}
	floats := func(name string, v, lo, hi float64) {
		check(!(v > lo && v <= hi), "%s is %v, must be in (%v, %v]", name, v, lo, hi)
	}
	s := c.ScaleOut
	ints("ScaleOut.Servers", s.Servers, 1, MaxServers)
	ints("ScaleOut.Added", s.Added, 1, MaxServers-s.Servers)
	ints("ScaleOut.Workers", s.Workers, 1, MaxWorkers)
	durs("ScaleOut.Service", s.Service.D(), MinService, MaxService)
	floats("ScaleOut.Load", s.Load, 0, 10)
	durs("ScaleOut.Warmup", s.Warmup.D(), 0, MaxStretch)
	durs("ScaleOut.Steady", s.Steady.D(), 100*time.Millisecond, MaxStretch)
	durs("ScaleOut.After", s.After.D(), 100*time.Millisecond, MaxStretch)
	check(!(s.ColdFactor >= 1 && s.ColdFactor <= MaxColdCost), "ScaleOut.ColdFactor is %v, must be in [1, %d]", s.ColdFactor, MaxColdCost)
	durs("ScaleOut.ColdWindow", s.ColdWindow.D(), 0, MaxStretch)
	durs("ScaleOut.SlowStartWindow", s.SlowStartWindow.D(), 0, MaxStretch)
	if s.WithConfig != "" {
		_, err := serviceconfig.Parse([]byte(s.WithConfig))
		check(err != nil, "ScaleOut.WithConfig: %v", err)
	}

	h := c.Heterogeneous
	ints("Heterogeneous.Workers' length", len(h.Workers), 1, MaxServers)
	check(len(h.Weights) != len(h.Workers), "Heterogeneous.Weights has %d weights for %d servers, must have one per server", len(h.Weights), len(h.Workers))
	for i, w := range h.Workers {
		ints(fmt.Sprintf("Heterogeneous.Workers[%d]", i), w, 1, MaxWorkers)
	}
	for i, w := range h.Weights {
		floats(fmt.Sprintf("Heterogeneous.Weights[%d]", i), w, 0, 1e6)
	}
	durs("Heterogeneous.Service", h.Service.D(), MinService, MaxService)
	floats("Heterogeneous.Load", h.Load, 0, 10)
	durs("Heterogeneous.Warmup", h.Warmup.D(), 0, MaxStretch)
	durs("Heterogeneous.Duration", h.Duration.D(), 100*time.Millisecond, MaxStretch)

	sh := c.Shard
	ints("Shard.Servers", sh.Servers, 2, MaxServers-1) // the probe adds one
	ints("Shard.Workers", sh.Workers, 1, MaxWorkers)
	ints("Shard.CacheSize", sh.CacheSize, 1, MaxCache)
	durs("Shard.Hit", sh.Hit.D(), MinService, MaxService)
	durs("Shard.Miss", sh.Miss.D(), MinService, MaxService)
	check(sh.Miss <= sh.Hit, "Shard.Miss is %v, must be more than Shard.Hit, %v", sh.Miss, sh.Hit)
	ints("Shard.Keys", sh.Keys, 2, MaxKeys)
	floats("Shard.Zipf", sh.Zipf, 1, 10) // rand.Zipf needs s > 1
	check(!(sh.HotShare >= 0 && sh.HotShare < 1), "Shard.HotShare is %v, must be in [0, 1)", sh.HotShare)
	floats("Shard.Rate", sh.Rate, 0, MaxRate)
	durs("Shard.Warmup", sh.Warmup.D(), 0, MaxStretch)
	durs("Shard.Duration", sh.Duration.D(), 100*time.Millisecond, MaxStretch)
	durs("Shard.Sample", sh.Sample.D(), time.Millisecond, time.Second)
	ints("Shard.Probe", sh.Probe, 1, min(MaxProbe, sh.Keys))
	ints("Shard.Fleets", sh.Fleets, 1, 10_000)
	check(sh.LooseFactor > 0 && sh.LooseFactor <= 1 || sh.LooseFactor > 1e6, "Shard.LooseFactor is %v, must be > 1 (or <= 0: no third row)", sh.LooseFactor)

	e := c.Erroring
	ints("Erroring.Servers", e.Servers, 2, MaxServers)
	ints("Erroring.Many", e.Many, 1, e.Servers-1)
	ints("Erroring.Workers", e.Workers, 1, MaxWorkers)
	durs("Erroring.Service", e.Service.D(), MinService, MaxService)
	floats("Erroring.Rate", e.Rate, 0, MaxRate)
	floats("Erroring.ErrorShare", e.ErrorShare, 0, 1)
	durs("Erroring.Duration", e.Duration.D(), 100*time.Millisecond, MaxStretch)
	durs("Erroring.Sample", e.Sample.D(), time.Millisecond, time.Second)
	rate := func(name string, r float64) {
		check(r > MaxRate, "%s's offered rate would be %.0f calls/s, more than %d", name, r, MaxRate)
	}
	rate("ScaleOut", s.Load*float64(s.Servers)*PoolCapacity(s.Workers, s.Service.D()))
	rate("Heterogeneous", h.Load*h.Capacity())
	if len(errs) > 0 {
		return errs[0]
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
