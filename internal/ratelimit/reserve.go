package ratelimit

import (
	"time"

	"github.com/sluice-rpc/sluice/pacing"
)

// reserveBrake is the sleep the reserve pacer adds after a success that
// left the bucket empty, as a fraction of MinSleep; a success that left
// part of the reserve adds proportionally less.
const reserveBrake = 0.5

// reserve is pacing.StrategyReserve: Heroku's proportional-remaining-decrease
// pacer, measured from a small reserve instead of from an empty bucket.
//
// After a success that leaves a fraction f of the quota (Remaining/Limit)
// and a reserve fraction ρ (pacing.Config.Reserve):
//
//	f >= ρ: sleep -= sleep * (f - ρ)                  speed up, as Heroku's does
//	f <  ρ: sleep += MinSleep * 0.5 * (ρ - f) / ρ     brake before the first 429
//
// A rate-limited response raises the sleep as Heroku's strategies do:
// sleep = (sleep + MinSleep) * Multiplier. The brake makes the clients
// sharing a quota slow down while it is nearly spent, so fewer of them run
// into an empty bucket; because the brake is additive, the fastest
// clients (who see the most low-quota responses) brake the most, which
// evens out the clients' shares.
type reserve struct {
	sticky  // Before, OnRateLimited and Sleep are Heroku's
	reserve float64
}

func newReserve(cfg pacing.Config) *reserve {
	r := &reserve{reserve: cfg.Reserve}
	r.init(cfg)
	return r
}

func (p *reserve) OnSuccess(_ time.Time, s pacing.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := RemainingFraction(s, p.cfg.Limit)
	if f >= p.reserve {
		p.sleep -= p.sleep * (f - p.reserve)
	} else {
		p.sleep += p.minSleep * reserveBrake * (p.reserve - f) / p.reserve
	}
	p.clamp()
}
