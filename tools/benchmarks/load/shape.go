package load

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Shape is a server's latency distribution: each request takes a time drawn
// uniformly from [FastMin, FastMax], or, with probability SlowFraction, from
// [SlowMin, SlowMax]. The zero Shape answers at once.
type Shape struct {
	FastMin, FastMax time.Duration
	// SlowFraction is the probability of a slow request, in [0, 1].
	SlowFraction     float64
	SlowMin, SlowMax time.Duration
}

// Fixed returns the Shape whose every request takes d.
func Fixed(d time.Duration) Shape { return Shape{FastMin: d, FastMax: d} }

// HeavyTail returns the Shape of "The Tail at Scale"'s servers in
// miniature: 97% of requests take 0.5-1.5 ms (1 ms on average), 3% take
// 100-200 ms.
func HeavyTail() Shape {
	return Shape{FastMin: 500 * time.Microsecond, FastMax: 1500 * time.Microsecond,
		SlowFraction: 0.03, SlowMin: 100 * time.Millisecond, SlowMax: 200 * time.Millisecond}
}

// Validate reports the first rule s breaks: times >= 0, each Min <= its
// Max, SlowFraction in [0, 1].
func (s Shape) Validate() error {
	switch {
	case s.FastMin < 0 || s.FastMax < s.FastMin:
		return fmt.Errorf("load: shape fast range %v-%v, must be 0 <= min <= max", s.FastMin, s.FastMax)
	case !(s.SlowFraction >= 0 && s.SlowFraction <= 1):
		return fmt.Errorf("load: shape slow fraction %v, must be in [0, 1]", s.SlowFraction)
	case s.SlowFraction > 0 && (s.SlowMin < 0 || s.SlowMax < s.SlowMin):
		return fmt.Errorf("load: shape slow range %v-%v, must be 0 <= min <= max", s.SlowMin, s.SlowMax)
	}
	return nil
}

// Sample draws one request's latency from r.
func (s Shape) Sample(r *rand.Rand) time.Duration {
	if s.SlowFraction > 0 && r.Float64() < s.SlowFraction {
		return uniform(r, s.SlowMin, s.SlowMax)
	}
	return uniform(r, s.FastMin, s.FastMax)
}

func uniform(r *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(r.Int64N(int64(hi-lo)+1))
}

// String returns s in the form ParseShape reads.
func (s Shape) String() string {
	if s.SlowFraction == 0 {
		return rangeString(s.FastMin, s.FastMax)
	}
	return fmt.Sprintf("%s,%s@%s", rangeString(s.FastMin, s.FastMax), strconv.FormatFloat(s.SlowFraction, 'g', -1, 64), rangeString(s.SlowMin, s.SlowMax))
}

// rangeString is "1ms-3ms", or "1ms" when lo == hi.
func rangeString(lo, hi time.Duration) string {
	if lo == hi {
		return lo.String()
	}
	return lo.String() + "-" + hi.String()
}

// ParseShape reads a Shape:
//
//	heavy-tail          HeavyTail()
//	heavy-tail:0.05     HeavyTail() with 5% slow requests
//	fixed:2ms, 2ms      every request takes 2 ms ("0" answers at once)
//	1ms-3ms             uniform between 1 and 3 ms
//	1ms,0.03@100ms-200ms  1 ms, or with probability 0.03 100-200 ms
func ParseShape(text string) (Shape, error) {
	t := strings.TrimSpace(text)
	var s Shape
	switch {
	case t == "heavy-tail":
		s = HeavyTail()
	case strings.HasPrefix(t, "heavy-tail:"):
		s = HeavyTail()
		f, err := strconv.ParseFloat(strings.TrimPrefix(t, "heavy-tail:"), 64)
		if err != nil {
			return Shape{}, fmt.Errorf("load: shape %q: the slow fraction is not a number", text)
		}
		s.SlowFraction = f
	default:
		t = strings.TrimPrefix(t, "fixed:")
		fast, slow, hasSlow := strings.Cut(t, ",")
		var err error
		if s.FastMin, s.FastMax, err = parseRange(fast); err != nil {
			return Shape{}, fmt.Errorf("load: shape %q: %v", text, err)
		}
		if hasSlow {
			frac, rng, ok := strings.Cut(slow, "@")
			if !ok {
				return Shape{}, fmt.Errorf("load: shape %q: want FAST,FRACTION@SLOW after the comma", text)
			}
			if s.SlowFraction, err = strconv.ParseFloat(frac, 64); err != nil {
				return Shape{}, fmt.Errorf("load: shape %q: the slow fraction %q is not a number", text, frac)
			}
			if s.SlowMin, s.SlowMax, err = parseRange(rng); err != nil {
				return Shape{}, fmt.Errorf("load: shape %q: %v", text, err)
			}
		}
	}
	if err := s.Validate(); err != nil {
		return Shape{}, fmt.Errorf("%v (in %q)", err, text)
	}
	return s, nil
}

func parseRange(t string) (lo, hi time.Duration, err error) {
	a, b, isRange := strings.Cut(t, "-")
	if !isRange {
		b = a
	}
	if lo, err = parseDuration(a); err == nil {
		hi, err = parseDuration(b)
	}
	return lo, hi, err
}

func parseDuration(t string) (time.Duration, error) {
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (want e.g. 1ms)", t)
	}
	return d, nil
}
