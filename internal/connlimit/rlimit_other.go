//go:build !unix

package connlimit

// descriptorLimit returns a descriptor limit for systems without
// RLIMIT_NOFILE.
func descriptorLimit() int { return 1 << 14 }
