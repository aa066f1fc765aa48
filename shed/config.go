package shed

import (
	"fmt"
	"math"
	"time"
)

// Defaults of a Config.
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

// Config configures a Limiter. Build one from DefaultConfig and change what
// you need; New rejects a Config that fails Validate.
type Config struct {
	// InitialLimit is the limit a Limiter starts from (after its first
	// probe). Default 20.
	InitialLimit int
	// MinLimit and MaxLimit bound the limit. Defaults 1 and 1,000.
	MinLimit, MaxLimit int
	// Buffer is how much slower than the no-load latency requests may be,
	// as a fraction of it, before the limit shrinks. Default 0.25.
	Buffer float64
	// Window is how often the limit is updated from the latencies of the
	// requests that finished since the last update. Default 100 ms.
	Window time.Duration
	// ProbeInterval is the time between probes of the no-load latency.
	// Default 5 s.
	ProbeInterval time.Duration
	// ProbeJitter spreads probes: each interval is ProbeInterval times a
	// random factor in [1-ProbeJitter, 1+ProbeJitter]. 0 to 1; default 0.1.
	ProbeJitter float64
	// ProbeLimit is the limit during a probe, low enough that requests do
	// not wait for each other. Default 3.
	ProbeLimit int
	// ProbeSamples is how many requests admitted during a probe must finish
	// before it ends; their median latency is the no-load latency. 1 to
	// MaxProbeSamples; default 25.
	ProbeSamples int
}

// DefaultConfig returns the default configuration.
func DefaultConfig() Config {
	return Config{
		InitialLimit:  DefaultInitialLimit,
		MinLimit:      DefaultMinLimit,
		MaxLimit:      DefaultMaxLimit,
		Buffer:        DefaultBuffer,
		Window:        DefaultWindow,
		ProbeInterval: DefaultProbeInterval,
		ProbeJitter:   DefaultProbeJitter,
		ProbeLimit:    DefaultProbeLimit,
		ProbeSamples:  DefaultProbeSamples,
	}
}

// Validate reports the first field that breaks its rule.
func (c Config) Validate() error {
	switch {
	case c.MinLimit < 1:
		return fmt.Errorf("shed: MinLimit is %d, must be >= 1", c.MinLimit)
	case c.MaxLimit > math.MaxInt32:
		return fmt.Errorf("shed: MaxLimit is %d, must be at most %d", c.MaxLimit, math.MaxInt32)
	case c.MaxLimit < c.MinLimit:
		return fmt.Errorf("shed: MaxLimit is %d, must be >= MinLimit (%d)", c.MaxLimit, c.MinLimit)
	case c.InitialLimit < c.MinLimit || c.InitialLimit > c.MaxLimit:
		return fmt.Errorf("shed: InitialLimit is %d, must be between MinLimit (%d) and MaxLimit (%d)", c.InitialLimit, c.MinLimit, c.MaxLimit)
	case !(c.Buffer >= 0) || math.IsInf(c.Buffer, 0):
		return fmt.Errorf("shed: Buffer is %v, must be a finite number >= 0", c.Buffer)
	case c.Window <= 0:
		return fmt.Errorf("shed: Window is %v, must be > 0", c.Window)
	case c.ProbeInterval < c.Window:
		return fmt.Errorf("shed: ProbeInterval is %v, must be >= Window (%v)", c.ProbeInterval, c.Window)
	case !(c.ProbeJitter >= 0 && c.ProbeJitter <= 1):
		return fmt.Errorf("shed: ProbeJitter is %v, must be between 0 and 1", c.ProbeJitter)
	case c.ProbeLimit < 1:
		return fmt.Errorf("shed: ProbeLimit is %d, must be >= 1", c.ProbeLimit)
	case c.ProbeSamples < 1 || c.ProbeSamples > MaxProbeSamples:
		return fmt.Errorf("shed: ProbeSamples is %d, must be between 1 and %d", c.ProbeSamples, MaxProbeSamples)
	}
	return nil
}
