package ratelimit

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	expbackoff "github.com/sluice-rpc/sluice/backoff"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"

	"github.com/sluice-rpc/sluice/pacing"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestDelay(t *testing.T) {
	b := expbackoff.Exponential{Initial: time.Second, Max: 20 * time.Second, Multiplier: 2, Jitter: expbackoff.FullJitter}
	tests := []struct {
		name        string
		n           int
		r           float64
		timeLeft    time.Duration
		maxDelay    time.Duration
		want        time.Duration
		wantTooLong bool
	}{
		// EqualJitter whatever b says: ceiling 1s, so [0.5s, 1s).
		{name: "not throttled, equal jitter low", n: 1, r: 0, want: 500 * ms},
		{name: "not throttled, equal jitter mid", n: 1, r: 0.5, want: 750 * ms},
		{name: "third retry", n: 3, r: 0, want: 2 * time.Second},
		{name: "window longer than backoff", n: 1, r: 0.5, timeLeft: 3 * time.Second, want: 3 * time.Second},
		{name: "backoff longer than window", n: 4, r: 0, timeLeft: time.Second, want: 4 * time.Second},
		{name: "within max delay", n: 1, timeLeft: 5 * time.Second, maxDelay: 5 * time.Second, want: 5 * time.Second},
		{name: "past max delay", n: 1, timeLeft: 21 * time.Second, maxDelay: 20 * time.Second, want: 21 * time.Second, wantTooLong: true},
		{name: "backoff alone past max delay", n: 5, r: 0, maxDelay: 5 * time.Second, want: 8 * time.Second, wantTooLong: true},
		{name: "no max delay", n: 1, timeLeft: time.Hour, want: time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, tooLong := Delay(b, tc.n, tc.r, tc.timeLeft, tc.maxDelay)
			if got != tc.want || tooLong != tc.wantTooLong {
				t.Fatalf("Delay = %v, %v; want %v, %v", got, tooLong, tc.want, tc.wantTooLong)
			}
		})
	}
}

func TestWindowsUnthrottledPassesAtOnce(t *testing.T) {
	f := clock.NewFake(time.Now())
	w := NewWindows(f)
	if err := w.Wait(context.Background(), "kv", time.Second); err != nil {
		t.Fatal(err)
	}
	if f.Timers() != 0 {
		t.Fatal("an unthrottled Wait made a timer")
	}
	if n := testing.AllocsPerRun(100, func() { _ = w.Wait(context.Background(), "kv", time.Second) }); n != 0 {
		t.Fatalf("an unthrottled Wait allocates %v times", n)
	}
}

func TestWindowsWaitsUntilTheWindowEnds(t *testing.T) {
	f := clock.NewFake(time.Now())
	w := NewWindows(f)
	w.Record("kv::Get", f.Now().Add(3*time.Second))
	done := make(chan error, 1)
	go func() { done <- w.Wait(context.Background(), "kv::Get", 5*time.Second) }()
	testwait.Timers(t, f, 1)
	f.Add(2999 * ms)
	select {
	case err := <-done:
		t.Fatalf("Wait returned %v before the window ended", err)
	default:
	}
	f.Add(ms)
	if err := testwait.Recv(t, done, "Wait to return"); err != nil {
		t.Fatalf("Wait = %v after the window ended", err)
	}
	if d := w.Remaining("kv::Get"); d != 0 {
		t.Fatalf("Remaining = %v after the window", d)
	}
	// Another dimension was never throttled.
	if err := w.Wait(context.Background(), "kv", time.Nanosecond); err != nil {
		t.Fatal(err)
	}
}

func TestWindowsFailFastPastMaxDelay(t *testing.T) {
	f := clock.NewFake(time.Now())
	w := NewWindows(f)
	w.Record("kv", f.Now().Add(30*time.Second))
	f.Add(10 * time.Second)
	err := w.Wait(context.Background(), "kv", 5*time.Second)
	if !errors.Is(err, pacing.ErrRateLimited) {
		t.Fatalf("Wait = %v, want pacing.ErrRateLimited", err)
	}
	var we *pacing.WindowError
	if !errors.As(err, &we) || we.Remaining != 20*time.Second || we.Limit != 5*time.Second || we.Deadline || we.Key != "kv" {
		t.Fatalf("error = %#v", err)
	}
	if !strings.Contains(err.Error(), "another 20s") || !strings.Contains(err.Error(), "maximum delay") {
		t.Fatalf("message %q does not say how long the window runs", err)
	}
	if f.Timers() != 0 {
		t.Fatal("a failed Wait left a timer")
	}
}

