package retry

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

func TestNewBufferLimits(t *testing.T) {
	for _, tt := range []struct {
		total, perCall int64
		ok             bool
	}{
		{DefaultBufferSize, DefaultPerCallBufferLimit, true},
		{10, 10, true},
		{10, 11, false},
		{0, 0, false},
		{10, 0, false},
		{-1, -1, false},
	} {
		_, err := NewBuffer(tt.total, tt.perCall)
		if (err == nil) != tt.ok {
			t.Errorf("NewBuffer(%d, %d) = %v, want ok %v", tt.total, tt.perCall, err, tt.ok)
		}
		var fe *FieldError
		if err != nil && !errors.As(err, &fe) {
			t.Errorf("NewBuffer error %v is not a *FieldError", err)
		}
	}
}

func TestBufferReserve(t *testing.T) {
	b, err := NewBuffer(100, 40)
	if err != nil {
		t.Fatal(err)
	}
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
	b, _ := NewBuffer(1000, 100)
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
	buf, _ := NewBuffer(DefaultBufferSize, DefaultPerCallBufferLimit)
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
