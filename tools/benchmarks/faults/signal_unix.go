//go:build unix

package faults

import (
	"os"
	"syscall"
)

// childSignal is a signal the suite sends a child server.
type childSignal = syscall.Signal

const (
	sigKill = syscall.SIGKILL
	sigStop = syscall.SIGSTOP
	sigCont = syscall.SIGCONT
)

// canSignal reports whether kill and freeze can run here.
const canSignal = true

func sendSignal(p *os.Process, sig childSignal) error { return p.Signal(sig) }
