package busy

import (
	"fmt"
	"math"
	"time"
)

// Strategy says how a limit recovers at each window boundary.
type Strategy int

const (
	// Multiplicative grows the limit by RecoverRate times itself per window:
	// limit * (1 + RecoverRate). The design's choice.
	Multiplicative Strategy = iota
	// Constant adds RecoverValue per window. The design's straw man: it
	// flaps under steady busy responses and recovers slowly.
	Constant
)

func (s Strategy) String() string {
	switch s {
	case Multiplicative:
		return "multiplicative"
	case Constant:
		return "constant"
	}
	return fmt.Sprintf("Strategy(%d)", int(s))
}

// The defaults of the design.
const (
	DefaultCeiling      = 9999999
	DefaultRecoverRate  = 3
	DefaultRecoverValue = 200
	DefaultMaxHalvings  = 20
	DefaultWindow       = time.Second
)

// maxHalvingsLimit bounds MaxHalvings so a window's busy count fits the
// limiter's packed state (8 bits).
const maxHalvingsLimit = 255

// minLimit keeps a multiplicative limit from reaching exactly zero, where
// recovery by multiplication would be impossible. It is far below any value
// the design's tables print (the smallest there is about 1.5e-4).
const minLimit = 1e-12

// Config configures a Limiter. Build one from DefaultConfig and change what
// you need; New rejects a Config that fails Validate.
type Config struct {
	// Strategy picks the recovery rule. Default Multiplicative.
	Strategy Strategy
	// Ceiling is the initial limit and the most it can recover to, in
	// requests per window. Default 9,999,999 ("unlimited").
	Ceiling float64
	// RecoverRate is the multiplicative recovery: each window the limit
	// grows by RecoverRate times itself. Must be > 0. Default 3 (x4 per
	// window).
	RecoverRate float64
	// RecoverValue is the constant recovery added each window. Must be > 0
	// when Strategy is Constant. Default 200.
	RecoverValue float64
	// MaxHalvings caps how many times one window's busy responses halve
	// the limit. 1 to 255. Default 20.
	MaxHalvings int
	// Window is the length of a counting window. Default one second.
	Window time.Duration
	// Disabled turns busy throttling off: the Limiter allows every
	// request and ignores busy responses, and a pushback hint does not
	// hold a peer. For comparisons, and for clients that throttle by
	// other means.
	Disabled bool
}

// DefaultConfig returns the design's configuration.
func DefaultConfig() Config {
	return Config{
		Strategy:     Multiplicative,
		Ceiling:      DefaultCeiling,
		RecoverRate:  DefaultRecoverRate,
		RecoverValue: DefaultRecoverValue,
		MaxHalvings:  DefaultMaxHalvings,
		Window:       DefaultWindow,
	}
}

// Validate reports the first field that breaks its rule.
func (c Config) Validate() error {
	positive := func(name string, v float64) error {
		if !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("busy: %s is %v, must be a finite number > 0", name, v)
		}
		return nil
	}
	switch c.Strategy {
	case Multiplicative:
		if err := positive("RecoverRate", c.RecoverRate); err != nil {
			return err
		}
	case Constant:
		if err := positive("RecoverValue", c.RecoverValue); err != nil {
			return err
		}
	default:
		return fmt.Errorf("busy: Strategy is %v, must be Multiplicative or Constant", c.Strategy)
	}
	if err := positive("Ceiling", c.Ceiling); err != nil {
		return err
	}
	if c.Ceiling >= 1<<32 {
		return fmt.Errorf("busy: Ceiling is %v, must be < 2^32 requests per window", c.Ceiling)
	}
	if c.MaxHalvings < 1 || c.MaxHalvings > maxHalvingsLimit {
		return fmt.Errorf("busy: MaxHalvings is %d, must be between 1 and %d", c.MaxHalvings, maxHalvingsLimit)
	}
	if c.Window <= 0 {
		return fmt.Errorf("busy: Window is %v, must be > 0", c.Window)
	}
	return nil
}

// Next returns the limit for the window after one in which limit was in
// force and busy busy responses arrived. It is the whole algorithm; the
// Limiter calls it at each window boundary.
func (c Config) Next(limit float64, busy int) float64 {
	if busy > c.MaxHalvings {
		busy = c.MaxHalvings
	}
	var next float64
	if c.Strategy == Constant {
		next = (limit + c.RecoverValue) / math.Exp2(float64(busy))
	} else {
		next = math.Max(minLimit, limit*(1+c.RecoverRate)/math.Exp2(float64(busy)))
	}
	return math.Min(c.Ceiling, next)
}

// advance returns the limit after one window with busy responses followed by
// idle more quiet windows, without looping once the ceiling is reached.
func (c Config) advance(limit float64, busy int, idle int64) float64 {
	limit = c.Next(limit, busy)
	if c.Strategy == Constant && idle > 0 {
		return math.Min(c.Ceiling, limit+float64(idle)*c.RecoverValue)
	}
	for ; idle > 0 && limit < c.Ceiling; idle-- {
		limit = c.Next(limit, 0)
	}
	return limit
}
