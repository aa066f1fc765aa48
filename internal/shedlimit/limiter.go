package shedlimit

import (
	"cmp"
	"hash/maphash"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/criticality"
	"github.com/sluice-rpc/sluice/shed"
)

// minPushback is the least pushback a Limiter hints: retry-pushback-ms
// counts whole milliseconds.
const minPushback = time.Millisecond

// probeShare bounds the share of time spent probing for a slow handler: the
// interval between probes is at least probeShare times the no-load latency
// (a probe lasts about ProbeSamples/ProbeLimit of it, 8 with the defaults).
const probeShare = 200

// A probe ends after at most minProbeTime, or probeTimeShare times the
// no-load latency if that is longer, whether or not ProbeSamples of its
// requests finished: requests admitted before it that never finish (hung,
// or long polls) must not hold the limit at ProbeLimit.
const (
	minProbeTime   = time.Second
	probeTimeShare = 20
)

// A Limiter is an adaptive concurrency limit; package shed's doc gives its
// model. Make one with New; its zero value is not usable.
type Limiter struct {
	cfg   shed.Config
	clk   clock.Clock
	fixed bool // MinLimit == MaxLimit: no probes, latency only for pushback
	// epoch is the clock's reading when the Limiter was made. Tokens hold
	// their start as the time since it: Acquire and Release then read only
	// the monotonic clock (clk.Since), half the cost of clk.Now, on every
	// request.
	epoch time.Time

	// admit packs what Acquire reads in one word: the limit requests are
	// admitted under (low 32 bits) and the number of the probe in progress
	// (high 32 bits; 0 when none is).
	admit atomic.Uint64
	// normal is the limit outside probes, which the highest class keeps
	// a share of during one (AcquireFor).
	normal   atomic.Int64
	inFlight atomic.Int64
	pushback atomic.Int64 // ns

	mu          sync.Mutex
	limit       float64
	noLoad      time.Duration // L0; 0 until the first probe ends
	latency     time.Duration // L of the last window
	windowStart time.Time
	sum         time.Duration
	n           int64
	maxInFlight int64
	probe       uint32 // number of the probe in progress or last run
	probing     bool
	probeEnd    time.Time // when the probe in progress ends, finished or not
	samples     [shed.MaxProbeSamples]time.Duration
	nSamples    int
	nextProbe   time.Time
	rng         *rand.Rand

	cls classState // for AcquireFor
}

// Token is an admitted request's receipt: give it back to Release when the
// request is done.
type Token struct {
	start time.Duration // since the Limiter's epoch
	probe uint32
	slot  uint16 // caller table entry + 1 of a request admitted near the limit (AcquireFor); 0: none
	low   bool   // admitted by AcquireFor at the level, counted in its low
}

// New returns a Limiter with cfg, zero fields taking their defaults, or
// cfg's validation error (shed.Config.Validate). It starts by probing the
// no-load latency, with the limit at ProbeLimit, unless the limit is fixed
// (MinLimit == MaxLimit), when it starts at that limit.
func New(cfg shed.Config) (*Limiter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = withDefaults(cfg)
	clk := cfg.Clock
	now := clk.Now()
	seed := uint64(now.UnixNano())
	l := &Limiter{
		cfg:         cfg,
		clk:         clk,
		fixed:       cfg.MinLimit == cfg.MaxLimit,
		epoch:       now,
		limit:       float64(cfg.InitialLimit),
		windowStart: now,
		rng:         rand.New(rand.NewPCG(seed, seed>>1|1)),
	}
	l.cls.level.Store(uint32(criticality.Sheddable))
	l.cls.reserve.Store(minReserve)
	l.cls.tickAt.Store(int64(cfg.Window))
	l.cls.seed = maphash.MakeSeed()
	if l.fixed {
		l.publish()
	} else {
		l.startProbe(now)
	}
	return l, nil
}

// withDefaults returns c with its zero fields set to their defaults (the
// shed.Default* constants), and Buffer and ProbeJitter zero when NoBuffer
// and NoProbeJitter say so. A default InitialLimit outside the bounds set
// moves into them.
func withDefaults(c shed.Config) shed.Config {
	c.MinLimit = cmp.Or(c.MinLimit, shed.DefaultMinLimit)
	c.MaxLimit = cmp.Or(c.MaxLimit, shed.DefaultMaxLimit)
	c.InitialLimit = cmp.Or(c.InitialLimit, min(max(shed.DefaultInitialLimit, c.MinLimit), c.MaxLimit))
	if c.Buffer == 0 && !c.NoBuffer {
		c.Buffer = shed.DefaultBuffer
	}
	c.Window = cmp.Or(c.Window, shed.DefaultWindow)
	c.ProbeInterval = cmp.Or(c.ProbeInterval, shed.DefaultProbeInterval)
	if c.ProbeJitter == 0 && !c.NoProbeJitter {
		c.ProbeJitter = shed.DefaultProbeJitter
	}
	c.ProbeLimit = cmp.Or(c.ProbeLimit, shed.DefaultProbeLimit)
	c.ProbeSamples = cmp.Or(c.ProbeSamples, shed.DefaultProbeSamples)
	if c.Clock == nil {
		c.Clock = clock.Real
	}
	return c
}

