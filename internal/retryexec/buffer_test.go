package retryexec

import (
	"sync"
	"sync/atomic"
	"testing"
)

func TestNewBufferLimits(t *testing.T) {
	for _, tt := range []struct {
		cfg            BufferConfig
		total, perCall int64 // the limits in force
	}{
		{BufferConfig{}, DefaultBufferSize, DefaultPerCallBufferLimit},
		{BufferConfig{Total: 10, PerCall: 10}, 10, 10},
		{BufferConfig{Total: 10}, 10, 10},
		{BufferConfig{PerCall: 5}, DefaultBufferSize, 5},
	} {
		if b := NewBuffer(tt.cfg); b.total != tt.total || b.perCall != tt.perCall {
			t.Errorf("NewBuffer(%+v) holds %d in all, %d per call; want %d, %d", tt.cfg, b.total, b.perCall, tt.total, tt.perCall)
		}
	}
}

func TestBufferReserve(t *testing.T) {
	b := NewBuffer(BufferConfig{Total: 100, PerCall: 40})
	steps := []struct {
		n        int64
		ok       bool
		wantUsed int64
	}{
		{40, true, 40},
		{41, false, 40}, // above the per-call limit
		{-1, false, 40}, // negative
		{40, true, 80},
		{21, false, 80}, // the total would be exceeded
		{20, true, 100},
		{0, true, 100}, // nothing always fits
		{1, false, 100},
	}
	var held []Reservation
	for i, s := range steps {
		r, ok := b.Reserve(s.n)
		if ok != s.ok || b.Used() != s.wantUsed {
			t.Fatalf("step %d: Reserve(%d) ok=%v used=%d, want ok=%v used=%d", i, s.n, ok, b.Used(), s.ok, s.wantUsed)
		}
		if ok {
			held = append(held, r)
		}
	}
	held[0].Release()
	if b.Used() != 60 {
		t.Fatalf("after releasing 40: used %d, want 60", b.Used())
	}
	if _, ok := b.Reserve(40); !ok {
		t.Fatal("released space not reusable")
	}
	Reservation{}.Release() // the zero reservation holds nothing
	if b.Used() != 100 {
		t.Fatalf("used %d, want 100", b.Used())
	}
}

func TestBufferNil(t *testing.T) {
	var b *Buffer
	if r, ok := b.Reserve(1 << 40); !ok {
		t.Fatal("nil Buffer refused")
	} else {
		r.Release()
	}
	if _, ok := b.Reserve(-1); ok {
		t.Fatal("nil Buffer accepted a negative size")
	}
	if b.Used() != 0 {
		t.Fatal("nil Buffer reports use")
	}
}

func TestBufferConcurrentNeverOverTotal(t *testing.T) {
	b := NewBuffer(BufferConfig{Total: 1000, PerCall: 100})
	var over atomic.Bool
	var wg sync.WaitGroup
	for g := range 20 {
		wg.Go(func() {
			for i := range 200 {
				r, ok := b.Reserve(int64(g+i)%100 + 1)
				if u := b.Used(); u > 1000 {
					over.Store(true)
				}
				if ok {
					r.Release()
				}
			}
		})
	}
	wg.Wait()
	if over.Load() {
		t.Fatal("Used exceeded the total")
	}
	if b.Used() != 0 {
		t.Fatalf("after all releases used = %d", b.Used())
	}
}

func BenchmarkBufferReserve(b *testing.B) {
	buf := NewBuffer(BufferConfig{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r, ok := buf.Reserve(4096)
			if ok {
				r.Release()
			}
		}
	})
}
