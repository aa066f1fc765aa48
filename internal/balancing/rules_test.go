package balancing

import (
	"math"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/balance"
)

// The slow-start curve is Envoy's: max(minimum, (t / window)^(1/a)).
func TestSlowStartFactor(t *testing.T) {
	for _, tt := range []struct {
		s    SlowStart
		at   time.Duration
		want float64
	}{
		{SlowStart{}, -time.Second, 0.1},
		{SlowStart{}, 0, 0.1},
		{SlowStart{}, 500 * time.Millisecond, 0.1}, // 0.05 < minimum
		{SlowStart{}, 2500 * time.Millisecond, 0.25},
		{SlowStart{}, 5 * time.Second, 0.5},
		{SlowStart{}, 9999 * time.Millisecond, 0.9999},
		{SlowStart{}, 10 * time.Second, 1},
		{SlowStart{}, time.Hour, 1},
		{SlowStart{Aggression: 2}, 2500 * time.Millisecond, 0.5}, // sqrt(0.25)
		{SlowStart{Aggression: 0.5}, 5 * time.Second, 0.25},      // 0.5^2
		{SlowStart{Window: time.Second, MinWeight: 0.01}, 5 * time.Millisecond, 0.01},
		{SlowStart{Window: time.Second, MinWeight: 0.01}, 500 * time.Millisecond, 0.5},
		{SlowStart{Disabled: true}, 0, 1},
	} {
		if got := tt.s.Factor(tt.at); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("%+v.Factor(%v) = %v, want %v", tt.s, tt.at, got, tt.want)
		}
		if ramping := tt.s.Ramping(tt.at, time.Hour); ramping != (tt.want < 1) {
			t.Errorf("%+v.Ramping(%v, 1h) = %v, want %v", tt.s, tt.at, ramping, tt.want < 1)
		}
	}
}

// Ejections grow by the base time while a peer keeps failing soon after
// its return, are capped, and are forgiven a base time per base time of
// good behaviour.
func TestEjectionGrowth(t *testing.T) {
	var e Ejection
	k, end := 0, time.Duration(0)
	for i, want := range []time.Duration{30 * time.Second, time.Minute, 90 * time.Second} {
		k = e.Multiplier(k, 0) // ejected again as soon as it returned
		if got := e.Duration(k); got != want {
			t.Fatalf("ejection %d lasts %v, want %v", i+1, got, want)
		}
		end += e.Duration(k)
	}
	if got := e.Duration(100); got != balance.DefaultMaxEjectionTime {
		t.Fatalf("the 100th ejection lasts %v, want the cap %v", got, balance.DefaultMaxEjectionTime)
	}
	if got := e.Duration(math.MaxInt); got != balance.DefaultMaxEjectionTime {
		t.Fatalf("Duration(MaxInt) = %v, want the cap", got)
	}
	for _, tt := range []struct {
		last  int
		since time.Duration
		want  int
	}{
		{0, 0, 1},
		{3, 0, 4},
		{3, 29 * time.Second, 4},
		{3, 30 * time.Second, 3},
		{3, 61 * time.Second, 2},
		{3, 90 * time.Second, 1},
		{3, time.Hour, 1},
	} {
		if got := e.Multiplier(tt.last, tt.since); got != tt.want {
			t.Errorf("Multiplier(%d, %v) = %d, want %d", tt.last, tt.since, got, tt.want)
		}
	}
}

func TestEjectionCapAndPanic(t *testing.T) {
	var e Ejection
	for _, tt := range []struct{ n, want int }{{1, 1}, {4, 1}, {10, 1}, {19, 1}, {20, 2}, {100, 10}} {
		if got := e.MaxEjected(tt.n); got != tt.want {
			t.Errorf("MaxEjected(%d) = %d, want %d", tt.n, got, tt.want)
		}
	}
	if got := (Ejection{MaxPercent: 30}).MaxEjected(10); got != 3 {
		t.Errorf("30%% of 10: %d, want 3", got)
	}
	for _, tt := range []struct {
		available, n int
		want         bool
	}{{2, 4, false}, {1, 4, true}, {5, 10, false}, {4, 10, true}, {0, 1, true}} {
		if got := e.Panic(tt.available, tt.n); got != tt.want {
			t.Errorf("Panic(%d of %d) = %v, want %v", tt.available, tt.n, got, tt.want)
		}
	}
}

// Bounded load: ceil(c (m+1) w / W), and the capacities always add up to
// more than the calls in flight plus one.
func TestCapacity(t *testing.T) {
	for _, tt := range []struct {
		m        int64
		w, total float64
		want     int64
	}{
		{0, 1, 10, 1},      // ceil(0.125)
		{9, 1, 10, 2},      // ceil(1.25)
		{99, 1, 10, 13},    // ceil(12.5)
		{99, 4, 7, 72},     // ceil(71.43)
		{1000, 1, 1, 1252}, // one peer: everything, and more
	} {
		if got := Capacity(balance.DefaultBalanceFactor, tt.m, tt.w, tt.total); got != tt.want {
			t.Errorf("Capacity(1.25, %d, %v, %v) = %d, want %d", tt.m, tt.w, tt.total, got, tt.want)
		}
	}
	for m := int64(0); m < 500; m++ {
		var sum int64
		for range 10 {
			sum += Capacity(balance.DefaultBalanceFactor, m, 1, 10)
		}
		if sum <= m {
			t.Fatalf("at %d in flight the 10 capacities add up to %d: no room for the next call", m, sum)
		}
	}
}
