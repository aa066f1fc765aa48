package balancing

import (
	"math"
	"testing"
)

// LoadCapacity: rate over utilisation; below 1% only a lower bound (the
// 1% floor's); nothing from a server that answered nothing.
func TestLoadCapacity(t *testing.T) {
	for _, tt := range []struct {
		qps, u, want float64
		atLeast, ok  bool
	}{
		{800, 0.8, 1000, false, true},
		{20, 0.01, 2000, false, true},
		{100, 0, 10_000, true, true},  // no load claimed: at least 1% floor's
		{20, 0.007, 2000, true, true}, // a lightly loaded server of 3000: at least 2000
		{0, 0.5, 0, false, false},
		{math.Inf(1), 0.5, 0, false, false},
		{100, math.NaN(), 0, false, false},
	} {
		got, atLeast, ok := LoadCapacity(tt.qps, tt.u)
		if ok != tt.ok || (ok && (math.Abs(got-tt.want) > 1e-9 || atLeast != tt.atLeast)) {
			t.Errorf("LoadCapacity(%v, %v) = %v, %v, %v; want %v, %v, %v", tt.qps, tt.u, got, atLeast, ok, tt.want, tt.atLeast, tt.ok)
		}
	}
}

// LoadFactors: capacities relative to the median, clamped to [1/4, 4],
// normalised to mean 1 over the reporting peers; peers without reports
// are 1.
func TestLoadFactors(t *testing.T) {
	for _, tt := range []struct {
		caps, want []float64
	}{
		{[]float64{0, 0}, []float64{1, 1}},
		{[]float64{250, 500, 1000}, []float64{3.0 / 7, 6.0 / 7, 12.0 / 7}},
		{[]float64{250, 0, 1000}, []float64{0.4, 1, 1.6}},
		// A liar (infinite capacity, as good as) among three equal peers:
		// 4 times their factor, no more.
		{[]float64{1e12, 1000, 1000, 1000}, []float64{16.0 / 7, 4.0 / 7, 4.0 / 7, 4.0 / 7}},
		// One that claims almost nothing: a quarter.
		{[]float64{1, 1000, 1000}, []float64{1.0 / 3, 4.0 / 3, 4.0 / 3}},
	} {
		out := make([]float64, len(tt.caps))
		LoadFactors(tt.caps, out)
		for i := range out {
			if math.Abs(out[i]-tt.want[i]) > 1e-9 {
				t.Errorf("LoadFactors(%v) = %v, want %v", tt.caps, out, tt.want)
				break
			}
		}
	}
}
