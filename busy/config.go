package busy

import (
	"cmp"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/config"
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

// The defaults of the design: what a zero Config field means.
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

// Config configures a Limiter. Its zero value is the design's
// configuration, and so is each zero field: set only what you change. New
// rejects a Config that fails Validate.
type Config struct {
	// Strategy picks the recovery rule. The zero value is Multiplicative.
	Strategy Strategy
	// Ceiling is the initial limit and the most it can recover to, in
	// requests per window: a finite number >= 0, below 2^32. 0 means
	// DefaultCeiling (9,999,999, "unlimited").
	Ceiling float64
	// RecoverRate is the multiplicative recovery: each window the limit
	// grows by RecoverRate times itself. A finite number >= 0; 0 means
	// DefaultRecoverRate (3: x4 per window).
	RecoverRate float64
	// RecoverValue is the constant recovery added each window by the
	// Constant strategy. A finite number >= 0; 0 means DefaultRecoverValue
	// (200).
	RecoverValue float64
	// MaxHalvings caps how many times one window's busy responses halve
	// the limit: 0 to 255, where 0 means DefaultMaxHalvings (20).
	MaxHalvings int
	// Window is the length of a counting window, >= 0; 0 means
	// DefaultWindow (one second).
	Window time.Duration
	// Disabled turns busy throttling off: the Limiter allows every
	// request and ignores busy responses, and a pushback hint does not
	// hold a peer. For comparisons, and for clients that throttle by
	// other means.
	Disabled bool
	// Clock is the time source of the Limiter's windows; nil means
	// clock.Real, or, for the limiters a Channel makes, the Channel's clock
	// (channel.WithClock): there a Clock that is set must be the Channel's,
	// as one clock times a Channel.
	Clock clock.Clock
}

// pkg names this package in configuration errors.
const pkg = "busy"

// Validate reports the first field that breaks its rule, in the order of
// the fields, as a *retry.FieldError naming it and the rule, or nil. Zero
// fields are valid: they mean the defaults.
func (c Config) Validate() error {
	nonNegative := func(name string, v float64, def float64) error {
		if !(v >= 0) || math.IsInf(v, 0) {
			return config.Errorf(pkg, "Config."+name, v, "must be a finite number >= 0 (0 means the default, %s)", strconv.FormatFloat(def, 'f', -1, 64))
		}
		return nil
	}
	if c.Strategy != Multiplicative && c.Strategy != Constant {
		return config.Errorf(pkg, "Config.Strategy", c.Strategy, "must be Multiplicative or Constant")
	}
	if err := nonNegative("Ceiling", c.Ceiling, DefaultCeiling); err != nil {
		return err
	}
	if c.Ceiling >= 1<<32 {
		return config.Errorf(pkg, "Config.Ceiling", c.Ceiling, "must be < 2^32 requests per window")
	}
	if err := nonNegative("RecoverRate", c.RecoverRate, DefaultRecoverRate); err != nil {
		return err
	}
	if err := nonNegative("RecoverValue", c.RecoverValue, DefaultRecoverValue); err != nil {
		return err
	}
	if c.MaxHalvings < 0 || c.MaxHalvings > maxHalvingsLimit {
		return config.Errorf(pkg, "Config.MaxHalvings", c.MaxHalvings, "must be between 0 and %d (0 means the default, %d)", maxHalvingsLimit, DefaultMaxHalvings)
	}
	if c.Window < 0 {
		return config.Errorf(pkg, "Config.Window", c.Window, "must be >= 0 (0 means the default, %v)", DefaultWindow)
	}
	return nil
}

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	c.Ceiling = cmp.Or(c.Ceiling, DefaultCeiling)
	c.RecoverRate = cmp.Or(c.RecoverRate, DefaultRecoverRate)
	c.RecoverValue = cmp.Or(c.RecoverValue, DefaultRecoverValue)
	c.MaxHalvings = cmp.Or(c.MaxHalvings, DefaultMaxHalvings)
	c.Window = cmp.Or(c.Window, DefaultWindow)
	if c.Clock == nil {
		c.Clock = clock.Real
	}
	return c
}

// Next returns the limit for the window after one in which limit was in
// force and busy busy responses arrived, zero fields of c taking their
// defaults. It is the whole algorithm; the Limiter applies it at each
// window boundary.
func (c Config) Next(limit float64, busy int) float64 {
	return c.withDefaults().next(limit, busy)
}

// next is Next on a Config whose defaults are set.
func (c Config) next(limit float64, busy int) float64 {
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
// idle more quiet windows, without looping once the ceiling is reached. c's
// defaults must be set.
func (c Config) advance(limit float64, busy int, idle int64) float64 {
	limit = c.next(limit, busy)
	if c.Strategy == Constant && idle > 0 {
		return math.Min(c.Ceiling, limit+float64(idle)*c.RecoverValue)
	}
	for ; idle > 0 && limit < c.Ceiling; idle-- {
		limit = c.next(limit, 0)
	}
	return limit
}
