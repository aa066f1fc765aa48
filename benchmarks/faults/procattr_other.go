//go:build !linux

package faults

import "syscall"

// childProcAttr has nothing to add where the kernel cannot kill a child
// when its parent dies; the child exits when its stdin ends.
func childProcAttr() *syscall.SysProcAttr { return nil }
