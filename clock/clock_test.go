package clock

import (
	"context"
	"runtime"
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
}

func TestFakeZeroDurationFiresAtOnce(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	select {
	case <-f.NewTimer(0).C():
	default:
		t.Fatal("a zero-duration timer must fire at once")
	}
}

// A deadline computed from an earlier reading is kept even if the clock
// moved in between: the timer fires at that deadline, or at once when it
// has passed, never a full wait after the timer was made.
func TestFakeTimerAtKeepsItsDeadline(t *testing.T) {
	start := time.Unix(0, 0)
	f := NewFake(start)
	read := f.Now()
	f.Add(4 * time.Second) // time passes between reading the clock and making the timer
	at := f.NewTimerAt(read.Add(5 * time.Second))
	select {
	case <-at.C():
		t.Fatal("fired 1s before its deadline")
	default:
	}
	f.Add(time.Second)
	select {
	case got := <-at.C():
		if want := start.Add(5 * time.Second); !got.Equal(want) {
			t.Fatalf("fired at %v, want %v", got, want)
		}
	default:
		t.Fatal("did not fire at its deadline")
	}
	select {
	case <-f.NewTimerAt(read).C():
	default:
		t.Fatal("a timer whose deadline has passed must fire at once")
	}
	if n := f.Timers(); n != 0 {
		t.Fatalf("%d timers pending, want 0", n)
	}
}

func TestRealTimerAt(t *testing.T) {
	select {
	case <-Real.NewTimerAt(time.Now().Add(-time.Second)).C():
	case <-time.After(time.Second):
		t.Fatal("a real timer whose deadline has passed did not fire within 1s")
	}
}

func TestSinceMeasuresOnItsClock(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	t0 := f.Now()
	f.Add(1500 * time.Millisecond)
	if got := f.Since(t0); got != 1500*time.Millisecond {
		t.Fatalf("Fake.Since = %v, want 1.5s", got)
	}
	r0 := Real.Now()
	if got := Real.Since(r0); got < 0 || got > time.Minute {
		t.Fatalf("Real.Since of a fresh reading = %v", got)
	}
}

var sinkDuration time.Duration

// BenchmarkRealNow and BenchmarkRealSince compare the two wall-clock reads:
// Since of a reading with a monotonic part reads only the monotonic clock.
func BenchmarkRealNow(b *testing.B) {
	t0 := Real.Now()
	for b.Loop() {
		sinkDuration = Real.Now().Sub(t0)
	}
}

func BenchmarkRealSince(b *testing.B) {
	t0 := Real.Now()
	for b.Loop() {
		sinkDuration = Real.Since(t0)
	}
}

func TestSleepWaitsOnItsClockOrTheContext(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	done := make(chan error, 1)
	go func() { done <- Sleep(context.Background(), f, time.Second) }()
	// (testwait imports this package, so the bounds are written out.)
	limit := time.Now().Add(30 * time.Second)
	for f.Timers() != 1 { // Sleep has armed its timer
		if time.Now().After(limit) {
			t.Fatal("Sleep armed no timer")
		}
		runtime.Gosched()
	}
	f.Add(time.Second)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Sleep after its time = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Sleep did not return once its time had passed")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, f, time.Hour); err != context.Canceled {
		t.Fatalf("Sleep with an ended context = %v, want Canceled", err)
	}
	if err := Sleep(context.Background(), f, 0); err != nil {
		t.Fatalf("Sleep(0) = %v", err)
	}
}

// firedClock's timers have fired by the time NewTimer returns.
type firedClock struct{ *Fake }

func (c firedClock) NewTimer(d time.Duration) Timer {
	t := c.Fake.NewTimer(d)
	c.Fake.Add(d)
	return t
}

// When the timer and the context's end are both ready, Sleep reports the
// context: a caller never goes on to work its context no longer allows.
// select picks at random between ready cases, so this repeats.
func TestSleepPrefersTheEndedContext(t *testing.T) {
	c := firedClock{NewFake(time.Unix(0, 0))}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := 0; i < 200; i++ {
		if err := Sleep(ctx, c, time.Second); err != context.Canceled {
			t.Fatalf("run %d: Sleep with its timer fired and its context ended = %v, want Canceled", i, err)
		}
	}
}

// WaitTimers returns once enough timers wait (at once if they already do),
// and with ctx's error if they never come.
func TestFakeWaitTimers(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f.WaitTimers(ctx, 2) }()
	f.NewTimer(time.Second)
	select {
	case err := <-done:
		t.Fatalf("WaitTimers(2) returned %v with one timer", err)
	default:
	}
	f.NewTimer(time.Second)
	if err := <-done; err != nil {
		t.Fatalf("WaitTimers(2) with two timers: %v", err)
	}
	if err := f.WaitTimers(ctx, 2); err != nil {
		t.Fatalf("WaitTimers when the timers already wait: %v", err)
	}
	short, cancelShort := context.WithCancel(context.Background())
	cancelShort()
	if err := f.WaitTimers(short, 3); err != context.Canceled {
		t.Fatalf("WaitTimers(3) with an ended context = %v, want context.Canceled", err)
	}
}
