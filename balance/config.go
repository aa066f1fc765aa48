package balance

import (
	"math"
	"time"

	"github.com/sluice-rpc/sluice/internal/config"
)

// Config is the balancing of one service's calls. Its zero value means
// every default: slow start over 10 s, ejection after 5 consecutive
// errors, shard keys spilling at 1.25 times the average load.
type Config struct {
	// SlowStart ramps up the share of a peer that has just become ready.
	SlowStart SlowStart
	// Ejection takes peers that keep answering errors out of the choice
	// for a while.
	Ejection Ejection
	// BalanceFactor is c in the bounded load of shard keys: a key's home
	// takes the call while it has fewer than ceil(c x (m + 1) x w / W)
	// calls in flight. It must be > 1 (1 would make every
	// peer exactly full); 0 means DefaultBalanceFactor.
	BalanceFactor float64
}

// SlowStart configures slow start. Its zero value means the defaults.
type SlowStart struct {
	// Window is how long a peer's weight ramps up after it becomes ready;
	// 0 means 10 s.
	Window time.Duration
	// Aggression shapes the ramp: the weight's factor is
	// (elapsed / Window) ^ (1 / Aggression), linear at 1, faster at first
	// above 1. 0 means 1.
	Aggression float64
	// MinWeight is the smallest factor, in (0, 1]: a new peer takes at
	// least this fraction of its weight from the start. 0 means 0.1.
	MinWeight float64
	// Disabled turns slow start off: a ready peer takes its full weight
	// at once.
	Disabled bool
}

// Ejection configures outlier ejection. Its zero value means the
// defaults.
type Ejection struct {
	// ConsecutiveErrors is how many UNEXPECTED or NETWORK answers in a row
	// eject a peer; 0 means 5.
	ConsecutiveErrors int
	// BaseTime is the first ejection's length; each further ejection
	// soon after lasts one BaseTime more. 0 means 30 s.
	BaseTime time.Duration
	// MaxTime caps an ejection's length; 0 means 300 s. It must be >=
	// BaseTime.
	MaxTime time.Duration
	// MaxPercent is the largest share of the peers ejected at once, in
	// percent (0, 100]; at least one peer may always be ejected. 0 means
	// 10.
	MaxPercent float64
	// PanicThreshold, in percent (0, 100]: when fewer than this share of
	// the peers are ready and not ejected, the chooser ignores ejections.
	// 0 means 50.
	PanicThreshold float64
	// Disabled turns ejection off.
	Disabled bool
}

// The defaults a zero Config stands for.
const (
	DefaultSlowStartWindow    = 10 * time.Second
	DefaultAggression         = 1.0
	DefaultMinWeight          = 0.1
	DefaultConsecutiveErrors  = 5
	DefaultBaseEjectionTime   = 30 * time.Second
	DefaultMaxEjectionTime    = 300 * time.Second
	DefaultMaxEjectionPercent = 10.0
	DefaultPanicThreshold     = 50.0
	DefaultBalanceFactor      = 1.25
)

// MaxConsecutiveErrors bounds Ejection.ConsecutiveErrors.
const MaxConsecutiveErrors = 1 << 20

// A peer's weight is in [MinWeight, MaxWeight] (0 standing for 1). The
// bounds keep the chooser's arithmetic exact: the ratio of two weights is
// at most 1e15, so neither a sum of weights overflows nor a weight
// relative to their mean underflows to 0 (a registry's 1e308, or 1e-320,
// would make every choice NaN).
const (
	MinWeight = 1e-6
	MaxWeight = 1e9
)

// pkg names this package in configuration errors.
const pkg = "balance"

// Validate reports the first rule c breaks, in the order of the fields, as
// a *retry.FieldError naming the field ("Config.SlowStart.Window"), or nil.
func (c Config) Validate() error {
	if err := c.SlowStart.Validate(); err != nil {
		return config.Nest(err, pkg, "Config.SlowStart")
	}
	if err := c.Ejection.Validate(); err != nil {
		return config.Nest(err, pkg, "Config.Ejection")
	}
	if c.BalanceFactor != 0 && !(c.BalanceFactor > 1) || math.IsInf(c.BalanceFactor, 0) {
		return config.Errorf(pkg, "Config.BalanceFactor", c.BalanceFactor, "must be a finite number > 1 (0 means the default, %v)", DefaultBalanceFactor)
	}
	return nil
}

// Validate reports the first rule s breaks, as a *retry.FieldError, or nil.
func (s SlowStart) Validate() error {
	switch {
	case s.Window < 0:
		return config.Errorf(pkg, "SlowStart.Window", s.Window, "must be >= 0 (0 means the default, %v)", DefaultSlowStartWindow)
	case !(s.Aggression >= 0) || math.IsInf(s.Aggression, 0):
		return config.Errorf(pkg, "SlowStart.Aggression", s.Aggression, "must be a finite number > 0 (0 means the default, %v)", DefaultAggression)
	case !(s.MinWeight >= 0 && s.MinWeight <= 1):
		return config.Errorf(pkg, "SlowStart.MinWeight", s.MinWeight, "must be in (0, 1] (0 means the default, %v)", DefaultMinWeight)
	}
	return nil
}

// Validate reports the first rule e breaks, as a *retry.FieldError, or nil.
func (e Ejection) Validate() error {
	switch {
	case e.ConsecutiveErrors < 0 || e.ConsecutiveErrors > MaxConsecutiveErrors:
		return config.Errorf(pkg, "Ejection.ConsecutiveErrors", e.ConsecutiveErrors, "must be in [1, %d] (0 means the default, %d)", MaxConsecutiveErrors, DefaultConsecutiveErrors)
	case e.BaseTime < 0:
		return config.Errorf(pkg, "Ejection.BaseTime", e.BaseTime, "must be >= 0 (0 means the default, %v)", DefaultBaseEjectionTime)
	case e.MaxTime < 0:
		return config.Errorf(pkg, "Ejection.MaxTime", e.MaxTime, "must be >= 0 (0 means the default, %v)", DefaultMaxEjectionTime)
	case e.maxTime() < e.baseTime():
		return config.Errorf(pkg, "Ejection.MaxTime", e.maxTime(), "must be >= BaseTime (%v)", e.baseTime())
	case !(e.MaxPercent >= 0 && e.MaxPercent <= 100):
		return config.Errorf(pkg, "Ejection.MaxPercent", e.MaxPercent, "must be in (0, 100] (0 means the default, %v)", DefaultMaxEjectionPercent)
	case !(e.PanicThreshold >= 0 && e.PanicThreshold <= 100):
		return config.Errorf(pkg, "Ejection.PanicThreshold", e.PanicThreshold, "must be in (0, 100] (0 means the default, %v)", DefaultPanicThreshold)
	}
	return nil
}

func orDuration(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

func (e Ejection) baseTime() time.Duration {
	return orDuration(e.BaseTime, DefaultBaseEjectionTime)
}
func (e Ejection) maxTime() time.Duration { return orDuration(e.MaxTime, DefaultMaxEjectionTime) }
