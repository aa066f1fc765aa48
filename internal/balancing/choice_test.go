package balancing

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// Peers that become ready within a second of the earliest (or a tenth of
// a shorter window) are new together and do not ramp.
func TestRampingOnlyBehindTheFleet(t *testing.T) {
	for _, tt := range []struct {
		s               SlowStart
		elapsed, behind time.Duration
		want            bool
	}{
		{SlowStart{}, time.Second, 0, false},
		{SlowStart{}, time.Second, 999 * time.Millisecond, false},
		{SlowStart{}, time.Second, time.Second, true},
		{SlowStart{}, 10 * time.Second, time.Minute, false}, // past the window
		{SlowStart{Window: 2 * time.Second}, time.Second, 199 * time.Millisecond, false},
		{SlowStart{Window: 2 * time.Second}, time.Second, 200 * time.Millisecond, true},
		{SlowStart{Disabled: true}, time.Second, time.Minute, false},
	} {
		if got := tt.s.Ramping(tt.elapsed, tt.behind); got != tt.want {
			t.Errorf("%+v.Ramping(%v, %v) = %v, want %v", tt.s, tt.elapsed, tt.behind, got, tt.want)
		}
	}
}

// Slow: 5x and 5 ms above the reference; for a ramping peer (the cold
// rule) 2x and 1 ms.
func TestSlow(t *testing.T) {
	ms := time.Millisecond
	for _, tt := range []struct {
		lat, ref time.Duration
		ramping  bool
		want     bool
	}{
		{100 * ms, ms, false, true},
		{5 * ms, ms, false, false},                  // 5x, not more
		{5100 * time.Microsecond, ms, false, false}, // over 5x, but not 5 ms above
		{6100 * time.Microsecond, ms, false, true},
		{4 * ms, 200 * time.Microsecond, false, false}, // 20x, 3.8 ms above: jitter
		{2100 * time.Microsecond, ms, true, true},
		{2 * ms, ms, true, false},
		{1500 * time.Microsecond, 500 * time.Microsecond, true, false}, // 3x, 1 ms above, not more
		{6 * ms, 2 * ms, true, true},
	} {
		if got := Slow(tt.lat, tt.ref, tt.ramping); got != tt.want {
			t.Errorf("Slow(%v, %v, %v) = %v, want %v", tt.lat, tt.ref, tt.ramping, got, tt.want)
		}
	}
}

// Better: fewer pending first, then a latency under half the other's and
// over a millisecond below it.
func TestBetter(t *testing.T) {
	ms, us := time.Millisecond, time.Microsecond
	for _, tt := range []struct {
		pa, pb int64
		la, lb time.Duration
		want   bool
	}{
		{1, 2, 10 * ms, ms, true},
		{2, 1, ms, 10 * ms, false},
		{1, 1, ms, 3 * ms, true},
		{1, 1, ms, 2 * ms, false},          // exactly half: a tie
		{1, 1, 100 * us, 400 * us, false},  // a quarter, but 0.3 ms apart: a tie
		{1, 1, 500 * us, 1500 * us, false}, // a third, exactly 1 ms apart: a tie
		{1, 1, 500 * us, 1600 * us, true},
		{1, 1, 0, 3 * ms, false}, // unknown is never better
		{1, 1, ms, 0, false},
	} {
		if got := Better(tt.pa, tt.pb, tt.la, tt.lb); got != tt.want {
			t.Errorf("Better(%d, %d, %v, %v) = %v, want %v", tt.pa, tt.pb, tt.la, tt.lb, got, tt.want)
		}
	}
}

// The lottery: with keys (pending / w + 1) / w x Exp(1), peer i wins in
// proportion to w_i / (1 + pending_i / w_i). The variates come from a
// seeded source, so the test is deterministic.
func TestLotteryKeyShares(t *testing.T) {
	weights := []float64{1, 2, 4}
	pending := []int64{0, 3, 2}
	want := make([]float64, len(weights))
	sum := 0.0
	for i, w := range weights {
		want[i] = w / (1 + float64(pending[i])/w)
		sum += want[i]
	}
	exp := rand.New(rand.NewPCG(1, 2)).ExpFloat64 // seeded: deterministic
	const n = 300_000
	wins := make([]int, len(weights))
	for range n {
		best, bestKey := -1, 0.0
		for i, w := range weights {
			if k := LotteryKey(pending[i], w, w, exp()); best < 0 || k < bestKey {
				best, bestKey = i, k
			}
		}
		wins[best]++
	}
	for i := range weights {
		if got, exp := float64(wins[i])/n, want[i]/sum; math.Abs(got-exp) > 0.01 {
			t.Errorf("peer %d (weight %v, %d pending) won %.3f of the draws, want %.3f", i, weights[i], pending[i], got, exp)
		}
	}
	if LotteryKey(3, 2, 1, 1) != 2.5 {
		t.Errorf("LotteryKey(3, 2, 1, 1) = %v, want (3/2 + 1) / 1 = 2.5", LotteryKey(3, 2, 1, 1))
	}
}
