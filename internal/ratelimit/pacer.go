package ratelimit

import (
	"cmp"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/sluice-rpc/sluice/pacing"
)

// DefaultReserve is pacing.Config.Reserve's default: 0.3% of the quota,
// 13.5 requests of Heroku's 4500.
const DefaultReserve = 0.003

// Pacer is a client's rate throttling: it decides how long to sleep before
// each request, from what the server's responses said about its quota. A
// call asks Before, sends, then tells the pacer the outcome: OnRateLimited
// (and sleeps what it returns before retrying) or OnSuccess. Every method
// takes the time explicitly, so a simulator in virtual time and the channel
// on the real clock run the very same code.
//
// Implementations are safe for concurrent use; concurrent calls to one
// service share its pacer, and each call sleeps the pacer's sleep (as the
// threads sharing one client do in Heroku's article): the sleep paces each
// caller, it does not space the calls of all callers. A burst of
// rate-limited responses to calls that were in flight together raises the
// sleep once, not once per response: a raise counts only when at least the
// current sleep has passed since the previous one.
type Pacer interface {
	// Before returns how long to sleep before sending a new request at now
	// (not a retry: OnRateLimited gave that wait).
	Before(now time.Time) time.Duration
	// OnRateLimited records a rate-limited response (a Busy error, an HTTP
	// 429, or a signal whose quota is spent) received at now, and returns
	// how long to sleep before retrying the request.
	OnRateLimited(now time.Time, s pacing.Signal) time.Duration
	// OnSuccess records a response received at now that was not rate
	// limited, with the quota it reported (possibly empty).
	OnSuccess(now time.Time, s pacing.Signal)
	// Sleep returns the pacer's current sleep, without jitter: the value a
	// chart or a gauge shows.
	Sleep() time.Duration
}

// Null is the pacer that never sleeps: the behaviour without pacing. Its
// zero value is ready to use.
type Null struct{}

// Before returns 0.
func (Null) Before(time.Time) time.Duration { return 0 }

// OnRateLimited returns 0: retry at once (or as the retry policy says).
func (Null) OnRateLimited(time.Time, pacing.Signal) time.Duration { return 0 }

// OnSuccess does nothing.
func (Null) OnSuccess(time.Time, pacing.Signal) {}

// Sleep returns 0.
func (Null) Sleep() time.Duration { return 0 }

// seconds converts a duration to float seconds and back; the pacers keep
// their sleep in float seconds so that small proportional decreases are
// not lost to rounding.
func seconds(d time.Duration) float64 { return d.Seconds() }

func duration(s float64) time.Duration {
	if !(s > 0) {
		return 0
	}
	if s >= float64(1<<62)/float64(time.Second) {
		return 1 << 62
	}
	return time.Duration(s * float64(time.Second))
}

// core is the state the strategies share: the sleep, the raise guard and
// the jitter source, under one lock.
type core struct {
	mu        sync.Mutex
	cfg       pacing.Config
	minSleep  float64 // seconds
	maxSleep  float64 // seconds; 0 means no cap
	sleep     float64 // seconds
	lastRaise time.Time
	lastWait  float64 // seconds: the retry wait the last raise led to
	raised    bool
}

func (c *core) init(cfg pacing.Config) {
	c.cfg = cfg
	c.minSleep = seconds(cfg.MinSleep())
	c.maxSleep = seconds(cfg.MaxSleep)
	c.sleep = seconds(cfg.InitialSleep)
	c.clamp()
}

func (c *core) clamp() {
	if c.sleep < 0 || c.sleep != c.sleep {
		c.sleep = 0
	}
	if c.maxSleep > 0 && c.sleep > c.maxSleep {
		c.sleep = c.maxSleep
	}
}

// jittered returns s plus up to cfg.Jitter of it, as a duration.
func (c *core) jittered(s float64) time.Duration {
	r := c.cfg.Rand()
	if !(r >= 0 && r < 1) {
		r = 0
	}
	return duration(s + s*c.cfg.Jitter*r)
}

