package load

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestParseShape(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		in   string
		want Shape
		err  string
	}{
		{in: "heavy-tail", want: HeavyTail()},
		{in: "heavy-tail:0.05", want: func() Shape { s := HeavyTail(); s.SlowFraction = 0.05; return s }()},
		{in: "fixed:2ms", want: Fixed(2 * ms)},
		{in: "2ms", want: Fixed(2 * ms)},
		{in: "0", want: Shape{}},
		{in: "1ms-3ms", want: Shape{FastMin: ms, FastMax: 3 * ms}},
		{in: "1ms,0.03@100ms-200ms", want: Shape{FastMin: ms, FastMax: ms, SlowFraction: 0.03, SlowMin: 100 * ms, SlowMax: 200 * ms}},
		{in: "heavy-tail:x", err: "slow fraction is not a number"},
		{in: "heavy-tail:1.5", err: "slow fraction 1.5"},
		{in: "slow", err: `"slow" is not a duration`},
		{in: "3ms-1ms", err: "must be 0 <= min <= max"},
		{in: "1ms,0.1", err: "want FAST,FRACTION@SLOW"},
		{in: "1ms,x@2ms", err: `slow fraction "x"`},
		{in: "-1ms", err: `"" is not a duration`},
	} {
		got, err := ParseShape(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseShape(%q) error = %v, want one containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseShape(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
		if back, err := ParseShape(got.String()); err != nil || back != got {
			t.Errorf("ParseShape(%q.String() = %q) = %+v, %v", tc.in, got.String(), back, err)
		}
	}
}

// The heavy tail's draws: about 3% slow, all within their ranges, and the
// same sequence for the same seed.
func TestHeavyTailSample(t *testing.T) {
	s := HeavyTail()
	draw := func(seed uint64) (slow int, seq []time.Duration) {
		r := rand.New(rand.NewPCG(seed, 1))
		for i := 0; i < 100_000; i++ {
			d := s.Sample(r)
			switch {
			case d >= s.SlowMin && d <= s.SlowMax:
				slow++
			case d < s.FastMin || d > s.FastMax:
				t.Fatalf("draw %v outside both ranges", d)
			}
			if i < 10 {
				seq = append(seq, d)
			}
		}
		return slow, seq
	}
	slow, a := draw(7)
	if slow < 2700 || slow > 3300 {
		t.Errorf("%d slow draws in 100000, want about 3000", slow)
	}
	_, b := draw(7)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed, different draws: %v vs %v", a, b)
		}
	}
}

func TestQuantile(t *testing.T) {
	var xs []time.Duration
	for i := 1; i <= 1000; i++ {
		xs = append(xs, time.Duration(i))
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500}, {0.99, 990}, {0.999, 999}, {1, 1000}, {0, 1}} {
		if got := Quantile(xs, tc.q); got != tc.want {
			t.Errorf("Quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if Quantile(nil, 0.5) != 0 {
		t.Error("Quantile of nothing is not 0")
	}
}
