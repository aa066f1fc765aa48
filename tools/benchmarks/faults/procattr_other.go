//go:build !linux

package faults

import (
	"syscall"
	"time"
)

// childProcAttr has nothing to add where the kernel cannot kill a child
// when its parent dies; the child exits when its stdin ends.
func childProcAttr() *syscall.SysProcAttr { return nil }

// waitStopped cannot tell a stopped process here; the freeze is taken as
// done once SIGSTOP is sent.
func waitStopped(int, time.Duration) error { return nil }
