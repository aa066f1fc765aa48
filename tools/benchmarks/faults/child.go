package faults

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/sluice-rpc/sluice/tools/internal/fleet"
)

const (
	// ChildEnv set to ChildServe makes ServeChildIfAsked a child server.
	ChildEnv   = "SLUICE_FAULTS_CHILD"
	ChildServe = "serve"
	// Bounds on a child's start, and on its exit once asked (then again
	// once killed).
	childStartLimit = 10 * time.Second
	childExitLimit  = 5 * time.Second
	// The lines a child writes besides fleet's: it accepted a TCP
	// connection, a handler ran.
	lineAccept = "accept"
	lineExec   = "exec"
)

// ServeChildIfAsked makes this process a fault-suite child server when
// ChildEnv is ChildServe, and then never returns; otherwise it returns at
// once. The kill and freeze scenarios re-execute the binary as their
// failing server, so a binary that runs them calls it first thing (main,
// or TestMain). The child serves Service on 127.0.0.1, writes "listening
// HOST:PORT", then "accept" or "exec" per connection accepted and handler
// run, and exits when its stdin ends.
func ServeChildIfAsked() {
	if os.Getenv(ChildEnv) == ChildServe {
		os.Exit(serveChild(os.Stdin, os.Stdout))
	}
}

// serveChild serves until stdin ends and returns the exit code.
func serveChild(stdin io.Reader, stdout io.Writer) int {
	out := &fleet.Lines{W: stdout}
	s, err := startServer(func() { out.Line(lineAccept) }, func() { out.Line(lineExec) }, nil)
	if err != nil {
		return out.Fail(err)
	}
	defer s.Close()
	out.Line(fleet.Listening, s.HostPort())
	io.Copy(io.Discard, stdin) // until the parent closes it or dies
	return 0
}

// child is a child server process seen from the parent.
type child struct{ *fleet.Child }

// startChild starts a child server; the accepts and executions it reports
// are recorded as the parent reads them.
func startChild(accepts, execs *events) (*child, error) {
	fc, err := fleet.Start(ChildEnv+"="+ChildServe, "faults.ServeChildIfAsked", childStartLimit, func(f []string) bool {
		switch f[0] {
		case lineExec:
			execs.now()
		case lineAccept:
			accepts.now()
		default:
			return false
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("faults: the child server: %w", err)
	}
	return &child{fc}, nil
}

// kill sends SIGKILL: the kernel closes the child's sockets at once.
func (c *child) kill() error { return c.signal(os.Kill) }

// freeze sends SIGSTOP and waits for the child to stop: no FIN or RST
// tells the client.
func (c *child) freeze() error {
	if err := c.signal(sigStop); err != nil {
		return err
	}
	return waitStopped(c.Proc.Pid(), childExitLimit)
}

// thaw sends SIGCONT, which a running child ignores.
func (c *child) thaw() error { return c.signal(sigCont) }

// close thaws the child and ends it.
func (c *child) close() error {
	c.thaw()
	if err := c.Proc.Close(childExitLimit); err != nil {
		return fmt.Errorf("faults: the child server %s: %w", c.Addr, err)
	}
	return nil
}

// signal sends sig unless the child has exited.
func (c *child) signal(sig os.Signal) error {
	select {
	case <-c.Proc.Exited():
		return errors.New("faults: the child server has already exited")
	default:
	}
	if err := c.Proc.Process().Signal(sig); err != nil {
		return fmt.Errorf("faults: signal the child server %s (pid %d): %w", c.Addr, c.Proc.Pid(), err)
	}
	return nil
}

// waitStopped waits at most limit for the process pid to be stopped
// (state T in /proc/pid/stat), as SIGSTOP is delivered asynchronously;
// off Linux it returns at once.
func waitStopped(pid int, limit time.Duration) error {
	if runtime.GOOS != "linux" {
		return nil
	}
	deadline := time.Now().Add(limit)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return fmt.Errorf("faults: read the state of pid %d: %w", pid, err)
		}
		// The state follows the command name, in parentheses.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'T' {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("faults: pid %d did not stop within %v of SIGSTOP", pid, limit)
		}
		time.Sleep(time.Millisecond)
	}
}
