package latency

import (
	"sync"
	"testing"
	"time"
)

// The cold start: nothing is expected, and nothing doomed, before
// MinSamples observations; at MinSamples the estimate is their
// ceil(0.05*32) = 2nd smallest.
func TestLowColdStart(t *testing.T) {
	var l Low
	for i := 1; i < MinSamples; i++ {
		l.Observe(time.Duration(i) * time.Millisecond)
		if d, ok := l.Expected(); ok || l.Ready() || l.Doomed(0) {
			t.Fatalf("after %d observations: Expected() = %v, %v; want none before %d", i, d, ok, MinSamples)
		}
	}
	l.Observe(time.Duration(MinSamples) * time.Millisecond)
	d, ok := l.Expected()
	if !ok || d != 2*time.Millisecond {
		t.Fatalf("after %d observations of 1..%d ms: Expected() = %v, %v; want 2ms, true", MinSamples, MinSamples, d, ok)
	}
	if !l.Doomed(2*time.Millisecond-1) || l.Doomed(2*time.Millisecond) {
		t.Error("Doomed: want true just under the estimate, false at it")
	}
	if l.Samples() != MinSamples {
		t.Errorf("Samples() = %d, want %d", l.Samples(), MinSamples)
	}
}

// The estimate follows the last LowWindow observations: a method that
// turns slow is expected to be slow once the window holds only the slow
// latencies, and the 5% quantile of 64 is the 4th smallest.
func TestLowFollowsTheWindow(t *testing.T) {
	var l Low
	for i := 0; i < LowWindow; i++ {
		l.Observe(time.Millisecond)
	}
	if d, _ := l.Expected(); d != time.Millisecond {
		t.Fatalf("Expected() = %v, want 1ms", d)
	}
	for i := 0; i < LowWindow; i++ {
		l.Observe(time.Duration(20+i) * time.Millisecond)
	}
	if d, _ := l.Expected(); d != 23*time.Millisecond {
		t.Errorf("after a window of 20..83 ms: Expected() = %v, want 23ms (the 4th smallest)", d)
	}
}

// A low quantile is not pulled down by one fast outlier, nor by cut-offs
// shorter than the latencies (work cut off by its deadline after 1 ms
// says only that it took longer).
func TestLowOutliersAndCutOffs(t *testing.T) {
	var l Low
	l.Observe(time.Microsecond) // a cache hit
	for i := 1; i < LowWindow; i++ {
		if i%4 == 0 {
			l.ObserveCensored(time.Millisecond)
		} else {
			l.Observe(20 * time.Millisecond)
		}
	}
	if d, _ := l.Expected(); d != 20*time.Millisecond {
		t.Errorf("Expected() = %v, want 20ms", d)
	}
}

// A nil Low dooms nothing (no estimate configured).
func TestLowNil(t *testing.T) {
	var l *Low
	if l.Doomed(0) {
		t.Error("nil Low: Doomed(0) = true")
	}
}

// Observe is safe for concurrent use (go test -race), and every
// observation counts.
func TestLowConcurrent(t *testing.T) {
	var (
		l  Low
		wg sync.WaitGroup
	)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				l.Observe(5 * time.Millisecond)
				l.Expected()
			}
		}()
	}
	wg.Wait()
	if d, ok := l.Expected(); !ok || d != 5*time.Millisecond || l.Samples() != 4000 {
		t.Errorf("Expected() = %v, %v after %d; want 5ms, true after 4000", d, ok, l.Samples())
	}
}

// Pack orders a finished observation before a cut-off of the same
// latency, and Quantile is the plain sample quantile without cut-offs.
func TestPackAndQuantile(t *testing.T) {
	if Pack(time.Second, false) >= Pack(time.Second, true) || Pack(-1, false) != 0 {
		t.Error("Pack order")
	}
	obs := []int64{Pack(1, false), Pack(2, false), Pack(3, false), Pack(4, false)}
	if q := Quantile(obs, 0.5); q != 2 {
		t.Errorf("Quantile(1..4, 0.5) = %v, want 2", q)
	}
	if q := Quantile([]int64{Pack(7, true)}, 0.5); q != 7 {
		t.Errorf("Quantile of one cut-off = %v, want 7 (the largest observation)", q)
	}
}
