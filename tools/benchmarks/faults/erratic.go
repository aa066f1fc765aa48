package faults

import (
	"math/rand/v2"
	"sync"
	"time"
)

// ErrorStreak is how many UNEXPECTED answers in a row the erroring peer
// gives before the contract expects its ejection: Sluice's outlier
// ejection's default, written out.
const ErrorStreak = 5

// ErrorSeed seeds the choice of the calls the erroring peer fails: its
// answers begin ok, ok, fail, ok and then seven failures, so its first
// ErrorStreak failures in a row end with its 9th call.
const ErrorSeed = 23

// erratic decides which calls an erroring server fails: each, in the
// order its handler runs, with probability 1/2 from a PCG seeded with
// ErrorSeed. It notes when the first ErrorStreak failures in a row ended.
type erratic struct {
	mu                   sync.Mutex
	rng                  *rand.Rand
	inRow, calls, failed int
	streakAt             time.Time // zero until the first streak
}

func newErratic() *erratic {
	return &erratic{rng: rand.New(rand.NewPCG(ErrorSeed, ErrorSeed))}
}

// fail decides whether the call whose handler runs at now fails.
func (e *erratic) fail(now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls++
	if e.rng.IntN(2) != 0 {
		e.inRow = 0
		return false
	}
	e.failed++
	if e.inRow++; e.inRow == ErrorStreak && e.streakAt.IsZero() {
		e.streakAt = now
	}
	return true
}

// state returns when the first ErrorStreak failures in a row ended (zero:
// not yet), the calls decided and how many failed.
func (e *erratic) state() (streakAt time.Time, calls, failed int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.streakAt, e.calls, e.failed
}
