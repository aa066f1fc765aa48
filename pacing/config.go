package pacing

import (
	"cmp"
	"math"
	"strconv"
	"time"

	"github.com/sluice-rpc/sluice/retry"
)

// Strategy names a pacing strategy, as a service config spells it.
type Strategy string

// The strategies of Heroku's client rate throttling article ("A Fast Car
// Needs Good Brakes"), in the order the article tries them, and Sluice's
// own.
const (
	// StrategyNull does not pace: no sleep before requests, no wait before
	// retries (today's behaviour: the retry policy alone decides).
	StrategyNull Strategy = "null"
	// StrategyExponentialBackoff sleeps only before retries: MinSleep
	// after the first rate-limited response, times Multiplier after each
	// further one; a success starts again from MinSleep. Nothing sticks
	// between requests.
	StrategyExponentialBackoff Strategy = "exponential-backoff"
	// StrategyGradualDecrease sleeps before every request; a rate-limited
	// response adds MinSleep and multiplies by Multiplier; a success
	// subtracts MinSleep.
	StrategyGradualDecrease Strategy = "exponential-increase-gradual-decrease"
	// StrategyProportionalDecrease is StrategyGradualDecrease with a
	// success subtracting sleep/Limit.
	StrategyProportionalDecrease Strategy = "exponential-increase-proportional-decrease"
	// StrategyProportionalRemainingDecrease is StrategyGradualDecrease with a
	// success subtracting sleep*remaining/limit: the article's winner, the
	// algorithm of Heroku's platform-api gem.
	StrategyProportionalRemainingDecrease Strategy = "exponential-increase-proportional-remaining-decrease"
	// StrategyReserve is Sluice's addition (not in the article): the
	// proportional-remaining-decrease pacer measured from a small reserve
	// (Config.Reserve) instead of from an empty bucket: while a success
	// leaves less than the reserve it adds up to MinSleep/2 to the sleep,
	// braking before the server starts refusing requests.
	StrategyReserve Strategy = "reserve"
)

// Strategies lists every strategy: Heroku's in the article's order, then
// Sluice's.
func Strategies() []Strategy {
	return []Strategy{StrategyNull, StrategyExponentialBackoff, StrategyGradualDecrease,
		StrategyProportionalDecrease, StrategyProportionalRemainingDecrease, StrategyReserve}
}

// Defaults of Config, from Heroku's article: the Heroku API's quota of 4500
// requests per hour.
const (
	DefaultLimit      = 4500
	DefaultWindow     = time.Hour
	DefaultMultiplier = 1.2
	DefaultJitter     = 0.1
)

// Config configures the pacer of a Client's calls (channel.PacingConfig's
// Pacer). It is a plain value; zero fields take the documented defaults,
// and Validate reports the first rule a field breaks.
type Config struct {
	// Strategy selects the algorithm; "" means StrategyNull.
	Strategy Strategy
	// Limit is the server's quota per Window (default DefaultLimit). With
	// Window it gives MinSleep = Window/Limit, 0.8 s for 4500 per hour, and
	// it is the divisor of the proportional decreases when a response does
	// not carry its own limit. It must be >= 0.
	Limit int64
	// Window is the quota's window (default DefaultWindow). It must be >= 0.
	Window time.Duration
	// Multiplier scales the sleep after each rate-limited response (default
	// DefaultMultiplier). It must be 0 (default) or a finite number >= 1.
	Multiplier float64
	// Jitter is the largest extra sleep, as a fraction of the sleep: each
	// sleep s is s + s*Jitter*r with r uniform in [0, 1) (default
	// DefaultJitter, 10%). It must be in [0, 1]; 0 means the default.
	Jitter float64
	// InitialSleep is the sleep before the first request of the sticky
	// strategies. It must be >= 0.
	InitialSleep time.Duration
	// MaxSleep, when > 0, caps the sleep (before jitter). Heroku's
	// strategies have no cap (0); a cap trades a higher retry rate for
	// shorter waits.
	MaxSleep time.Duration
	// Reserve is StrategyReserve's reserve, as a fraction of the limit. It
	// must be in [0, 1); 0 means the default, 0.003 (0.3% of the quota,
	// 13.5 requests of Heroku's 4500).
	// Other strategies ignore it.
	Reserve float64
	// Rand returns uniform numbers in [0, 1) for the jitter; nil means
	// math/rand/v2's Float64. The pacer calls it under its lock, so it
	// need not be safe for concurrent use. Simulators pass a seeded source.
	Rand func() float64
}

// fieldError is the error Validate returns: it names the field, the value
// that broke the rule, and the rule (the one configuration error type of
// the library, retry.FieldError).
func fieldError(field, value, rule string) *retry.FieldError {
	return &retry.FieldError{Package: "pacing", Field: field, Value: value, Rule: rule}
}

// Validate reports the first rule c breaks, as a *retry.FieldError, or nil.
func (c Config) Validate() error {
	known := c.Strategy == ""
	for _, s := range Strategies() {
		known = known || c.Strategy == s
	}
	switch {
	case !known:
		return fieldError("Config.Strategy", strconv.Quote(string(c.Strategy)), "must be one of the names Strategies lists")
	case c.Limit < 0:
		return fieldError("Config.Limit", strconv.FormatInt(c.Limit, 10), "must be >= 0")
	case c.Window < 0:
		return fieldError("Config.Window", c.Window.String(), "must be >= 0")
	case c.Multiplier != 0 && !(c.Multiplier >= 1 && !math.IsInf(c.Multiplier, 1)):
		return fieldError("Config.Multiplier", strconv.FormatFloat(c.Multiplier, 'g', -1, 64), "must be a finite number >= 1")
	case !(c.Jitter >= 0 && c.Jitter <= 1):
		return fieldError("Config.Jitter", strconv.FormatFloat(c.Jitter, 'g', -1, 64), "must be in [0, 1]")
	case !(c.Reserve >= 0 && c.Reserve < 1):
		return fieldError("Config.Reserve", strconv.FormatFloat(c.Reserve, 'g', -1, 64), "must be in [0, 1)")
	case c.InitialSleep < 0:
		return fieldError("Config.InitialSleep", c.InitialSleep.String(), "must be >= 0")
	case c.MaxSleep < 0:
		return fieldError("Config.MaxSleep", c.MaxSleep.String(), "must be >= 0")
	}
	return nil
}

// MinSleep is the quota's pace, Window/Limit after defaults: the smallest
// sleep that keeps a lone client within the quota (0.8 s for 4500 per hour).
func (c Config) MinSleep() time.Duration {
	return cmp.Or(c.Window, DefaultWindow) / time.Duration(cmp.Or(c.Limit, DefaultLimit))
}
