// Package benchrun holds what the in-process benchmark suites share about
// a run: its Size, the garbage collector's target while it runs, and the
// names of lists and switches in their tables.
package benchrun

import (
	"fmt"
	"runtime/debug"
)

// Size is how big a suite's runs are: Full, or CI for go test.
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

// DefaultGCPercent is the GOGC a suite running its load generator, client
// and servers in one process sets: at 100 the collector ran several times
// a second under load and set the p99 of every loaded row.
const DefaultGCPercent = 400

// SetGCPercent sets GOGC to percent, when > 0, and returns the function
// that restores it.
func SetGCPercent(percent int) (restore func()) {
	if percent <= 0 {
		return func() {}
	}
	old := debug.SetGCPercent(percent)
	return func() { debug.SetGCPercent(old) }
}

// GOGC names a run's GCPercent in a report.
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

// Default sets *v to d when it is the zero value: a config's default.
func Default[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}
