package shed

import (
	"cmp"
	"fmt"
	"math"
	"time"

	"github.com/sluice-rpc/sluice/clock"
)

// Defaults of a Config: what its zero fields mean.
const (
	DefaultInitialLimit  = 20
	DefaultMinLimit      = 1
	DefaultMaxLimit      = 1000
	DefaultBuffer        = 0.25
	DefaultWindow        = 100 * time.Millisecond
	DefaultProbeInterval = 5 * time.Second
	DefaultProbeJitter   = 0.1
	DefaultProbeLimit    = 3
	DefaultProbeSamples  = 25
)

// MaxProbeSamples bounds ProbeSamples: a probe keeps its samples in a fixed
// array, so a Limiter allocates nothing while it runs.
const MaxProbeSamples = 256

// Config configures a Limiter. Its zero value is the default
// configuration, and so is each zero field: set only what you change. For
// the two fields where zero is itself a useful setting, Buffer and
// ProbeJitter, 0 means the default and a negative value means zero (no
// buffer, no jitter). New rejects a Config that fails Validate.
type Config struct {
	// InitialLimit is the limit a Limiter starts from (after its first
	// probe), between MinLimit and MaxLimit. 0 means DefaultInitialLimit
	// (20), moved into [MinLimit, MaxLimit] if it falls outside.
	InitialLimit int
	// MinLimit and MaxLimit bound the limit: 1 <= MinLimit <= MaxLimit.
	// 0 means DefaultMinLimit (1) and DefaultMaxLimit (1,000).
	MinLimit, MaxLimit int
	// Buffer is how much slower than the no-load latency requests may be,
	// as a fraction of it, before the limit shrinks. 0 means DefaultBuffer
	// (0.25); a negative value means no buffer: the limit shrinks as soon
	// as requests are slower than the no-load latency.
	Buffer float64
	// Window is how often the limit is updated from the latencies of the
	// requests that finished since the last update. 0 means DefaultWindow
	// (100 ms).
	Window time.Duration
	// ProbeInterval is the time between probes of the no-load latency, at
	// least Window. 0 means DefaultProbeInterval (5 s).
	ProbeInterval time.Duration
	// ProbeJitter spreads probes: each interval is ProbeInterval times a
	// random factor in [1-ProbeJitter, 1+ProbeJitter]. At most 1; 0 means
	// DefaultProbeJitter (0.1); a negative value means no jitter.
	ProbeJitter float64
	// ProbeLimit is the limit during a probe, low enough that requests do
	// not wait for each other. 0 means DefaultProbeLimit (3).
	ProbeLimit int
	// ProbeSamples is how many requests admitted during a probe must finish
	// before it ends; their median latency is the no-load latency. 1 to
	// MaxProbeSamples; 0 means DefaultProbeSamples (25).
	ProbeSamples int
	// Clock is the Limiter's time source; nil means clock.Real. A Channel
	// times its shedding on its own clock, and refuses a Config that sets
	// this.
	Clock clock.Clock
}

