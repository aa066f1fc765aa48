package wirenum

import (
	"math"
	"testing"
	"time"
)

func TestSeconds(t *testing.T) {
	for _, c := range []struct {
		sec, lo int64
		want    time.Duration
	}{
		{15, 0, 15 * time.Second},
		{0, 1, time.Second},
		{-7, 0, 0},
		{math.MinInt64, 1, time.Second},
		{9223372037, 0, MaxSeconds * time.Second}, // times time.Second: past MaxInt64
		{math.MaxInt64, 1, MaxSeconds * time.Second},
		{5, MaxSeconds + 1, MaxSeconds * time.Second},
	} {
		if got := Seconds(c.sec, c.lo); got != c.want {
			t.Errorf("Seconds(%d, %d) = %v, want %v", c.sec, c.lo, got, c.want)
		}
	}
}

func TestFiniteNonNegative(t *testing.T) {
	for v, want := range map[float64]bool{0: true, 1e308: true, -1: false, math.Inf(1): false, math.NaN(): false, math.Copysign(0, -1): true} {
		if got := FiniteNonNegative(v); got != want {
			t.Errorf("FiniteNonNegative(%v) = %v, want %v", v, got, want)
		}
	}
}
