// Package wirenum bounds the numbers a Doorman peer sends before they
// become state: any server may answer a client, and any client or parent
// may talk to a server, so a number from the wire is a claim to be
// clamped, never a value to compute with as it comes. The leasing client
// and the server (as a parent's client and as a server of clients) share
// these rules, so that both read a field the same way.
package wirenum

import (
	"math"
	"time"
)

// MaxSeconds bounds every duration read from the wire, in seconds: 30
// days, the longest lease or learning mode Sluice's server hands out. Any
// longer one is a unit mistake or an attack, and the bound keeps every
// duration far from time.Duration's range (about 292 years), which a
// huge number of seconds multiplied by time.Second would overflow into a
// negative duration.
const MaxSeconds = 30 * 24 * 60 * 60

// Seconds returns a whole number of seconds from the wire as a Duration,
// within [lo, MaxSeconds] seconds (lo is the smallest the reader accepts,
// such as 1 for an interval that must not be zero; lo > MaxSeconds is
// taken as MaxSeconds).
func Seconds(sec, lo int64) time.Duration {
	return time.Duration(ClampSeconds(sec, lo)) * time.Second
}

// ClampSeconds returns sec within [lo, MaxSeconds] (see Seconds).
func ClampSeconds(sec, lo int64) int64 {
	return min(max(sec, lo), MaxSeconds)
}

// FiniteNonNegative reports whether v is a number a quantity (wants, a
// capacity) may be: finite and >= 0.
func FiniteNonNegative(v float64) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0
}
