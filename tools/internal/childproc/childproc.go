// Package childproc runs a benchmark's helper processes: this very binary,
// re-executed (os.Executable) with an environment variable that tells it
// what to be, or another program that keeps the same contract
// (Config.Command: the Node peers of the interop tests). The child reports
// on its standard output, one line per event, and exits when its standard
// input ends; the parent reads the lines as they come, writes commands on
// the child's stdin if the child takes any, and ends it by closing its
// stdin, then with SIGKILL if it has not exited within a bound.
//
// A binary whose benchmarks start children must let the child take over
// first thing (in main, and in a test binary's TestMain): each package
// that starts children has a ServeChildIfAsked or the like for that. The
// child is started with the argument -test.run=^$, so that a test binary
// without the hook runs no test and exits at once, and the parent reports
// that it exited before saying what it was waiting for.
//
// On Linux the kernel kills a child whose parent died without closing its
// stdin (even a stopped one): no child outlives its benchmark.
package childproc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Config says how to start a child.
type Config struct {
	// Env is added to the child's environment, as NAME=VALUE: what makes
	// the re-executed binary a child, and of which kind. Required unless
	// Command is set.
	Env string
	// Command, if set, is the program to run and its arguments, in place
	// of this binary re-executed (a Node script: package
	// internal/nodeinterop); it keeps the rest of the contract: it
	// reports on its standard output and exits when its standard input
	// ends.
	Command []string
	// Dir is the child's working directory; empty: this process's.
	Dir string
	// OnLine is called with each line the child writes on its standard
	// output, in order, on one goroutine of its own, until the output
	// ends; nil discards them. A slow OnLine holds the child up once the
	// pipe's buffer is full.
	OnLine func(line string)
	// Stderr, if set, gets all the child writes on its standard error as
	// well (Proc.Stderr keeps only its end): hostile reads a crash's
	// message from the start of a goroutine dump that may run to
	// megabytes.
	Stderr io.Writer
}

// maxStderr is how much of the end of a child's standard error a Proc
// keeps for error messages.
const maxStderr = 4096

// Proc is a running child process.
type Proc struct {
	cmd    *exec.Cmd
	exe    string
	stdin  io.WriteCloser
	stderr *tailBuffer
	exited chan struct{} // closed once the process has exited and been reaped

	mu       sync.Mutex // serialises writes to stdin
	stdinErr error
}

// Start starts a child as cfg says. It returns once the process runs; what
// the child reports comes to cfg.OnLine.
func Start(cfg Config) (*Proc, error) {
	var (
		cmd *exec.Cmd
		exe string
		err error
	)
	switch {
	case len(cfg.Command) > 0:
		exe = cfg.Command[0]
		cmd = exec.Command(exe, cfg.Command[1:]...)
		cmd.Env = os.Environ()
		if cfg.Env != "" {
			cmd.Env = append(cmd.Env, cfg.Env)
		}
	case cfg.Env == "":
		return nil, errors.New("childproc: Config.Env is empty; give the NAME=VALUE that makes the binary a child")
	default:
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("childproc: find this binary to re-execute as a child: %w", err)
		}
		cmd = exec.Command(exe, "-test.run=^$")
		// A binary built with -race sleeps a second on exit by default
		// (atexit_sleep_ms): a child asked to leave should be gone at once.
		cmd.Env = append(os.Environ(), cfg.Env, "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	}
	cmd.Dir = cfg.Dir
	DieWithParent(cmd)
	p := &Proc{cmd: cmd, exe: exe, stderr: &tailBuffer{max: maxStderr}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	if cfg.Stderr != nil {
		cmd.Stderr = io.MultiWriter(cfg.Stderr, p.stderr)
	}
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("childproc: child stdin: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		p.stdin.Close()
		return nil, fmt.Errorf("childproc: child stdout: %w", err)
	}
	if err := cmd.Start(); err != nil {
		p.stdin.Close()
		stdout.Close()
		return nil, fmt.Errorf("childproc: start a child (%s): %w", exe, err)
	}
	go func() {
		defer close(p.exited)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if cfg.OnLine != nil {
				cfg.OnLine(sc.Text())
			}
		}
		io.Copy(io.Discard, stdout) // stdout must be read to its end before Wait
		cmd.Wait()
	}()
	return p, nil
}

// DieWithParent arranges for cmd's process, once started, to be killed
// when this process dies (on Linux; elsewhere it does nothing), for the
// other processes a benchmark starts (an etcd server).
func DieWithParent(cmd *exec.Cmd) { cmd.SysProcAttr = procAttr() }

// Executable is the binary the child runs, for error messages.
func (p *Proc) Executable() string { return p.exe }

// Pid is the child's process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Process is the child's os.Process, to signal it.
func (p *Proc) Process() *os.Process { return p.cmd.Process }

// Exited is closed once the child has exited (and its output has all gone
// to OnLine).
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// ProcessState is the child's exit status and resource usage once it has
// exited; nil before.
func (p *Proc) ProcessState() *os.ProcessState {
	select {
	case <-p.exited:
		return p.cmd.ProcessState
	default:
		return nil
	}
}

// Stderr returns the end of what the child wrote on its standard error.
func (p *Proc) Stderr() string { return p.stderr.String() }

// Send writes line and a newline on the child's standard input.
func (p *Proc) Send(line string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stdinErr != nil {
		return p.stdinErr
	}
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		return fmt.Errorf("childproc: write to the child (pid %d): %w", p.Pid(), err)
	}
	return nil
}

// Wait waits at most limit for the child to exit, and reports whether it
// did.
func (p *Proc) Wait(limit time.Duration) bool {
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

// CloseStdin closes the child's standard input, which asks it to exit,
// and returns at once.
func (p *Proc) CloseStdin() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stdinErr == nil {
		p.stdin.Close()
		p.stdinErr = errors.New("childproc: the child's stdin is closed")
	}
}

// Close closes the child's standard input (a child exits when it ends)
// and waits at most limit for it to exit; then it kills it (SIGKILL) and
// waits as long again. It returns an error only if the child outlived
// SIGKILL. Calling it again waits again.
func (p *Proc) Close(limit time.Duration) error {
	p.CloseStdin()
	if p.Wait(limit) {
		return nil
	}
	p.cmd.Process.Kill()
	if p.Wait(limit) {
		return nil
	}
	return fmt.Errorf("childproc: the child (pid %d) did not exit within %v of SIGKILL", p.Pid(), limit)
}

// tailBuffer keeps the last max bytes written to it, for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, b...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(b), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
