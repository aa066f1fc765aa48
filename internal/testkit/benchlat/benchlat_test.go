package benchlat

import (
	"errors"
	"flag"
	"fmt"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	d := []time.Duration{5, 1, 3, 2, 4}
	if got := median(d); got != 3 {
		t.Fatalf("median = %v, want 3", got)
	}
}

// Paired, Interleaved and Median stop at the first failing call.
func TestFailingCallFailsTheBenchmark(t *testing.T) {
	bad := func() error { return errors.New("boom") }
	ok := func() error { return nil }
	for name, run := range map[string]func(b *testing.B){
		"median": func(b *testing.B) { Median(b, bad) },
		"paired": func(b *testing.B) { Paired(b, "x", ok, "y", bad) },
		"interleaved": func(b *testing.B) {
			Interleaved(b, Arm{Name: "x", Call: ok}, Arm{Name: "y", Call: ok}, Arm{Name: "z", Call: bad})
		},
		"paired under load": func(b *testing.B) { PairedLoad(b, 4, "x", ok, "y", bad) },
	} {
		if r := testing.Benchmark(run); r.N != 0 {
			t.Errorf("%s: a failing call ran %d iterations", name, r.N)
		}
	}
}

func TestPermutations(t *testing.T) {
	for n, want := range map[int]int{2: 2, 3: 6, 4: 24} {
		seen := map[string]bool{}
		for _, p := range permutations(n) {
			key := fmt.Sprint(p)
			if len(p) != n || seen[key] {
				t.Fatalf("permutations(%d): %v repeated or of the wrong length", n, p)
			}
			seen[key] = true
		}
		if len(seen) != want {
			t.Errorf("permutations(%d): %d orders, want %d", n, len(seen), want)
		}
	}
	// Two arms alternate, x first: the order Paired always had.
	if got := fmt.Sprint(permutations(2)); got != "[[0 1] [1 0]]" {
		t.Errorf("permutations(2) = %s, want [[0 1] [1 0]]", got)
	}
}

// Every arm of Interleaved runs b.N times (and once untimed), in every
// position equally often over a whole cycle of orders, each followed by
// its After.
func TestInterleavedRunsEveryArmInEveryPosition(t *testing.T) {
	var (
		seq   []int
		after [3]int
	)
	arm := func(k int) Arm {
		return Arm{
			Name:  fmt.Sprint("a", k),
			Call:  func() error { seq = append(seq, k); return nil },
			After: func() { after[k]++ },
		}
	}
	setBenchtime(t, "60x") // calls of nothing would otherwise run for a second
	testing.Benchmark(func(b *testing.B) {
		seq = seq[:0]
		after = [3]int{}
		Interleaved(b, arm(0), arm(1), arm(2))
		if b.N < 6 {
			return
		}
		b.StopTimer()
		n := 6 * (b.N / 6) // whole cycles of the six orders
		var pos [3][3]int  // pos[arm][position]
		for i, k := range seq[3 : 3+3*n] {
			pos[k][i%3]++
		}
		for k := range pos {
			for p, c := range pos[k] {
				if c != n/3 {
					t.Errorf("b.N %d: arm %d ran %d times in position %d, want %d", b.N, k, c, p, n/3)
				}
			}
			if after[k] != b.N+1 {
				t.Errorf("b.N %d: arm %d's After ran %d times, want %d", b.N, k, after[k], b.N+1)
			}
		}
	})
}

// setBenchtime sets -test.benchtime, for testing.Benchmark, until t ends.
func setBenchtime(t *testing.T, v string) {
	f := flag.Lookup("test.benchtime")
	old := f.Value.String()
	if err := f.Value.Set(v); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Value.Set(old) })
}
