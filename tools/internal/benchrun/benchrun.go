// Package benchrun holds what the in-process benchmark suites share about
// a run: its Size, the garbage collector's target while it runs, and the
// names of lists and switches in their tables.
package benchrun

import (
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
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

// ParseList reads a suite's --scenarios (or --attacks): comma-separated
// names out of all, each kept once, or "all"; what names them in errors.
func ParseList[T ~string](list string, all []T, what string) ([]T, error) {
	if strings.TrimSpace(list) == "all" {
		return slices.Clone(all), nil
	}
	var out []T
	for _, name := range strings.Split(list, ",") {
		n := T(strings.TrimSpace(name))
		if !slices.Contains(all, n) {
			return nil, fmt.Errorf("unknown %s %q; the %ss are %s (or all)", what, n, what, Names(all))
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// Names lists names for a message: "a, b, c".
func Names[T ~string](names []T) string {
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	return strings.Join(s, ", ")
}
