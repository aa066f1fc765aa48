package clock

import (
	"testing"
	"time"
)

func TestFakeTimersFireInOrderWhenDue(t *testing.T) {
	start := time.Unix(1000, 0)
	f := NewFake(start)
	late := f.NewTimer(2 * time.Second)
	early := f.NewTimer(time.Second)
	stopped := f.NewTimer(time.Second)
	if !stopped.Stop() {
		t.Fatal("Stop on a pending timer reported false")
	}
	if got := f.Timers(); got != 2 {
		t.Fatalf("Timers() = %d, want 2", got)
	}
	f.Add(time.Second)
	select {
	case at := <-early.C():
		if !at.Equal(start.Add(time.Second)) {
			t.Fatalf("early fired at %v", at)
		}
	default:
		t.Fatal("early timer did not fire at its deadline")
	}
	select {
	case <-late.C():
		t.Fatal("late timer fired before its deadline")
	default:
	}
	f.Add(time.Second)
	select {
	case <-late.C():
	default:
		t.Fatal("late timer did not fire")
	}
	select {
	case <-stopped.C():
		t.Fatal("stopped timer fired")
	default:
	}
	if f.NewTimer(0) == nil {
		t.Fatal("nil timer")
	}
}

func TestFakeZeroDurationFiresAtOnce(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	select {
	case <-f.NewTimer(0).C():
	default:
		t.Fatal("a zero-duration timer must fire at once")
	}
}
