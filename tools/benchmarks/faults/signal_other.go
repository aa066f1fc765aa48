//go:build !unix

package faults

import "os"

// No SIGSTOP here: kill and freeze do not run.
var sigStop, sigCont os.Signal

const canSignal = false
