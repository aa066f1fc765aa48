package backoff

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

const ms = time.Millisecond

func TestCeiling(t *testing.T) {
	grpc := Exponential{Initial: 100 * ms, Max: time.Second, Multiplier: 2}
	tests := []struct {
		name string
		b    Exponential
		n    int
		want time.Duration
	}{
		{"first retry", grpc, 1, 100 * ms},
		{"n below 1 is the first", grpc, 0, 100 * ms},
		{"second", grpc, 2, 200 * ms},
		{"third", grpc, 3, 400 * ms},
		{"fourth", grpc, 4, 800 * ms},
		{"capped", grpc, 5, time.Second},
		{"huge n does not overflow", grpc, 1 << 30, time.Second},
		{"multiplier below one shrinks", Exponential{Initial: 100 * ms, Max: time.Second, Multiplier: 0.5}, 3, 25 * ms},
		{"multiplier one is constant", Exponential{Initial: 100 * ms, Max: time.Second, Multiplier: 1}, 50, 100 * ms},
		{"max below initial", Exponential{Initial: time.Second, Max: 300 * ms, Multiplier: 2}, 1, 300 * ms},
		{"max near Duration limit", Exponential{Initial: time.Hour, Max: math.MaxInt64, Multiplier: 1e6}, 40, math.MaxInt64},
	}
	for _, tt := range tests {
		if got := tt.b.Ceiling(tt.n); got != tt.want {
			t.Errorf("%s: Ceiling(%d) = %v, want %v", tt.name, tt.n, got, tt.want)
		}
	}
}

func TestDelay(t *testing.T) {
	full := Exponential{Initial: 100 * ms, Max: time.Second, Multiplier: 2}
	equal := full
	equal.Jitter = EqualJitter
	tests := []struct {
		name string
		b    Exponential
		n    int
		r    float64
		want time.Duration
	}{
		{"full r=0", full, 1, 0, 0},
		{"full r=0.5", full, 1, 0.5, 50 * ms},
		{"full r=0.25 third", full, 3, 0.25, 100 * ms},
		{"full capped", full, 9, 0.5, 500 * ms},
		{"full negative r clamps to 0", full, 1, -3, 0},
		{"full NaN r clamps to 0", full, 1, math.NaN(), 0},
		{"equal r=0 is half", equal, 1, 0, 50 * ms},
		{"equal r=0.5", equal, 2, 0.5, 150 * ms},
		{"equal capped", equal, 9, 0.5, 750 * ms},
	}
	for _, tt := range tests {
		if got := tt.b.Delay(tt.n, tt.r); got != tt.want {
			t.Errorf("%s: Delay(%d, %v) = %v, want %v", tt.name, tt.n, tt.r, got, tt.want)
		}
	}
	// gRPC's connection backoff: 1 s, x1.6, +-20 %, cap 120 s.
	conn := Exponential{Initial: time.Second, Max: 120 * time.Second, Multiplier: 1.6, Jitter: ProportionalJitter, Spread: 0.2}
	for _, tt := range []struct {
		n    int
		r    float64
		want time.Duration
	}{
		{1, 0, 800 * ms}, {1, 0.5, time.Second}, {2, 0.5, 1600 * ms}, {3, 0, 2048 * ms},
		{20, 0.5, 120 * time.Second}, {20, 1, 144 * time.Second}, {1, math.NaN(), 800 * ms},
	} {
		if got := conn.Delay(tt.n, tt.r); got != tt.want {
			t.Errorf("proportional Delay(%d, %v) = %v, want %v", tt.n, tt.r, got, tt.want)
		}
	}
	huge := Exponential{Initial: time.Duration(math.MaxInt64), Max: time.Duration(math.MaxInt64), Multiplier: 2, Jitter: ProportionalJitter, Spread: 0.5}
	if got := huge.Delay(3, 0.99); got != time.Duration(math.MaxInt64) {
		t.Errorf("a spread past the largest duration saturates: got %v", got)
	}
	// r >= 1 is clamped below 1: the delay stays below the ceiling.
	if got := full.Delay(1, 1); got >= 100*ms || got < 99*ms {
		t.Errorf("Delay(1, 1) = %v, want just under 100ms", got)
	}
	if got := equal.Delay(1, 7); got >= 100*ms || got < 99*ms {
		t.Errorf("equal Delay(1, 7) = %v, want just under 100ms", got)
	}
}

