//go:build unix

package faults

import "syscall"

// The signals that freeze and thaw a child; kill and freeze need them.
var sigStop, sigCont = syscall.SIGSTOP, syscall.SIGCONT

const canSignal = true
