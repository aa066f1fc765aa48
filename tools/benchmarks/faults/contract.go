package faults

import (
	"fmt"
	"time"

	"github.com/sluice-rpc/sluice/backoff"
	"github.com/sluice-rpc/sluice/internal/testkit/slowtest"
)

// Contract is Sluice's failure handling contract in numbers (the README's
// "When things break"); DefaultContract gives them, Check applies them.
type Contract struct {
	// MaxConnectsPerCall bounds the TCP connections per call when every
	// peer refuses connections or accepts and closes them.
	MaxConnectsPerCall float64
	// Backoff is gRPC's connection backoff, written out so that the
	// contract does not follow the code it checks: after the first second
	// of an outage no peer is dialed more often than it allows.
	Backoff backoff.Exponential
	// FastFail bounds every call from 1 s into a full outage.
	FastFail time.Duration
	// KilledPick and SilentPick bound how long after a peer's death, or
	// its silence (frozen, stalled), a call may still choose it.
	KilledPick, SilentPick time.Duration
	// EjectedShare bounds the share of the calls after the erroring
	// peer's streak that choose it.
	EjectedShare float64
	// SlowFirstShare bounds the share of the calls from 1 s after the
	// fault whose first attempt goes to the latency scenario's slow peer.
	SlowFirstShare float64
	// DeadlineSlack is how much later than its deadline a call may
	// return, and a hedged call whose hedge won later than HedgingDelay,
	// beyond the run's SchedDelay.
	DeadlineSlack time.Duration
	// BusyAttemptsPer10s bounds the server attempts per call of a 10 s
	// run (+10%) when every handler answers BUSY, under RetryBucket.
	BusyAttemptsPer10s float64
	// GoroutineSlack and HeapSlack bound how far above its baseline a run
	// may leave the goroutine count and the live heap.
	GoroutineSlack int
	HeapSlack      uint64
}

// DefaultContract returns the contract's numbers.
func DefaultContract() Contract {
	slack := 20 * time.Millisecond
	if slowtest.Race {
		slack = 100 * time.Millisecond
	}
	return Contract{
		MaxConnectsPerCall: 1.2,
		Backoff: backoff.Exponential{Initial: time.Second, Max: 120 * time.Second, Multiplier: 1.6,
			Jitter: backoff.ProportionalJitter, Spread: 0.2},
		FastFail:           10 * time.Millisecond,
		KilledPick:         time.Second,
		SilentPick:         5 * time.Second,
		EjectedShare:       0.01,
		SlowFirstShare:     0.005,
		DeadlineSlack:      slack,
		BusyAttemptsPer10s: 0.16,
		GoroutineSlack:     2,
		HeapSlack:          4 << 20,
	}
}

// MaxAttempts returns the most connection attempts b allows one peer in
// [from, to], its first failing at 0: every wait as short as the jitter
// allows, plus one attempt for when that first one was.
func MaxAttempts(b backoff.Exponential, from, to time.Duration) int {
	n := 1
	t := time.Duration(0)
	for failures := 1; t <= to; failures++ {
		if t >= from {
			n++
		}
		t += time.Duration(float64(b.Ceiling(failures)) * (1 - b.Spread))
	}
	return n
}

