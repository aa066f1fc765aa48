//go:build !linux

package childproc

import "syscall"

func procAttr() *syscall.SysProcAttr { return nil }
