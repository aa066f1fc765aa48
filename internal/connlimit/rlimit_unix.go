//go:build unix

package connlimit

import "syscall"

// descriptorLimit returns the process's soft limit on open descriptors.
func descriptorLimit() int {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil || r.Cur > 1<<30 {
		return 1 << 16
	}
	return int(r.Cur)
}
