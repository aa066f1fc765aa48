// Package procmem reads this process's memory figures for tests that
// bound what an attack costs.
package procmem

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// PeakRSS returns this process's peak resident set size (Linux's VmHWM),
// or an error where /proc/self/status has none.
func PeakRSS() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("no peak RSS to read: %v", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmHWM in /proc/self/status")
}
