// Package testwait bounds the waits of tests: a test that waits on a
// channel fails with a message naming what it waited for, instead of
// hanging until the test binary's timeout with no clue which wait stuck.
package testwait

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/clock"
)

// Limit is how long a test waits for something that should happen at once.
// It is far above any legitimate wait, so only a lost event trips it, even
// on a loaded CI machine running the race detector.
const Limit = 30 * time.Second

// Recv returns the next value from ch, failing the test if none arrives
// (or ch is not closed) within Limit.
func Recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(Limit)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("waited %v for %s", Limit, what)
		panic("unreachable")
	}
}

// Until polls cond every millisecond until it holds, failing the test if
// it does not within Limit. It is for conditions no channel signals (a
// goroutine has armed a timer, a counter has moved).
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", Limit, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// Timers waits until exactly n timers are pending on f: the goroutine under
// test has started waiting and the test may move the clock.
func Timers(t testing.TB, f *clock.Fake, n int) {
	t.Helper()
	Until(t, fmt.Sprintf("%d pending timers on the fake clock", n), func() bool { return f.Timers() == n })
}