// Config returns the Limiter's configuration, its defaults filled in,
// Clock included.
func (l *Limiter) Config() shed.Config { return l.cfg }

// Acquire admits a request if fewer than the limit are in flight: it
// returns its Token and true, and the request counts as in flight until
// Release. Otherwise it returns false and the request should be answered
// busy, with Pushback.
func (l *Limiter) Acquire() (Token, bool) {
	probe, ok := l.admitOne()
	if !ok {
		if probe != 0 {
			l.refused(l.clk.Now())
		}
		return Token{}, false
	}
	return Token{start: l.clk.Since(l.epoch), probe: probe}, true
}

// AcquireAt is Acquire at time now.
func (l *Limiter) AcquireAt(now time.Time) (Token, bool) {
	probe, ok := l.admitOne()
	if !ok {
		if probe != 0 {
			l.refused(now)
		}
		return Token{}, false
	}
	return Token{start: now.Sub(l.epoch), probe: probe}, true
}

// admitOne counts a request in flight if that keeps them within the limit,
// and returns the probe in progress.
func (l *Limiter) admitOne() (probe uint32, ok bool) {
	s := l.admit.Load()
	if l.inFlight.Add(1) > int64(uint32(s)) {
		l.inFlight.Add(-1)
		return uint32(s >> 32), false
	}
	return uint32(s >> 32), true
}

// refused is told of a refusal during a probe: it ends the probe if its
// time is up, so that requests that never finish (hung, or long polls)
// cannot hold the limit at ProbeLimit.
func (l *Limiter) refused(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.probing && !now.Before(l.probeEnd) {
		l.endProbe(now)
	}
}

// Cancel gives back an admitted request that never ran: it no longer
// counts in flight, and no latency is recorded for it.
func (l *Limiter) Cancel(t Token) {
	l.releaseSlot(t)
	l.inFlight.Add(-1)
}

// Release ends an admitted request and records its latency.
func (l *Limiter) Release(t Token) {
	since := l.clk.Since(l.epoch)
	l.release(t, l.epoch.Add(since), since-t.start)
}

// ReleaseAt is Release at time now.
func (l *Limiter) ReleaseAt(t Token, now time.Time) { l.release(t, now, now.Sub(l.epoch)-t.start) }

// release ends an admitted request that took rtt, at time now.
func (l *Limiter) release(t Token, now time.Time, rtt time.Duration) {
	l.releaseSlot(t)
	inFlight := l.inFlight.Add(-1) + 1
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.probing {
		// Only requests admitted during the probe, under its low limit,
		// measure the no-load latency; the ones admitted before it may
		// have queued.
		if !now.Before(l.probeEnd) {
			if t.probe == l.probe {
				l.samples[l.nSamples] = rtt
				l.nSamples++
			}
			l.endProbe(now)
			return
		}
		if t.probe == l.probe {
			l.samples[l.nSamples] = rtt
			l.nSamples++
			if l.nSamples == l.cfg.ProbeSamples {
				l.endProbe(now)
			}
		}
		return
	}
	l.sum += rtt
	l.n++
	l.maxInFlight = max(l.maxInFlight, inFlight)
	if now.Sub(l.windowStart) >= l.cfg.Window {
		l.update(now)
	}
}

