package benchrun

import (
	"fmt"
	"slices"
	"strings"
)

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
