package benchlat

import (
	"errors"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	d := []time.Duration{5, 1, 3, 2, 4}
	if got := median(d); got != 3 {
		t.Fatalf("median = %v, want 3", got)
	}
}

// Paired and Median stop at the first failing call.
func TestFailingCallFailsTheBenchmark(t *testing.T) {
	bad := func() error { return errors.New("boom") }
	ok := func() error { return nil }
	for name, run := range map[string]func(b *testing.B){
		"median":            func(b *testing.B) { Median(b, bad) },
		"paired":            func(b *testing.B) { Paired(b, "x", ok, "y", bad) },
		"paired under load": func(b *testing.B) { PairedLoad(b, 4, "x", ok, "y", bad) },
	} {
		if r := testing.Benchmark(run); r.N != 0 {
			t.Errorf("%s: a failing call ran %d iterations", name, r.N)
		}
	}
}
