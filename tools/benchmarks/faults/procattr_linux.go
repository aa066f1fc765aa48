package faults

import (
	"bytes"
	"fmt"
	"os"
	"time"
)

// waitStopped waits until the process pid is stopped (state T in
// /proc/pid/stat): SIGSTOP is delivered asynchronously, and a freeze is only
// a fault once the child has stopped running. It gives up after limit.
func waitStopped(pid int, limit time.Duration) error {
	path := fmt.Sprintf("/proc/%d/stat", pid)
	deadline := time.Now().Add(limit)
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("faults: read the state of pid %d: %w", pid, err)
		}
		// The state follows the command name, which is in parentheses
		// and may itself hold spaces or parentheses.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'T' {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("faults: pid %d did not stop within %v of SIGSTOP", pid, limit)
		}
		time.Sleep(time.Millisecond)
	}
}
