//go:build !linux

package server

const childServerEnv = "SLUICE_DOORMAN_TEST_CHILD"

// runChildServer needs RLIMIT_NOFILE, which this test sets on Linux only.
func runChildServer(string) int { return 2 }