// TestBackoffDelayBounds checks the distributions' ranges over many draws.
func TestDelayBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, j := range []Jitter{FullJitter, EqualJitter} {
		b := Exponential{Initial: 10 * ms, Max: 200 * ms, Multiplier: 1.6, Jitter: j}
		for n := 1; n <= 12; n++ {
			c := b.Ceiling(n)
			lo := time.Duration(0)
			if j == EqualJitter {
				lo = c / 2
			}
			for range 200 {
				if d := b.Delay(n, rng.Float64()); d < lo || (d >= c && c > 0) {
					t.Fatalf("%v: Delay(%d) = %v outside [%v, %v)", j, n, d, lo, c)
				}
			}
		}
	}
}

func BenchmarkDelay(b *testing.B) {
	bo := Exponential{Initial: 100 * ms, Max: time.Second, Multiplier: 2}
	rng := rand.New(rand.NewPCG(1, 2))
	b.ReportAllocs()
	var sink time.Duration
	for i := 0; b.Loop(); i++ {
		sink += bo.Delay(i%8+1, rng.Float64())
	}
	_ = sink
}

func TestDelayHugeCeiling(t *testing.T) {
	b := Exponential{Initial: math.MaxInt64, Max: math.MaxInt64, Multiplier: 2}
	for _, j := range []Jitter{FullJitter, EqualJitter} {
		b.Jitter = j
		for _, r := range []float64{0.5, 0.999999999, math.Nextafter(1, 0), 1, 2} {
			if d := b.Delay(1, r); d < 0 || d == math.MaxInt64 {
				t.Errorf("%v Delay(1, %v) = %d, want in [0, MaxInt64)", j, r, d)
			}
		}
	}
}

func TestJitterString(t *testing.T) {
	for j, want := range map[Jitter]string{FullJitter: "full", EqualJitter: "equal", ProportionalJitter: "proportional", 9: "Jitter(9)"} {
		if got := j.String(); got != want {
			t.Errorf("Jitter(%d).String() = %q, want %q", j, got, want)
		}
	}
}

func TestExponentialValidate(t *testing.T) {
	for _, tc := range []struct {
		b    Exponential
		want string
	}{
		{Exponential{Initial: time.Second, Max: time.Minute, Multiplier: 2, Spread: 0.2}, ""},
		{Exponential{}, ""},
		{Exponential{Max: time.Second}, "backoff: Exponential.Initial is 0s, must be > 0"},
		{Exponential{Initial: time.Minute, Max: time.Second, Multiplier: 2}, "backoff: Exponential.Max is 1s, must be >= Initial (1m0s)"},
		{Exponential{Initial: time.Second, Max: time.Minute, Multiplier: math.NaN()}, "backoff: Exponential.Multiplier is NaN, must be a finite number >= 1"},
		{Exponential{Initial: time.Second, Max: time.Minute, Multiplier: math.Inf(1)}, "backoff: Exponential.Multiplier is +Inf"},
		{Exponential{Initial: time.Second, Max: time.Minute, Multiplier: 2, Jitter: 3}, "backoff: Exponential.Jitter is Jitter(3), must be"},
		{Exponential{Initial: time.Second, Max: time.Minute, Multiplier: 2, Spread: 1}, "backoff: Exponential.Spread is 1, must be in [0, 1)"},
	} {
		err := tc.b.Validate()
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v.Validate: %v, want %q", tc.b, err, tc.want)
		}
	}
}
