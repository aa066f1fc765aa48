package faults

import (
	"sync"
	"testing"
	"time"
)

// The seeded sequence: ok, ok, fail, ok, then seven failures, the fifth of
// them (the 9th call) ending the first streak, whose time is noted once.
func TestErraticSequence(t *testing.T) {
	e := newErratic()
	t0 := time.Unix(1000, 0)
	want := []bool{false, false, true, false, true, true, true, true, true, true, true, false}
	for i, w := range want {
		at := t0.Add(time.Duration(i) * time.Millisecond)
		if got := e.fail(at); got != w {
			t.Fatalf("call %d: fail = %v, want %v", i+1, got, w)
		}
		if i+1 < 9 && !e.streak().IsZero() {
			t.Fatalf("after call %d: streak at %v, want none yet", i+1, e.streak())
		}
	}
	if got, want := e.streak(), t0.Add(8*time.Millisecond); !got.Equal(want) {
		t.Errorf("streak at %v, want the 9th call's time %v", got, want)
	}
	if calls, failed := e.counts(); calls != 12 || failed != 8 {
		t.Errorf("counts = %d calls, %d failed; want 12, 8", calls, failed)
	}
}

// Half the calls fail, and every run of the generator fails the same ones.
func TestErraticFailsHalfReproducibly(t *testing.T) {
	a, b := newErratic(), newErratic()
	const n = 10_000
	now := time.Unix(1000, 0)
	for i := 0; i < n; i++ {
		if fa, fb := a.fail(now), b.fail(now); fa != fb {
			t.Fatalf("call %d: two erratics disagree", i+1)
		}
	}
	if _, failed := a.counts(); failed < n*48/100 || failed > n*52/100 {
		t.Errorf("%d of %d calls failed, want about half", failed, n)
	}
}

// fail may be called from concurrent handlers; every call is counted.
func TestErraticConcurrent(t *testing.T) {
	e := newErratic()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				e.fail(time.Now())
			}
		}()
	}
	wg.Wait()
	if calls, _ := e.counts(); calls != 4000 {
		t.Errorf("%d calls counted, want 4000", calls)
	}
	if e.streak().IsZero() {
		t.Error("no streak in 4000 calls")
	}
}

func (e *erratic) streak() time.Time {
	at, _, _ := e.state()
	return at
}

func (e *erratic) counts() (calls, failed int) {
	_, calls, failed = e.state()
	return calls, failed
}