// mayRaise reports whether a rate-limited response at now may raise the
// sleep: the first one does, and later ones once the retry wait the last
// raise led to has passed since it. The caller sets lastWait.
func (c *core) mayRaise(now time.Time) bool {
	if c.raised && now.Sub(c.lastRaise) < duration(c.lastWait) {
		return false
	}
	c.raised, c.lastRaise = true, now
	return true
}

// raise is Heroku's exponential increase: add MinSleep, multiply.
func (c *core) raise() {
	c.sleep = (c.sleep + c.minSleep) * c.cfg.Multiplier
	c.clamp()
}

// Sleep returns the current sleep.
func (c *core) Sleep() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return duration(c.sleep)
}

// backoff is pacing.StrategyExponentialBackoff.
type backoff struct {
	core
	retrying bool
	last     float64 // the last retry's wait, seconds
}

func newBackoff(cfg pacing.Config) *backoff {
	b := &backoff{}
	b.init(cfg)
	b.sleep = b.minSleep
	return b
}

func (b *backoff) Before(time.Time) time.Duration { return 0 }

func (b *backoff) OnRateLimited(now time.Time, _ pacing.Signal) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.retrying {
		b.retrying, b.raised = true, false
		b.sleep = b.minSleep
		b.clamp()
	}
	wait := b.sleep
	if b.mayRaise(now) {
		b.lastWait = wait
		b.sleep *= b.cfg.Multiplier
		b.clamp()
	} else {
		wait = b.lastWait
	}
	b.last = wait
	return b.jittered(wait)
}

func (b *backoff) OnSuccess(time.Time, pacing.Signal) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.retrying = false
}

func (b *backoff) Sleep() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.retrying {
		return 0
	}
	return duration(b.last)
}

// sticky is Heroku's three "exponential increase" strategies: a sleep
// before every request, raised on rate-limited responses and decreased
// after successes by a strategy-specific amount.
type sticky struct {
	core
}

func newSticky(cfg pacing.Config) *sticky {
	s := &sticky{}
	s.init(cfg)
	return s
}

func (p *sticky) Before(time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.jittered(p.sleep)
}

func (p *sticky) OnRateLimited(now time.Time, _ pacing.Signal) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mayRaise(now) {
		p.raise()
		p.lastWait = p.sleep
	}
	return p.jittered(p.sleep)
}

func (p *sticky) OnSuccess(_ time.Time, s pacing.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var dec float64
	switch p.cfg.Strategy {
	case pacing.StrategyGradualDecrease:
		dec = p.minSleep
	case pacing.StrategyProportionalDecrease:
		dec = p.sleep / float64(p.cfg.Limit)
	case pacing.StrategyProportionalRemainingDecrease:
		dec = p.sleep * RemainingFraction(s, p.cfg.Limit)
	}
	p.sleep -= dec
	p.clamp()
}

// withDefaults returns c with its zero fields set to their defaults.
func withDefaults(c pacing.Config) pacing.Config {
	c.Strategy = cmp.Or(c.Strategy, pacing.StrategyNull)
	c.Limit = cmp.Or(c.Limit, pacing.DefaultLimit)
	c.Window = cmp.Or(c.Window, pacing.DefaultWindow)
	c.Multiplier = cmp.Or(c.Multiplier, pacing.DefaultMultiplier)
	c.Jitter = cmp.Or(c.Jitter, pacing.DefaultJitter)
	c.Reserve = cmp.Or(c.Reserve, DefaultReserve)
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	return c
}

// New returns the Pacer c selects, or c's first invalid field.
func New(c pacing.Config) (Pacer, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = withDefaults(c)
	switch c.Strategy {
	case pacing.StrategyExponentialBackoff:
		return newBackoff(c), nil
	case pacing.StrategyGradualDecrease, pacing.StrategyProportionalDecrease, pacing.StrategyProportionalRemainingDecrease:
		return newSticky(c), nil
	case pacing.StrategyReserve:
		return newReserve(c), nil
	}
	return Null{}, nil
}
