// Package testwait bounds the waits of tests: a test that waits on a
// channel fails with a message naming what it waited for, instead of
// hanging until the test binary's timeout with no clue which wait stuck.
package testwait

import (
	"testing"
	"time"
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
