package faults

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/sluice-rpc/sluice/tools/internal/fleet"
)

// ChildEnv makes ServeChildIfAsked turn the process into a child server
// when it is ChildServe, which the suite sets only in its children's
// environment.
const (
	ChildEnv   = "SLUICE_FAULTS_CHILD"
	ChildServe = "serve"
)

// Bounds on a child process's life.
const (
	// childStartLimit bounds the wait for a child to report its address.
	childStartLimit = 10 * time.Second
	// childExitLimit bounds the wait for a child to exit once asked (its
	// stdin closed), and again once killed.
	childExitLimit = 5 * time.Second
)

// The lines a child writes besides "listening HOST:PORT" and "error WHY".
const (
	lineAccept = "accept" // it accepted a TCP connection
	lineExec   = "exec"   // a handler ran
)

// ServeChildIfAsked makes this process a fault-suite child server when
// ChildEnv is ChildServe, and then never returns; otherwise it returns at
// once.
//
// The kill and freeze scenarios run their failing server in a child
// process (to kill it with SIGKILL or stop it with SIGSTOP), this binary
// re-executed with ChildEnv set: a binary that runs them calls
// ServeChildIfAsked first thing, `sluice-lab` in main, a test binary in
// TestMain. The child serves Service's methods on 127.0.0.1:0, writes
// "listening HOST:PORT", then a line per accepted connection ("accept")
// and per handler execution ("exec"), and exits when its stdin ends.
func ServeChildIfAsked() {
	if os.Getenv(ChildEnv) == ChildServe {
		os.Exit(serveChild(os.Stdin, os.Stdout))
	}
}

// serveChild is the child server: it serves until stdin ends and returns
// the exit code.
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
type child struct {
	*fleet.Child
	addr string

	mu      sync.Mutex
	stopped bool // SIGSTOP sent, SIGCONT not yet
}

// startChild starts a child server and waits for its address. The
// accepts and executions it reports are recorded, timed when the parent
// reads them.
func startChild(accepts, execs *events) (*child, error) {
	fc, err := fleet.Start(ChildEnv+"="+ChildServe, "faults.ServeChildIfAsked", func(f []string) bool {
		switch f[0] {
		case lineExec:
			execs.add(time.Now())
		case lineAccept:
			accepts.add(time.Now())
		default:
			return false
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("faults: %w", err)
	}
	c := &child{Child: fc}
	args, err := fc.Wait(fleet.Listening, "report its address", childStartLimit)
	if err != nil {
		c.close()
		return nil, fmt.Errorf("faults: the child server: %w", err)
	}
	c.addr = args[0]
	return c, nil
}

// kill sends SIGKILL: the kernel closes the child's sockets at once.
func (c *child) kill() error { return c.signal(os.Kill) }

// freeze sends SIGSTOP and waits for the child to stop: it answers
// nothing, and no FIN or RST tells the client.
func (c *child) freeze() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.signal(sigStop); err != nil {
		return err
	}
	c.stopped = true
	return waitStopped(c.Proc.Pid(), childExitLimit)
}

// thaw sends SIGCONT to a frozen child.
func (c *child) thaw() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.stopped {
		return nil
	}
	c.stopped = false
	return c.signal(sigCont)
}

// close thaws the child, closes its stdin (it exits) and waits for it,
// killing it if it has not exited within childExitLimit.
func (c *child) close() error {
	c.thaw()
	if err := c.Proc.Close(childExitLimit); err != nil {
		return fmt.Errorf("faults: the child server %s: %w", c.addr, err)
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
		return fmt.Errorf("faults: signal the child server %s (pid %d): %w", c.addr, c.Proc.Pid(), err)
	}
	return nil
}

// waitStopped waits, at most limit, until the process pid is stopped
// (state T in /proc/pid/stat): SIGSTOP is delivered asynchronously.
// Without /proc (off Linux) the freeze is taken as done once SIGSTOP is
// sent.
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