func TestWindowsFailFastPastDeadline(t *testing.T) {
	f := clock.NewFake(time.Now())
	w := NewWindows(f)
	w.Record("kv", f.Now().Add(30*time.Second))
	ctx, cancel := context.WithDeadline(context.Background(), f.Now().Add(time.Hour+10*time.Second))
	defer cancel()
	// The deadline is past the window: the call waits.
	done := make(chan error, 1)
	go func() { done <- w.Wait(ctx, "kv", 0) }()
	testwait.Timers(t, f, 1)
	f.Add(30 * time.Second)
	if err := testwait.Recv(t, done, "Wait to return"); err != nil {
		t.Fatal(err)
	}
	// A deadline before the window's end fails at once. The deadline is a
	// wall-clock time, so what is left of it is measured on the wall clock
	// (about 1h10s here), not on the windows' fake clock.
	w.Record("kv", f.Now().Add(2*time.Hour))
	err := w.Wait(ctx, "kv", 0)
	var we *pacing.WindowError
	if !errors.As(err, &we) || !we.Deadline || we.Remaining != 2*time.Hour ||
		we.Limit <= time.Hour+9*time.Second || we.Limit > time.Hour+10*time.Second {
		t.Fatalf("Wait = %#v", err)
	}
	if !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("message %q does not name the deadline", err)
	}
}

func TestWindowsReleaseAndCancel(t *testing.T) {
	f := clock.NewFake(time.Now())
	w := NewWindows(f)
	w.Record("kv", f.Now().Add(time.Minute))
	done := make(chan error, 1)
	go func() { done <- w.Wait(context.Background(), "kv", 0) }()
	testwait.Timers(t, f, 1)
	w.Release("kv")
	if err := testwait.Recv(t, done, "Wait to return"); err != nil {
		t.Fatalf("Wait after Release = %v", err)
	}
	if f.Timers() != 0 {
		t.Fatal("the released waiter left its timer")
	}

	w.Record("kv", f.Now().Add(time.Minute))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- w.Wait(ctx, "kv", 0) }()
	testwait.Timers(t, f, 1)
	cancel()
	if err := testwait.Recv(t, done, "Wait to return"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after cancel = %v", err)
	}
}

func TestWindowsRecordKeepsTheLaterEnd(t *testing.T) {
	f := clock.NewFake(time.Now())
	w := NewWindows(f)
	w.Record("kv", f.Now().Add(10*time.Second))
	w.Record("kv", f.Now().Add(5*time.Second))
	w.Record("kv", f.Now()) // not after now: nothing
	if d := w.Remaining("kv"); d != 10*time.Second {
		t.Fatalf("Remaining = %v, want 10s", d)
	}
	// A window extended while a call waits is honoured.
	done := make(chan error, 1)
	go func() { done <- w.Wait(context.Background(), "kv", 0) }()
	testwait.Timers(t, f, 1)
	w.Record("kv", f.Now().Add(15*time.Second))
	f.Add(10 * time.Second)
	testwait.Timers(t, f, 1) // waiting again, for the extension
	select {
	case err := <-done:
		t.Fatalf("Wait returned %v inside the extended window", err)
	default:
	}
	f.Add(5 * time.Second)
	if err := testwait.Recv(t, done, "Wait to return"); err != nil {
		t.Fatal(err)
	}
}

func TestWindowsRecordSignal(t *testing.T) {
	f := clock.NewFake(time.Now())
	w := NewWindows(f)
	sig, err := ParseHeaders(map[string]string{pacing.HeaderUserAPI: "Remain:0,Limit:2,Time:1000,TimeLeft:800"}, f.Now())
	if err != nil {
		t.Fatal(err)
	}
	w.RecordSignal("kv", "Get", sig)
	if d := w.Remaining("kv::Get"); d != 800*ms {
		t.Fatalf("kv::Get window = %v, want 800ms", d)
	}
	if d := w.Remaining("kv"); d != 0 {
		t.Fatalf("kv window = %v, want none", d)
	}
	w.RecordSignal("kv", "Put", pacing.Signal{Fields: pacing.FieldRemaining, Remaining: 3}) // no wait asked
	if d := w.Remaining("kv::Put"); d != 0 {
		t.Fatalf("kv::Put window = %v, want none", d)
	}
}

func TestWindowsConcurrent(t *testing.T) {
	f := clock.NewFake(time.Now())
	w := NewWindows(f)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 32 {
		wg.Add(2)
		key := []string{"a", "b"}[i%2]
		go func() {
			defer wg.Done()
			w.Record(key, f.Now().Add(time.Second))
		}()
		go func() {
			defer wg.Done()
			errs <- w.Wait(context.Background(), key, 2*time.Second)
		}()
	}
	// Advance until every waiter is through; each waits at most 1s past
	// the latest record.
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	deadline := time.Now().Add(testwait.Limit)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("waiters still waiting after %v of advancing the clock", testwait.Limit)
		}
		select {
		case <-finished:
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			return
		default:
			f.Add(100 * ms)
			runtime.Gosched()
		}
	}
}

func BenchmarkWindowsWaitUnthrottled(b *testing.B) {
	w := NewWindows(nil)
	w.Record("other", time.Now().Add(time.Hour))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_ = w.Wait(ctx, "kv::Get", time.Second)
	}
}
