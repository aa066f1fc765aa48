//go:build !unix

package faults

import (
	"errors"
	"os"
)

// childSignal is a signal the suite sends a child server.
type childSignal int

const (
	sigKill childSignal = iota
	sigStop
	sigCont
)

// canSignal reports whether kill and freeze can run here.
const canSignal = false

func sendSignal(p *os.Process, sig childSignal) error {
	if sig == sigKill {
		return p.Kill()
	}
	return errors.New("faults: stopping a process (SIGSTOP) needs a Unix system")
}
