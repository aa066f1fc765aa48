package leasing

import (
	"context"
	"testing"
)

// BenchmarkGaugeAcquireRelease is one uncontended slot taken and given
// back: the per-call cost of a concurrency lease.
func BenchmarkGaugeAcquireRelease(b *testing.B) {
	g := NewGauge(newFixedSource(10))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := g.Acquire(ctx); err != nil {
			b.Fatal(err)
		}
		g.Release()
	}
}

// BenchmarkRateLimiterWait is one admission at a rate far above the
// benchmark's: the per-call cost of a rate lease that does not bind.
func BenchmarkRateLimiterWait(b *testing.B) {
	l := NewRateLimiter(newFixedSource(1e12))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := l.Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
