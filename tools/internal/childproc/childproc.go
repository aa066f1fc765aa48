// Package childproc runs a benchmark's helper processes: this binary
// re-executed with an environment variable saying what to be, or another
// program (Config.Command). A child reports one line per event on its
// stdout and exits when its stdin ends; the parent ends it by closing its
// stdin, then with SIGKILL after a bound. On Linux the kernel also kills a
// child whose parent died.
//
// A binary that starts children lets them take over first thing (main,
// or TestMain): the packages have a ServeChildIfAsked for that. Children
// get -test.run=^$, so a test binary without the hook exits at once.
package childproc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Config says how to start a child.
type Config struct {
	// Env (NAME=VALUE) is added to the child's environment: what makes
	// the re-executed binary a child. Required unless Command is set.
	Env string
	// Command, if set, is the program and arguments to run instead of
	// this binary (a Node script); it keeps the same contract.
	Command []string
	// OnLine gets each line of the child's stdout, in order, on one
	// goroutine; nil discards them. A slow OnLine holds the child up.
	OnLine func(line string)
	// Stderr, if set, gets all of the child's stderr as well (Proc.Stderr
	// keeps only its end).
	Stderr io.Writer
}

// maxStderr is how much of the end of a child's stderr a Proc keeps.
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

// Start starts a child as cfg says and returns once it runs.
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
		// A -race binary sleeps a second on exit by default.
		cmd.Env = append(os.Environ(), cfg.Env, "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	}
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
	if err := cmd.Start(); err != nil { // which closes both pipes
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

// DieWithParent has cmd's process killed when this process dies (on
// Linux; elsewhere it does nothing).
func DieWithParent(cmd *exec.Cmd) { cmd.SysProcAttr = procAttr() }

// Executable is the binary the child runs, for error messages.
func (p *Proc) Executable() string { return p.exe }

// Pid is the child's process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Process is the child's os.Process, to signal it.
func (p *Proc) Process() *os.Process { return p.cmd.Process }

// Exited is closed once the child has exited and OnLine had its output.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// ProcessState is the child's exit status once it has exited; nil before.
func (p *Proc) ProcessState() *os.ProcessState {
	select {
	case <-p.exited:
		return p.cmd.ProcessState
	default:
		return nil
	}
}

// Stderr returns the end of what the child wrote on its stderr.
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

// Wait waits at most limit for the child to exit and reports whether it
// did.
func (p *Proc) Wait(limit time.Duration) bool {
	select {
	case <-p.exited:
		return true
	case <-time.After(limit):
		return false
	}
}

// CloseStdin closes the child's stdin, asking it to exit.
func (p *Proc) CloseStdin() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stdinErr == nil {
		p.stdin.Close()
		p.stdinErr = errors.New("childproc: the child's stdin is closed")
	}
}

// Close closes the child's stdin and waits at most limit for it to exit,
// then kills it and waits as long again; it fails only if the child
// outlived SIGKILL.
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

// tailBuffer keeps the last max bytes written to it.
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

// Memory returns a process's resident memory now (VmRSS) and at its
// peak (VmHWM), in bytes, from /proc (Linux).
func Memory(pid int) (rss, hwm int64, err error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for l := range strings.Lines(string(status)) {
		name, value, _ := strings.Cut(l, ":")
		var field *int64
		switch name {
		case "VmRSS":
			field = &rss
		case "VmHWM":
			field = &hwm
		default:
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/status: %s: %v", pid, name, err)
		}
		*field = kb << 10
	}
	if rss == 0 {
		return 0, 0, errors.New("no VmRSS in its /proc status")
	}
	return rss, hwm, nil
}