// Check returns the promises r breaks, each a sentence saying which and by
// how much (Result.Problems aside).
func (c Contract) Check(r *Result) []string {
	var v []string
	fail := func(format string, a ...any) { v = append(v, fmt.Sprintf(format, a...)) }
	cfg := r.Config
	if r.Calls == 0 {
		return []string{"no call was made"}
	}
	if r.Hung > 0 {
		fail("deadlines hold: %d calls never returned", r.Hung)
	}
	slack := c.DeadlineSlack + r.SchedDelay.D()
	if limit := cfg.Deadline.D() + slack; r.Max.D() > limit {
		fail("deadlines hold: the slowest call took %v, %v over its %v deadline (allowed: %v + %v the machine held timers back)",
			ms(r.Max.D()), ms(r.OverDeadline()), ms(cfg.Deadline.D()), ms(c.DeadlineSlack), ms(r.SchedDelay.D()))
	}
	if cfg.Setup == HedgePolicy && r.Faulty != "" && r.OK > 0 {
		if limit := HedgingDelay + slack; r.MaxOK.D() > limit {
			fail("hedge losers return at once: the slowest successful hedged call took %v (allowed: hedgingDelay %v + %v + %v the machine held timers back)",
				ms(r.MaxOK.D()), ms(HedgingDelay), ms(c.DeadlineSlack), ms(r.SchedDelay.D()))
		}
	}
	switch cfg.Scenario {
	case Refused, AcceptClose:
		what := "accepted"
		if cfg.Scenario == Refused {
			what = "dialed"
		}
		if got := r.ConnectsPerCall(); got > c.MaxConnectsPerCall {
			fail("a failure never becomes a storm: %.2f TCP connections %s per call (allowed: %.1f), %.0fx over",
				got, what, c.MaxConnectsPerCall, got/c.MaxConnectsPerCall)
		}
		if r.Elapsed.D() > time.Second {
			allowed := 3 * MaxAttempts(c.Backoff, time.Second, r.Elapsed.D())
			if r.ConnectsAfter1s > allowed {
				fail("connection backoff: %d connections %s after the first second (%.0f/s), gRPC's backoff allows %d for three peers, %.0fx over",
					r.ConnectsAfter1s, what, r.ConnectsPerSecondAfter1s(), allowed, float64(r.ConnectsAfter1s)/float64(allowed))
			}
		}
		if r.CallsAfter1s > 0 && r.MaxAfter1s.D() >= c.FastFail {
			fail("fail fast when every peer is in transient failure: the slowest call after the first second took %v (allowed: under %v)",
				ms(r.MaxAfter1s.D()), ms(c.FastFail))
		}
	case Declined:
		// A call still out after HedgingDelay may have run the handler
		// up to maxAttempts (3) times, its hedges sent before any answer.
		allowed := r.Calls
		if cfg.Setup == HedgePolicy {
			allowed += 2 * r.HedgeDue
		}
		if r.Executions > allowed {
			fail("a handler runs once unless the policy names the code: %.2f executions per call of a DECLINED handler (allowed: %.2f, %d calls of which %d were out past the hedging delay)",
				r.ExecutionsPerCall(), per(allowed, r.Calls), r.Calls, r.HedgeDue)
		}
	case Busy:
		allowed := c.BusyAttemptsPer10s * 1.1 * cfg.Rate * 10
		if float64(r.Executions) > allowed {
			fail("busy throttling and the bucket bound attempts: %d server attempts (%.3f per call), allowed %.0f (%.2f per call over 10 s at this rate, +10%%)",
				r.Executions, r.ExecutionsPerCall(), allowed, c.BusyAttemptsPer10s)
		}
	case Kill:
		if r.PickedAfterFault && r.LastPick.D() > c.KilledPick {
			fail("a dead peer is not chosen: a call chose the killed peer %v after the kill (allowed: %v); %.0f%% of calls from 1 s after the kill tried it first",
				sec(r.LastPick.D()), sec(c.KilledPick), 100*max(r.FirstShare, 0))
		}
	case Freeze, Stall:
		if r.PickedAfterFault && r.LastPick.D() > c.SilentPick {
			fail("a silent peer is found dead: a call chose it %v after it went silent (allowed: %v); %.0f%% of calls from 1 s after tried it first",
				sec(r.LastPick.D()), sec(c.SilentPick), 100*max(r.FirstShare, 0))
		}
	case Erroring:
		if share := r.AfterStreakShare(); share >= c.EjectedShare {
			fail("an erroring peer is ejected: %d of the %d calls (%.1f%%) starting after its %d UNEXPECTEDs in a row (%v in) chose it (allowed: under %.0f%%)",
				r.PickedAfterStreak, r.CallsAfterStreak, 100*share, ErrorStreak, sec(r.StreakAt.D()), 100*c.EjectedShare)
		}
	case Latency:
		if r.FirstShare >= c.SlowFirstShare {
			fail("a slow peer gets almost no first attempts: %.1f%% of the calls from 1 s in tried it first (allowed: under %.1f%%)",
				100*r.FirstShare, 100*c.SlowFirstShare)
		}
	}
	switch cfg.Scenario {
	case BlackHole, Reset, Kill, Freeze, Stall:
		if window := r.Elapsed - r.FaultAt; r.Faulty != "" && window.D() > time.Second {
			if allowed := MaxAttempts(c.Backoff, time.Second, window.D()); r.FaultyConnects > allowed {
				fail("connection backoff: %d connection attempts to the failing peer from 1 s after its fault, gRPC's backoff allows %d",
					r.FaultyConnects, allowed)
			}
		}
	}
	if cfg.Shared {
		return v // the goroutines and the heap were the group's
	}
	if r.GoroutinesAfter > r.GoroutinesBefore+c.GoroutineSlack {
		fail("nothing outlives a call: %d goroutines after the run, %d before (allowed: +%d)",
			r.GoroutinesAfter, r.GoroutinesBefore, c.GoroutineSlack)
	}
	if r.HeapAfter > r.HeapBefore+c.HeapSlack {
		fail("nothing outlives a call: %.1f MiB of heap after the run, %.1f MiB before (allowed: +%.0f MiB)",
			mib(r.HeapAfter), mib(r.HeapBefore), mib(c.HeapSlack))
	}
	return v
}

func ms(d time.Duration) string  { return d.Round(100 * time.Microsecond).String() }
func sec(d time.Duration) string { return d.Round(10 * time.Millisecond).String() }
func mib(b uint64) float64       { return float64(b) / (1 << 20) }
