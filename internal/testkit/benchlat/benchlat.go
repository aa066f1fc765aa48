// Package benchlat measures the median latency of calls inside go test
// benchmarks.
//
// It times one kind of call, or two kinds or more interleaved call by call
// (Paired, Interleaved), so that a noisy machine slows them all alike:
// loopback latency drifts between sequential runs by more than the few
// percent a comparison with plain tchannel-go looks for.
package benchlat

import (
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Median times b.N calls of call (after one untimed call that sets up
// connections), reports allocations and the median latency as "p50-ns",
// and returns that median in nanoseconds.
func Median(b *testing.B, call func() error) float64 {
	b.Helper()
	if err := call(); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := call(); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(t0)
	}
	b.StopTimer()
	p50 := median(lat)
	b.ReportMetric(p50, "p50-ns")
	return p50
}

// Paired times b.N calls of x and of y, alternating which goes first, and
// reports each one's median as "p50-<nameX>-ns" and "p50-<nameY>-ns" and
// their ratio as "<nameY>/<nameX>". Each is called once untimed first. It
// is Interleaved with two arms.
func Paired(b *testing.B, nameX string, x func() error, nameY string, y func() error) {
	b.Helper()
	Interleaved(b, Arm{Name: nameX, Call: x}, Arm{Name: nameY, Call: y})
}

// Arm is one kind of call that Interleaved times.
type Arm struct {
	// Name names the arm's metrics.
	Name string
	// Call makes one call.
	Call func() error
	// After, when not nil, runs after each Call, untimed (the benchmark's
	// timer stopped too): closing what the call opened, say.
	After func()
}

// maxArms is the most arms Interleaved takes: it cycles through every
// order of them, maxArms! orders.
const maxArms = 4

// Interleaved times b.N calls of each arm, one of each per iteration, in
// every order of the arms in turn (two arms: x then y, y then x; three:
// six orders), so that every arm runs in every position and after every
// other equally often, and a noisy machine slows them all alike. It
// reports each arm's median as "p50-<name>-ns" and, for every two arms x
// and y with x before y in arms, their ratio as "<y>/<x>", and returns the
// medians in nanoseconds, in the order of arms. Each arm is called once
// untimed first. It takes 2 to 4 arms.
func Interleaved(b *testing.B, arms ...Arm) []float64 {
	b.Helper()
	if len(arms) < 2 || len(arms) > maxArms {
		b.Fatalf("benchlat: Interleaved takes 2 to %d arms, got %d", maxArms, len(arms))
	}
	for _, a := range arms {
		if err := a.Call(); err != nil {
			b.Fatal(err)
		}
		if a.After != nil {
			a.After()
		}
	}
	orders := permutations(len(arms))
	lat := make([][]time.Duration, len(arms))
	for i := range lat {
		lat[i] = make([]time.Duration, b.N)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := time.Now()
		for _, k := range orders[i%len(orders)] {
			if err := arms[k].Call(); err != nil {
				b.Fatal(err)
			}
			now := time.Now()
			lat[k][i] = now.Sub(t)
			if arms[k].After != nil {
				b.StopTimer()
				arms[k].After()
				b.StartTimer()
				now = time.Now()
			}
			t = now
		}
	}
	b.StopTimer()
	p50 := make([]float64, len(arms))
	for k, a := range arms {
		p50[k] = median(lat[k])
		b.ReportMetric(p50[k], "p50-"+a.Name+"-ns")
	}
	for x := range arms {
		for y := x + 1; y < len(arms); y++ {
			b.ReportMetric(p50[y]/p50[x], arms[y].Name+"/"+arms[x].Name)
		}
	}
	return p50
}

// permutations returns every order of 0..n-1, in lexicographic order.
func permutations(n int) [][]int {
	if n == 1 {
		return [][]int{{0}}
	}
	var out [][]int
	for first := range n {
		for _, rest := range permutations(n - 1) {
			p := []int{first}
			for _, r := range rest {
				if r >= first {
					r++
				}
				p = append(p, r)
			}
			out = append(out, p)
		}
	}
	return out
}

func median(d []time.Duration) float64 {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return float64(d[len(d)/2].Nanoseconds())
}

// loadBlock is how many calls a block of PairedLoad makes of one kind:
// about 20 ms of load, long enough that starting and stopping the callers
// is a small part of it, short enough that the machine's drift is about
// the same for the two blocks of a pair.
const loadBlock = 1000

// PairedLoad is Paired under load: it times b.N calls of x and of y made by callers goroutines at
// once, in blocks of up to loadBlock calls of one kind that alternate
// between x and y, in pairs (which goes first alternating too). It reports
// each one's median time per call over the blocks as "ns/call-<name>", and
// as "<nameY>/<nameX>" the median over the pairs of the ratio of y's time
// to x's: a ratio per pair cancels the drift both blocks of a pair share.
// Each is loaded for one block untimed first.
func PairedLoad(b *testing.B, callers int, nameX string, x func() error, nameY string, y func() error) {
	b.Helper()
	block := min(b.N, loadBlock)
	for _, f := range []func() error{x, y} {
		if err := runBlock(f, callers, block); err != nil {
			b.Fatal(err)
		}
	}
	var tx, ty, ratios []float64
	b.ResetTimer()
	for i, left := 0, b.N; left > 0; i, left = i+1, left-block {
		n := min(block, left)
		var dx, dy float64
		first, second, d1, d2 := x, y, &dx, &dy
		if i%2 == 1 {
			first, second, d1, d2 = y, x, &dy, &dx
		}
		for _, run := range []struct {
			f func() error
			d *float64
		}{{first, d1}, {second, d2}} {
			t0 := time.Now()
			if err := runBlock(run.f, callers, n); err != nil {
				b.Fatal(err)
			}
			*run.d = float64(time.Since(t0).Nanoseconds()) / float64(n)
		}
		tx, ty, ratios = append(tx, dx), append(ty, dy), append(ratios, dy/dx)
	}
	b.StopTimer()
	b.ReportMetric(medianOf(tx), "ns/call-"+nameX)
	b.ReportMetric(medianOf(ty), "ns/call-"+nameY)
	b.ReportMetric(medianOf(ratios), nameY+"/"+nameX)
}

// runBlock makes n calls of f from callers goroutines at once and returns
// the first error.
func runBlock(f func() error, callers, n int) error {
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	for range min(callers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if err := f(); err != nil {
					errOnce.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// medianOf sorts v and returns its middle value.
func medianOf(v []float64) float64 {
	slices.Sort(v)
	return v[len(v)/2]
}
