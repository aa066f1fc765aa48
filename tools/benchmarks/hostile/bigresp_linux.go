package hostile

import (
	"os"
	"syscall"
)

// maxRSS is an exited process's peak resident memory in bytes (its
// rusage's ru_maxrss, in KiB on Linux), 0 if unknown.
func maxRSS(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss << 10
	}
	return 0
}
