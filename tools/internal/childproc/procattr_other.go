//go:build !linux

package childproc

import "syscall"

// procAttr has nothing to add where the kernel cannot kill a child when
// its parent dies; the child exits when its stdin ends.
func procAttr() *syscall.SysProcAttr { return nil }
