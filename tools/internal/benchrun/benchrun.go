// Package benchrun holds what the in-process benchmark suites
// (tools/benchmarks: balancing, closedloop, faults, hostile) share about a
// run: its Size, the garbage collector's target while it runs, and how a
// row names a feature switched on or off. Each suite says what its sizes
// mean; this package only names them, so that every suite spells them
// alike in its tables and JSON.
package benchrun

import (
	"fmt"
	"runtime/debug"
)

// Size is how big a suite's runs are: Full, what the suite's command runs
// by default, or CI, small enough for go test.
type Size int

// The sizes.
const (
	Full Size = iota
	CI
)

// String returns "full" or "ci".
func (z Size) String() string {
	if z == CI {
		return "ci"
	}
	return "full"
}

// MarshalText writes the size's name, for JSON.
func (z Size) MarshalText() ([]byte, error) { return []byte(z.String()), nil }

// Pick returns full or ci by the size.
func Pick[T any](z Size, full, ci T) T {
	if z == CI {
		return ci
	}
	return full
}

// DefaultGCPercent is the garbage collector's target (as GOGC) a suite
// that runs its load generator, client and servers in one process sets
// while it runs: at the default of 100 the collector ran several times a
// second under load and, marking, took a share of two cores from the
// client and the servers (tools/benchmarks/closedloop measured it).
const DefaultGCPercent = 400

// SetGCPercent sets the garbage collector's target to percent, when
// percent > 0, and returns the function that restores the setting it
// replaced; a percent <= 0 keeps the process's setting (restore does
// nothing).
func SetGCPercent(percent int) (restore func()) {
	if percent <= 0 {
		return func() {}
	}
	old := debug.SetGCPercent(percent)
	return func() { debug.SetGCPercent(old) }
}

// GOGC names a run's GCPercent in a report: the percent, or "the
// process's" for one <= 0.
func GOGC(percent int) string {
	if percent > 0 {
		return fmt.Sprint(percent)
	}
	return "the process's"
}

// OnOff names a feature's row: "on" or "off".
func OnOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
