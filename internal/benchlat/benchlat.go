// Package benchlat measures call latency inside go test benchmarks: the
// median of one kind of call, or of two kinds interleaved call by call so
// that a noisy machine slows both alike (on this project's VMs loopback
// latency drifts by 20-30% between sequential runs, which would swamp a
// comparison of a few percent).
package benchlat

import (
	"sort"
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
// their ratio as "<nameY>/<nameX>". Each is called once untimed first.
func Paired(b *testing.B, nameX string, x func() error, nameY string, y func() error) {
	b.Helper()
	for _, f := range []func() error{x, y} {
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
	lx, ly := make([]time.Duration, b.N), make([]time.Duration, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		first, second, d1, d2 := x, y, &lx[i], &ly[i]
		if i%2 == 1 {
			first, second, d1, d2 = y, x, &ly[i], &lx[i]
		}
		t0 := time.Now()
		if err := first(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := second(); err != nil {
			b.Fatal(err)
		}
		*d1, *d2 = t1.Sub(t0), time.Since(t1)
	}
	b.StopTimer()
	mx, my := median(lx), median(ly)
	b.ReportMetric(mx, "p50-"+nameX+"-ns")
	b.ReportMetric(my, "p50-"+nameY+"-ns")
	b.ReportMetric(my/mx, nameY+"/"+nameX)
}

func median(d []time.Duration) float64 {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return float64(d[len(d)/2].Nanoseconds())
}
