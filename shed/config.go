package shed

import (
	"cmp"
	"math"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/config"
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
// array, so the limit allocates nothing while it runs.
const MaxProbeSamples = 256

// Config configures an adaptive concurrency limit: the one a Channel's
// server side keeps per method, or for all of them
// (channel.ShedConfig.Adaptive); the package doc says what it does. Its
// zero value is the default configuration, and so is each zero field: set
// only what you change. Where zero is itself a useful setting (no buffer,
// no jitter) a bool says so: NoBuffer, NoProbeJitter. A Config that fails
// Validate is refused (channel.New returns its error).
type Config struct {
	// InitialLimit is the limit after the first probe, between MinLimit
	// and MaxLimit. 0 means DefaultInitialLimit (20), moved into
	// [MinLimit, MaxLimit] if it falls outside.
	InitialLimit int
	// MinLimit and MaxLimit bound the limit: 1 <= MinLimit <= MaxLimit.
	// 0 means DefaultMinLimit (1) and DefaultMaxLimit (1,000).
	MinLimit, MaxLimit int
	// Buffer is how much slower than the no-load latency requests may be,
	// as a fraction of it, before the limit shrinks: a finite number >= 0.
	// 0 means DefaultBuffer (0.25), unless NoBuffer is set.
	Buffer float64
	// NoBuffer makes the buffer zero: the limit shrinks as soon as
	// requests are slower than the no-load latency. Buffer must then be 0.
	NoBuffer bool
	// Window is how often the limit is updated from the latencies of the
	// requests that finished since the last update. 0 means DefaultWindow
	// (100 ms).
	Window time.Duration
	// ProbeInterval is the time between probes of the no-load latency, at
	// least Window. 0 means DefaultProbeInterval (5 s).
	ProbeInterval time.Duration
	// ProbeJitter spreads probes: each interval is ProbeInterval times a
	// random factor in [1-ProbeJitter, 1+ProbeJitter]. In [0, 1]; 0 means
	// DefaultProbeJitter (0.1), unless NoProbeJitter is set.
	ProbeJitter float64
	// NoProbeJitter makes probes exactly ProbeInterval apart. ProbeJitter
	// must then be 0.
	NoProbeJitter bool
	// ProbeLimit is the limit during a probe, low enough that requests do
	// not wait for each other. 0 means DefaultProbeLimit (3).
	ProbeLimit int
	// ProbeSamples is how many requests admitted during a probe must finish
	// before it ends; their median latency is the no-load latency. 1 to
	// MaxProbeSamples; 0 means DefaultProbeSamples (25).
	ProbeSamples int
	// Clock is the limit's time source; nil means clock.Real, or, for
	// the limits a Channel makes (channel.ShedConfig.Adaptive), the
	// Channel's clock (channel.WithClock). There a Clock that is set must
	// be the Channel's.
	Clock clock.Clock
}

// pkg names this package in configuration errors.
const pkg = "shed"

// Validate reports the first field that breaks its rule, in the order of
// the fields, as a *retry.FieldError naming it and the rule, or nil. Zero
// fields are valid: they mean the defaults.
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
			return config.Errorf(pkg, "Config."+f.name, time.Duration(f.v), "must be >= 0 (0 means the default, %v)", time.Duration(f.def))
		}
		return config.Errorf(pkg, "Config."+f.name, f.v, "must be >= 0 (0 means the default, %d)", f.def)
	}
	// The bounds the cross-field rules compare, a zero field read as its
	// default. A zero InitialLimit always fits: its default moves into
	// [MinLimit, MaxLimit].
	minLimit := cmp.Or(c.MinLimit, DefaultMinLimit)
	maxLimit := cmp.Or(c.MaxLimit, DefaultMaxLimit)
	window := cmp.Or(c.Window, DefaultWindow)
	interval := cmp.Or(c.ProbeInterval, DefaultProbeInterval)
	switch {
	case !(c.Buffer >= 0) || math.IsInf(c.Buffer, 0):
		return config.Errorf(pkg, "Config.Buffer", c.Buffer, "must be a finite number >= 0 (0 means the default, %v; NoBuffer means none)", DefaultBuffer)
	case c.NoBuffer && c.Buffer != 0:
		return config.Errorf(pkg, "Config.Buffer", c.Buffer, "must be 0 when NoBuffer is set")
	case !(c.ProbeJitter >= 0 && c.ProbeJitter <= 1):
		return config.Errorf(pkg, "Config.ProbeJitter", c.ProbeJitter, "must be in [0, 1] (0 means the default, %v; NoProbeJitter means none)", DefaultProbeJitter)
	case c.NoProbeJitter && c.ProbeJitter != 0:
		return config.Errorf(pkg, "Config.ProbeJitter", c.ProbeJitter, "must be 0 when NoProbeJitter is set")
	case c.MaxLimit > math.MaxInt32:
		return config.Errorf(pkg, "Config.MaxLimit", c.MaxLimit, "must be at most %d", math.MaxInt32)
	case maxLimit < minLimit && c.MaxLimit == 0:
		return config.Errorf(pkg, "Config.MaxLimit", 0, "meaning the default %d, below MinLimit (%d); set MaxLimit >= MinLimit", DefaultMaxLimit, minLimit)
	case maxLimit < minLimit:
		return config.Errorf(pkg, "Config.MaxLimit", c.MaxLimit, "must be >= MinLimit (%d)", minLimit)
	case c.InitialLimit != 0 && (c.InitialLimit < minLimit || c.InitialLimit > maxLimit):
		return config.Errorf(pkg, "Config.InitialLimit", c.InitialLimit, "must be between MinLimit (%d) and MaxLimit (%d)", minLimit, maxLimit)
	case interval < window && c.ProbeInterval == 0:
		return config.Errorf(pkg, "Config.ProbeInterval", time.Duration(0), "meaning the default %v, below Window (%v); set ProbeInterval >= Window", DefaultProbeInterval, window)
	case interval < window:
		return config.Errorf(pkg, "Config.ProbeInterval", c.ProbeInterval, "must be >= Window (%v)", window)
	case c.ProbeSamples > MaxProbeSamples:
		return config.Errorf(pkg, "Config.ProbeSamples", c.ProbeSamples, "must be between 1 and %d (0 means the default, %d)", MaxProbeSamples, DefaultProbeSamples)
	}
	return nil
}