// Validate reports the first field that breaks its rule, naming it and
// what it must be. Zero fields are valid: they mean the defaults.
func (c Config) Validate() error {
	for _, f := range []struct {
		name   string
		v, def int64
		dur    bool
	}{
		{"InitialLimit", int64(c.InitialLimit), DefaultInitialLimit, false},
		{"MinLimit", int64(c.MinLimit), DefaultMinLimit, false},
		{"MaxLimit", int64(c.MaxLimit), DefaultMaxLimit, false},
		{"Window", int64(c.Window), int64(DefaultWindow), true},
		{"ProbeInterval", int64(c.ProbeInterval), int64(DefaultProbeInterval), true},
		{"ProbeLimit", int64(c.ProbeLimit), DefaultProbeLimit, false},
		{"ProbeSamples", int64(c.ProbeSamples), DefaultProbeSamples, false},
	} {
		if f.v >= 0 {
			continue
		}
		if f.dur {
			return fmt.Errorf("shed: %s is %v, must be >= 0 (0 means the default, %v)", f.name, time.Duration(f.v), time.Duration(f.def))
		}
		return fmt.Errorf("shed: %s is %d, must be >= 0 (0 means the default, %d)", f.name, f.v, f.def)
	}
	d := c.withDefaults()
	switch {
	case math.IsNaN(c.Buffer) || math.IsInf(c.Buffer, 0):
		return fmt.Errorf("shed: Buffer is %v, must be a finite number (0 means the default, %v; a negative value means none)", c.Buffer, DefaultBuffer)
	case math.IsInf(c.ProbeJitter, 0):
		return fmt.Errorf("shed: ProbeJitter is %v, must be a finite number (0 means the default, %v; a negative value means none)", c.ProbeJitter, DefaultProbeJitter)
	case math.IsNaN(c.ProbeJitter) || c.ProbeJitter > 1:
		return fmt.Errorf("shed: ProbeJitter is %v, must be at most 1 (0 means the default, %v; a negative value means none)", c.ProbeJitter, DefaultProbeJitter)
	case c.MaxLimit > math.MaxInt32:
		return fmt.Errorf("shed: MaxLimit is %d, must be at most %d", c.MaxLimit, math.MaxInt32)
	case d.MaxLimit < d.MinLimit && c.MaxLimit == 0:
		return fmt.Errorf("shed: MaxLimit is 0, meaning the default %d, below MinLimit (%d); set MaxLimit >= MinLimit", DefaultMaxLimit, d.MinLimit)
	case d.MaxLimit < d.MinLimit:
		return fmt.Errorf("shed: MaxLimit is %d, must be >= MinLimit (%d)", c.MaxLimit, d.MinLimit)
	case d.InitialLimit < d.MinLimit || d.InitialLimit > d.MaxLimit:
		return fmt.Errorf("shed: InitialLimit is %d, must be between MinLimit (%d) and MaxLimit (%d)", c.InitialLimit, d.MinLimit, d.MaxLimit)
	case d.ProbeInterval < d.Window && c.ProbeInterval == 0:
		return fmt.Errorf("shed: ProbeInterval is 0, meaning the default %v, below Window (%v); set ProbeInterval >= Window", DefaultProbeInterval, d.Window)
	case d.ProbeInterval < d.Window:
		return fmt.Errorf("shed: ProbeInterval is %v, must be >= Window (%v)", c.ProbeInterval, d.Window)
	case c.ProbeSamples > MaxProbeSamples:
		return fmt.Errorf("shed: ProbeSamples is %d, must be between 1 and %d (0 means the default, %d)", c.ProbeSamples, MaxProbeSamples, DefaultProbeSamples)
	}
	return nil
}

// withDefaults returns c with its zero fields set to their defaults and
// negative Buffer and ProbeJitter set to zero.
func (c Config) withDefaults() Config {
	c.MinLimit = cmp.Or(c.MinLimit, DefaultMinLimit)
	c.MaxLimit = cmp.Or(c.MaxLimit, DefaultMaxLimit)
	c.InitialLimit = cmp.Or(c.InitialLimit, min(max(DefaultInitialLimit, c.MinLimit), c.MaxLimit))
	switch {
	case c.Buffer == 0:
		c.Buffer = DefaultBuffer
	case c.Buffer < 0:
		c.Buffer = 0
	}
	c.Window = cmp.Or(c.Window, DefaultWindow)
	c.ProbeInterval = cmp.Or(c.ProbeInterval, DefaultProbeInterval)
	switch {
	case c.ProbeJitter == 0:
		c.ProbeJitter = DefaultProbeJitter
	case c.ProbeJitter < 0:
		c.ProbeJitter = 0
	}
	c.ProbeLimit = cmp.Or(c.ProbeLimit, DefaultProbeLimit)
	c.ProbeSamples = cmp.Or(c.ProbeSamples, DefaultProbeSamples)
	if c.Clock == nil {
		c.Clock = clock.Real
	}
	return c
}
