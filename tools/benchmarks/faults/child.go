package faults

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/tools/internal/childproc"
)

// ChildEnv is the environment variable that makes ServeChildIfAsked turn
// the process into a child server. The suite sets it, to ChildServe, only
// in the environment of the children it starts.
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

// The lines a child writes on its standard output, one per event.
const (
	lineListening = "listening " // followed by host:port, once, first
	lineAccept    = "accept"     // it accepted a TCP connection
	lineExec      = "exec"       // a handler ran
	lineError     = "error "     // followed by why it could not serve
)

// ServeChildIfAsked makes this process a fault-suite child server when the
// environment variable ChildEnv is ChildServe, and then never returns;
// otherwise it returns at once and does nothing.
//
// The kill and freeze scenarios run their failing server in a child process
// (so that it can be killed with SIGKILL or stopped with SIGSTOP) by
// re-executing the current binary (os.Executable) with ChildEnv set. Any
// binary that runs those scenarios must therefore call ServeChildIfAsked
// first thing: `sluice-lab` in main, a test binary in TestMain. A binary that
// does not is started with the argument -test.run=^$ (a test binary then
// runs nothing) and the scenario fails with an error saying so.
//
// The child is a channel.Channel of Service serving the raw and JSON
// methods (MethodEcho, MethodBusy, MethodDeclined) on 127.0.0.1:0. It writes
// "listening HOST:PORT" on its standard output, then one line per accepted
// connection ("accept") and per handler execution ("exec"), and exits when
// its standard input ends: when the parent closes it or dies.
func ServeChildIfAsked() {
	if os.Getenv(ChildEnv) != ChildServe {
		return
	}
	os.Exit(serveChild(os.Stdin, os.Stdout))
}

// serveChild is the child server: it serves until stdin ends and returns
// the exit code.
func serveChild(stdin io.Reader, stdout io.Writer) int {
	out := &lineWriter{w: stdout}
	ch, err := channel.New(Service)
	if err != nil {
		out.line(lineError + err.Error())
		return 1
	}
	defer ch.Close()
	if err := registerHandlers(ch, func() { out.line(lineExec) }, nil); err != nil {
		out.line(lineError + err.Error())
		return 1
	}
	if err := serveCounting(ch, func() { out.line(lineAccept) }); err != nil {
		out.line(lineError + err.Error())
		return 1
	}
	out.line(lineListening + ch.HostPort())
	io.Copy(io.Discard, stdin) // until the parent closes it or dies
	return 0
}

// lineWriter writes whole lines from concurrent goroutines.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) line(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	io.WriteString(l.w, s+"\n")
}

// child is a child server process seen from the parent: its address, the
// accepts and executions it reported, and the signals the scenarios send it.
type child struct {
	proc *childproc.Proc
	addr string
	// exited is closed once the process has exited and been reaped.
	exited <-chan struct{}

	mu      sync.Mutex
	stopped bool // SIGSTOP sent, SIGCONT not yet
}

// startChild starts a child server and waits (at most childStartLimit) for
// its address. The events it reports are recorded in accepts and execs,
// timed when the parent reads them.
func startChild(accepts, execs *events) (*child, error) {
	addrc := make(chan string, 1)
	var other []string // lines that are not events, for the error message
	p, err := childproc.Start(childproc.Config{Env: ChildEnv + "=" + ChildServe, OnLine: func(l string) {
		switch {
		case l == lineExec:
			execs.add(time.Now())
		case l == lineAccept:
			accepts.add(time.Now())
		case strings.HasPrefix(l, lineListening):
			addrc <- strings.TrimPrefix(l, lineListening)
		default:
			if len(other) < 10 {
				other = append(other, l)
			}
		}
	}})
	if err != nil {
		return nil, fmt.Errorf("faults: %w", err)
	}
	c := &child{proc: p, exited: p.Exited()}
	timer := time.NewTimer(childStartLimit)
	defer timer.Stop()
	select {
	case c.addr = <-addrc:
		return c, nil
	case <-c.exited:
		return nil, fmt.Errorf("faults: the child server (%s) exited before reporting its address: "+
			"does the binary call faults.ServeChildIfAsked first thing in main (or TestMain)? stdout %q, stderr %q",
			p.Executable(), other, p.Stderr())
	case <-timer.C:
		c.close()
		return nil, fmt.Errorf("faults: the child server (%s) did not report its address within %v; stderr %q",
			p.Executable(), childStartLimit, p.Stderr())
	}
}

// Addr returns the child's host:port.
func (c *child) Addr() string { return c.addr }

// kill sends SIGKILL: the kernel closes the child's sockets at once.
func (c *child) kill() error { return c.signal(sigKill) }

// freeze sends SIGSTOP: the child stops answering, and no FIN or RST tells
// the client (the kernel still completes TCP handshakes into the backlog).
func (c *child) freeze() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.signal(sigStop); err != nil {
		return err
	}
	c.stopped = true
	return waitStopped(c.proc.Pid(), childExitLimit)
}

// thaw sends SIGCONT to a frozen child.
func (c *child) thaw() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.stopped {
		return nil
	}
	if err := c.signal(sigCont); err != nil {
		return err
	}
	c.stopped = false
	return nil
}

// close thaws the child, closes its stdin (it exits) and waits for it,
// killing it if it has not exited within childExitLimit.
func (c *child) close() error {
	c.thaw()
	if err := c.proc.Close(childExitLimit); err != nil {
		return fmt.Errorf("faults: the child server %s: %w", c.addr, err)
	}
	return nil
}

// signal sends sig unless the child has exited.
func (c *child) signal(sig childSignal) error {
	select {
	case <-c.exited:
		return errors.New("faults: the child server has already exited")
	default:
	}
	if err := sendSignal(c.proc.Process(), sig); err != nil {
		return fmt.Errorf("faults: signal the child server %s (pid %d): %w", c.addr, c.proc.Pid(), err)
	}
	return nil
}
