//go:build !linux

package faults

import "time"

// waitStopped cannot tell a stopped process here; the freeze is taken as
// done once SIGSTOP is sent.
func waitStopped(int, time.Duration) error { return nil }
