package event

import (
	"reflect"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/clock"
)

func TestLoopRunUntil(t *testing.T) {
	clk := clock.NewFake(t0)
	l := NewLoop(clk)
	var log []string
	note := func(what string) func() {
		return func() { log = append(log, clk.Now().Sub(t0).String()+" "+what) }
	}
	l.At(t0.Add(2*time.Second), note("b"))
	l.At(t0.Add(time.Second), func() {
		note("a")()
		// Due now: after what is already due at this moment, before RunUntil returns.
		l.At(clk.Now(), note("a's follow-up"))
		// Due in the past: now, after that.
		l.At(t0, note("a's late one"))
		l.At(t0.Add(3*time.Second), note("c"))
	})
	l.At(t0.Add(time.Second), note("a2"))

	l.RunUntil(t0.Add(2 * time.Second))
	want := []string{"1s a", "1s a2", "1s a's follow-up", "1s a's late one", "2s b"}
	if !reflect.DeepEqual(log, want) {
		t.Errorf("ran %q, want %q", log, want)
	}
	if l.Len() != 1 {
		t.Errorf("Len() = %d after RunUntil, want 1 (c, due later)", l.Len())
	}

	// RunUntil leaves the clock at its time even when nothing was due.
	l.RunUntil(t0.Add(2500 * time.Millisecond))
	if got := clk.Now(); !got.Equal(t0.Add(2500 * time.Millisecond)) {
		t.Errorf("clock reads %v after RunUntil(2.5s), want 2.5s", got.Sub(t0))
	}
	l.RunUntil(t0.Add(time.Hour))
	if log[len(log)-1] != "3s c" || l.Len() != 0 {
		t.Errorf("last ran %q with %d left, want 3s c and none", log[len(log)-1], l.Len())
	}
	// The clock never goes back.
	l.RunUntil(t0)
	if got := clk.Now(); !got.Equal(t0.Add(time.Hour)) {
		t.Errorf("clock reads %v after RunUntil into the past, want 1h0m0s", got.Sub(t0))
	}
}

// Len returns the number of functions scheduled and not yet run.
func (l *Loop) Len() int { return l.q.Len() }
