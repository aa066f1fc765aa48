package ratelimit

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/pacing"
)

// sec turns float seconds into a Duration.
func sec(s float64) time.Duration { return time.Duration(math.Round(s * float64(time.Second))) }

// near reports whether a and b differ by at most a microsecond (the pacers
// keep float seconds).
func near(a, b time.Duration) bool { return (a - b).Abs() <= time.Microsecond }

func remaining(n int64) pacing.Signal {
	return pacing.Signal{Fields: pacing.FieldRemaining, Remaining: n}
}

// step is one thing that happens to a pacer, and what it must answer.
type step struct {
	op    string // "before", "429", "ok"
	at    time.Duration
	sig   pacing.Signal
	want  time.Duration // the sleep returned by before / 429
	sleep time.Duration // Sleep() afterwards
}

func runSteps(t *testing.T, p Pacer, steps []step) {
	t.Helper()
	for i, s := range steps {
		at := now.Add(s.at)
		var got time.Duration
		switch s.op {
		case "before":
			got = p.Before(at)
		case "429":
			got = p.OnRateLimited(at, s.sig)
		case "ok":
			p.OnSuccess(at, s.sig)
			got = s.want
		}
		if !near(got, s.want) {
			t.Fatalf("step %d (%s): returned %v, want %v", i, s.op, got, s.want)
		}
		if sl := p.Sleep(); !near(sl, s.sleep) {
			t.Fatalf("step %d (%s): Sleep() = %v, want %v", i, s.op, sl, s.sleep)
		}
	}
}

