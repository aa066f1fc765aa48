//go:build !race

package faults

// RaceDetector reports whether this binary was built with -race, which
// slows every goroutine down several times.
const RaceDetector = false