// update ends a window: it sets the limit from the window's mean latency,
// or starts a probe when one is due. Call it with l.mu held.
func (l *Limiter) update(now time.Time) {
	avg := l.sum / time.Duration(l.n)
	full := float64(l.maxInFlight) >= l.limit/2
	l.windowStart, l.sum, l.n, l.maxInFlight = now, 0, 0, 0
	l.latency = avg
	if l.fixed {
		if l.noLoad == 0 || avg < l.noLoad {
			l.noLoad = avg
		}
		l.setPushback(avg)
		return
	}
	if !now.Before(l.nextProbe) {
		l.startProbe(now)
		return
	}
	if avg < l.noLoad || l.noLoad == 0 {
		// Faster than the last probe measured (the handler got faster),
		// or no probe measured anything: take the window's mean.
		l.noLoad = max(avg, 1) // a zero latency would make the gradient infinite
	}
	gradient := min(2, max(0.5, float64(l.noLoad)*(1+l.cfg.Buffer)/float64(avg)))
	next := l.limit*gradient + math.Sqrt(l.limit)
	if !full {
		// Too few in flight to learn the capacity from: the limit may
		// fall but not rise (with a gradient just under 1 the square
		// root would otherwise lift it window after window).
		next = min(next, l.limit)
	}
	l.limit = min(float64(l.cfg.MaxLimit), max(float64(l.cfg.MinLimit), next))
	l.setPushback(avg)
	l.publish()
}

// setPushback sets the pushback from a window's mean latency: the queueing
// delay, at least the no-load latency and at least minPushback.
func (l *Limiter) setPushback(avg time.Duration) {
	l.pushback.Store(int64(max(avg-l.noLoad, l.noLoad, minPushback)))
}

// startProbe pins the limit to ProbeLimit. Call it with l.mu held.
func (l *Limiter) startProbe(now time.Time) {
	l.probing = true
	l.probe++
	if l.probe == 0 { // never 0: that marks tokens admitted outside probes
		l.probe = 1
	}
	l.probeEnd = now.Add(max(minProbeTime, probeTimeShare*l.noLoad))
	l.nSamples = 0
	l.publish()
}

// endProbe takes the probe's median latency as the no-load latency and
// restores the limit. Call it with l.mu held.
func (l *Limiter) endProbe(now time.Time) {
	if s := l.samples[:l.nSamples]; len(s) > 0 {
		slices.Sort(s)
		l.noLoad = max(s[len(s)/2], 1) // a zero latency would make the gradient infinite
	} // else the probe timed out with nothing measured: keep the last L0
	l.probing = false
	l.windowStart, l.sum, l.n, l.maxInFlight = now, 0, 0, 0
	interval := max(l.cfg.ProbeInterval, probeShare*l.noLoad)
	jitter := 1 + l.cfg.ProbeJitter*(2*l.rng.Float64()-1)
	l.nextProbe = now.Add(time.Duration(float64(interval) * jitter))
	if l.pushback.Load() == 0 && l.noLoad > 0 {
		l.setPushback(l.noLoad)
	}
	l.publish()
}

// publish stores the admission limit and the probe in progress for
// Acquire. Call it with l.mu held (or before the Limiter is shared).
func (l *Limiter) publish() {
	limit, probe := uint64(max(1, int64(l.limit))), uint64(0)
	l.normal.Store(int64(limit))
	if l.probing {
		limit, probe = uint64(min(l.cfg.ProbeLimit, l.cfg.MaxLimit)), uint64(l.probe)
	}
	l.admit.Store(probe<<32 | limit)
}

// Limit returns how many requests the Limiter admits at once now (the
// probe limit during a probe).
func (l *Limiter) Limit() int { return int(uint32(l.admit.Load())) }

// InFlight returns how many admitted requests have not been released.
func (l *Limiter) InFlight() int { return int(l.inFlight.Load()) }

// Pushback returns how long a refused client should wait before trying
// again: the current queueing delay, at least the no-load latency and at
// least a millisecond.
func (l *Limiter) Pushback() time.Duration {
	return max(time.Duration(l.pushback.Load()), minPushback)
}

// State is a snapshot of a Limiter, for status pages and simulations.
type State struct {
	// Limit is the limit requests are admitted under now: ProbeLimit
	// while probing.
	Limit int
	// Estimate is the adaptive limit itself, with its fraction.
	Estimate float64
	// InFlight counts the admitted requests not yet released.
	InFlight int
	// Latency is the mean latency of the last window's requests.
	Latency time.Duration
	// NoLoadLatency is the no-load latency measured by the last probe
	// (the least window mean for a fixed limit); 0 before the first.
	NoLoadLatency time.Duration
	// Pushback is what Pushback returns.
	Pushback time.Duration
	// Probing reports a probe in progress.
	Probing bool
}

// State returns a snapshot of the Limiter.
func (l *Limiter) State() State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return State{
		Limit:         l.Limit(),
		Estimate:      l.limit,
		InFlight:      l.InFlight(),
		Latency:       l.latency,
		NoLoadLatency: l.noLoad,
		Pushback:      l.Pushback(),
		Probing:       l.probing,
	}
}
