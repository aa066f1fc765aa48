package shedlimit

import (
	"testing"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/criticality"
	"github.com/sluice-rpc/sluice/shed"
)

// BenchmarkAcquireRelease is the guard's cost per admitted request on the
// wall clock: two clock reads, one atomic add each way and a short mutex.
func BenchmarkAcquireRelease(b *testing.B) {
	l, _ := New(shed.Config{ProbeSamples: 1, Clock: clock.Real})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if tok, ok := l.Acquire(); ok {
				l.Release(tok)
			}
		}
	})
}

// BenchmarkRefuse is the cost of refusing a request.
func BenchmarkRefuse(b *testing.B) {
	l, _ := New(shed.Config{MinLimit: 1, MaxLimit: 1, Clock: clock.Real})
	l.Acquire()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, ok := l.Acquire(); ok {
			b.Fatal("admitted over the limit")
		}
	}
}

// BenchmarkAcquireForRelease is AcquireFor's cost far from the limit, the
// path of a server that is not overloaded.
func BenchmarkAcquireForRelease(b *testing.B) {
	l, _ := New(shed.Config{ProbeSamples: 1, Clock: clock.Real})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if tok, ok := l.AcquireFor(criticality.Critical, "caller"); ok {
				l.Release(tok)
			}
		}
	})
}

// BenchmarkAcquireForNearLimit is AcquireFor's cost near a fixed limit,
// where it looks the caller up under a mutex.
func BenchmarkAcquireForNearLimit(b *testing.B) {
	l, _ := New(shed.Config{MinLimit: 8, MaxLimit: 8, Clock: clock.Real})
	for range 7 {
		l.AcquireFor(criticality.Critical, "holder")
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if tok, ok := l.AcquireFor(criticality.Critical, "caller"); ok {
			l.Release(tok)
		}
	}
}