func newPacer(t *testing.T, c pacing.Config) Pacer {
	t.Helper()
	if c.Rand == nil {
		c.Rand = func() float64 { return 0 } // no jitter: exact arithmetic
	}
	p, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Heroku's figures: 4500 per hour gives a minimum sleep of 0.8 s, and a
// rate-limited response makes the sleep (sleep + 0.8) * 1.2.
func TestPacerArithmetic(t *testing.T) {
	tests := []struct {
		name  string
		cfg   pacing.Config
		steps []step
	}{
		{name: "null", cfg: pacing.Config{}, steps: []step{
			{op: "before", want: 0},
			{op: "429", sig: remaining(0), want: 0},
			{op: "ok", sig: remaining(10)},
		}},
		{name: "exponential backoff", cfg: pacing.Config{Strategy: pacing.StrategyExponentialBackoff, InitialSleep: 5 * time.Second}, steps: []step{
			{op: "before", want: 0},
			{op: "429", want: sec(0.8), sleep: sec(0.8)},
			{op: "429", at: sec(1), want: sec(0.96), sleep: sec(0.96)},
			{op: "429", at: sec(2), want: sec(1.152), sleep: sec(1.152)},
			{op: "ok", at: sec(4), sig: remaining(0)},
			{op: "before", at: sec(4), want: 0},
			{op: "429", at: sec(5), want: sec(0.8), sleep: sec(0.8)}, // starts again
		}},
		{name: "exponential backoff x2", cfg: pacing.Config{Strategy: pacing.StrategyExponentialBackoff, Multiplier: 2}, steps: []step{
			{op: "429", want: sec(0.8), sleep: sec(0.8)},
			{op: "429", at: sec(1), want: sec(1.6), sleep: sec(1.6)},
			{op: "429", at: sec(3), want: sec(3.2), sleep: sec(3.2)},
		}},
		{name: "gradual decrease", cfg: pacing.Config{Strategy: pacing.StrategyGradualDecrease}, steps: []step{
			{op: "before", want: 0},
			{op: "429", want: sec(0.96), sleep: sec(0.96)},
			{op: "429", at: sec(1), want: sec(2.112), sleep: sec(2.112)},
			{op: "ok", at: sec(4), sig: remaining(4000), sleep: sec(1.312)},
			{op: "before", at: sec(4), want: sec(1.312), sleep: sec(1.312)},
			{op: "ok", at: sec(6), sleep: sec(0.512)},
			{op: "ok", at: sec(7), sleep: 0}, // never below 0
		}},
		{name: "proportional decrease", cfg: pacing.Config{Strategy: pacing.StrategyProportionalDecrease, InitialSleep: 9 * time.Second}, steps: []step{
			{op: "before", want: 9 * time.Second, sleep: 9 * time.Second},
			{op: "ok", sig: remaining(4500), sleep: sec(9 - 9.0/4500)},
			{op: "429", at: sec(10), want: sec((9 - 9.0/4500 + 0.8) * 1.2), sleep: sec((9 - 9.0/4500 + 0.8) * 1.2)},
		}},
		{name: "proportional remaining decrease", cfg: pacing.Config{Strategy: pacing.StrategyProportionalRemainingDecrease, InitialSleep: 10 * time.Second}, steps: []step{
			{op: "before", want: 10 * time.Second, sleep: 10 * time.Second},
			{op: "ok", sig: remaining(0), sleep: 10 * time.Second},                        // nothing left: no decrease
			{op: "ok", sig: remaining(2250), sleep: 5 * time.Second},                      // half left: halve
			{op: "ok", sig: remaining(450), sleep: 4500 * ms},                             // 10% left
			{op: "429", at: sec(1), sig: remaining(0), want: sec(6.36), sleep: sec(6.36)}, // (4.5+0.8)*1.2
			{op: "ok", at: sec(9), sig: pacing.Signal{Fields: pacing.FieldRemaining | pacing.FieldLimit, Remaining: 1, Limit: 4}, sleep: sec(6.36 * 0.75)},
			{op: "ok", at: sec(9), sig: remaining(pacing.RemainingPlenty), sleep: 0},
		}},
		{name: "reserve", cfg: pacing.Config{Strategy: pacing.StrategyReserve, InitialSleep: 10 * time.Second}, steps: []step{
			{op: "before", want: 10 * time.Second, sleep: 10 * time.Second},
			// Reserve 0.3% of 4500 = 13.5 requests.
			{op: "ok", sig: remaining(0), sleep: sec(10.4)},                  // empty: brake MinSleep/2
			{op: "ok", sig: remaining(9), sleep: sec(10.4 + 0.4*(4.5/13.5))}, // a third of the reserve missing
			{op: "ok", sig: remaining(2250), sleep: sec((10.4 + 0.4/3) * (1 - 0.497))},
			{op: "429", at: sec(1), want: sec(((10.4+0.4/3)*(1-0.497) + 0.8) * 1.2), sleep: sec(((10.4+0.4/3)*(1-0.497) + 0.8) * 1.2)},
			{op: "ok", at: sec(20), sig: pacing.Signal{}, sleep: sec(((10.4+0.4/3)*(1-0.497) + 0.8) * 1.2 * 0.003)}, // no news: full speed
		}},
		{name: "max sleep caps the raise", cfg: pacing.Config{Strategy: pacing.StrategyProportionalRemainingDecrease, MaxSleep: 2 * time.Second}, steps: []step{
			{op: "429", want: sec(0.96), sleep: sec(0.96)},
			{op: "429", at: sec(1), want: 2 * time.Second, sleep: 2 * time.Second},
			{op: "429", at: sec(3), want: 2 * time.Second, sleep: 2 * time.Second},
		}},
		{name: "limit and window set the minimum sleep", cfg: pacing.Config{Strategy: pacing.StrategyGradualDecrease, Limit: 10, Window: time.Second}, steps: []step{
			{op: "429", want: sec(0.12), sleep: sec(0.12)}, // (0 + 0.1) * 1.2
			{op: "ok", sig: remaining(5), sleep: sec(0.02)},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			runSteps(t, newPacer(t, tc.cfg), tc.steps)
		})
	}
}

func TestPacerJitter(t *testing.T) {
	for _, s := range []pacing.Strategy{pacing.StrategyGradualDecrease, pacing.StrategyProportionalDecrease, pacing.StrategyProportionalRemainingDecrease, pacing.StrategyReserve} {
		p := newPacer(t, pacing.Config{Strategy: s, InitialSleep: 10 * time.Second, Rand: func() float64 { return 0.5 }})
		if got := p.Before(now); got != sec(10.5) { // 10 s + 10% * 0.5
			t.Errorf("%s: Before = %v, want 10.5s", s, got)
		}
		p = newPacer(t, pacing.Config{Strategy: s, InitialSleep: 10 * time.Second, Jitter: 0.5, Rand: func() float64 { return 0.999999 }})
		if got := p.Before(now); got >= 15*time.Second || got < sec(14.99) {
			t.Errorf("%s: Before with 50%% jitter = %v, want just under 15s", s, got)
		}
		p = newPacer(t, pacing.Config{Strategy: s, InitialSleep: 10 * time.Second, Rand: func() float64 { return 7 }}) // a broken source
		if got := p.Before(now); got != 10*time.Second {
			t.Errorf("%s: Before with an out-of-range random number = %v, want 10s", s, got)
		}
	}
}

// Calls in flight together that are all refused raise the shared sleep
// once, not once each.
func TestPacerBurstRaisesOnce(t *testing.T) {
	for _, s := range []pacing.Strategy{pacing.StrategyExponentialBackoff, pacing.StrategyProportionalRemainingDecrease, pacing.StrategyReserve} {
		p := newPacer(t, pacing.Config{Strategy: s})
		first := p.OnRateLimited(now, remaining(0))
		for range 10 {
			if got := p.OnRateLimited(now.Add(100*ms), remaining(0)); got > first*2 {
				t.Fatalf("%s: a burst of 429s raised the wait to %v (first %v)", s, got, first)
			}
		}
		if got := p.OnRateLimited(now.Add(3*time.Second), remaining(0)); !(got > first) {
			t.Fatalf("%s: a 429 after the sleep did not raise it: %v", s, got)
		}
	}
}

func TestPacerConcurrent(t *testing.T) {
	for _, s := range pacing.Strategies() {
		p, err := New(pacing.Config{Strategy: s})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 200 {
					at := now.Add(time.Duration(i) * time.Second)
					_ = p.Before(at)
					if (i+g)%3 == 0 {
						_ = p.OnRateLimited(at, remaining(0))
					} else {
						p.OnSuccess(at, remaining(int64(i)))
					}
					if p.Sleep() < 0 {
						t.Error("negative sleep")
					}
				}
			})
		}
		wg.Wait()
	}
}

// New refuses what pacing.Config.Validate refuses, and makes the pacer of every
// strategy pacing.Strategies lists.
func TestNewValidates(t *testing.T) {
	if _, err := New(pacing.Config{Limit: -1}); err == nil {
		t.Error("New(pacing.Config{Limit: -1}) = nil error, want Validate's")
	}
	for _, st := range pacing.Strategies() {
		if _, err := New(pacing.Config{Strategy: st}); err != nil {
			t.Errorf("New(%s): %v", st, err)
		}
	}
}

func BenchmarkPacer(b *testing.B) {
	p, err := New(pacing.Config{Strategy: pacing.StrategyProportionalRemainingDecrease})
	if err != nil {
		b.Fatal(err)
	}
	sig := remaining(100)
	b.ReportAllocs()
	for b.Loop() {
		_ = p.Before(now)
		p.OnSuccess(now, sig)
	}
}
