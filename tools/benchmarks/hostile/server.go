package hostile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-rpc/sluice/tools/internal/childproc"
)

// serverStartLimit bounds the wait for a server's address; procExitLimit
// a child's exit once asked, and again once killed.
const serverStartLimit, procExitLimit = 20 * time.Second, 10 * time.Second

// Limits are the limit flags a server under attack is started with, each
// field the flag of its name (--max-conns, ...): of `sluice serve`, and
// `sluice doorman serve` where it has them (MaxClients is Doorman's
// only). A zero field leaves the server's default; a flag the binary's
// help does not list is left out, and the result says so.
type Limits struct {
	MaxConns                                                  int
	IdleTimeout, HandshakeTimeout, StallTimeout, WriteTimeout time.Duration
	MaxUnfinished, MaxUnfinishedPerConn                       int64 // bytes
	MaxClients                                                int
}

// CILimits are the limits of CI-size runs: low enough for the small
// attacks to meet them within a few seconds.
func CILimits() Limits {
	return Limits{MaxConns: 100, IdleTimeout: time.Second, HandshakeTimeout: time.Second,
		StallTimeout: time.Second, WriteTimeout: time.Second, MaxClients: 1000}
}

// flags returns the limits set as flag names and values.
func (l *Limits) flags(doorman bool) [][2]string {
	if l == nil {
		return nil
	}
	var out [][2]string
	add := func(name string, set bool, v any) {
		if set {
			out = append(out, [2]string{name, fmt.Sprint(v)})
		}
	}
	add("max-conns", l.MaxConns > 0, l.MaxConns)
	add("idle-timeout", l.IdleTimeout > 0, l.IdleTimeout)
	add("handshake-timeout", l.HandshakeTimeout > 0, l.HandshakeTimeout)
	add("stall-timeout", l.StallTimeout > 0, l.StallTimeout)
	add("write-timeout", l.WriteTimeout > 0, l.WriteTimeout)
	add("max-unfinished", l.MaxUnfinished > 0, l.MaxUnfinished)
	add("max-unfinished-per-conn", l.MaxUnfinishedPerConn > 0, l.MaxUnfinishedPerConn)
	add("max-clients", doorman && l.MaxClients > 0, l.MaxClients)
	return out
}

// serverSpec is how to start a server under attack.
type serverSpec struct {
	bin     string
	doorman bool
	config  string // doorman: the configuration file
	limits  *Limits
}

// Target is the server under attack: a child process the runner started
// (and restarts after a crash), or an external server.
type Target struct {
	Addr string // host:port, on 127.0.0.1
	PID  int    // for its memory and liveness
	// DebugURL is its debug listener, http://host:port, for its
	// goroutines; "" if it has none.
	DebugURL string
	// Flags are the limit flags it was started with; Missing those its
	// binary lacks.
	Flags, Missing []string

	spec *serverSpec // nil for an external server
	p    *proc
}

// External returns a Target for a server the runner did not start, on
// 127.0.0.1: only that is ever attacked.
func External(addr string, pid int, debugURL string) (*Target, error) {
	if err := checkTarget(addr); err != nil {
		return nil, err
	}
	if pid <= 0 {
		return nil, fmt.Errorf("hostile: the server's pid is %d; its memory and liveness need it", pid)
	}
	t := &Target{Addr: addr, PID: pid, DebugURL: strings.TrimSuffix(debugURL, "/")}
	if !t.Alive() {
		return nil, fmt.Errorf("hostile: no process %d", pid)
	}
	return t, nil
}

// checkTarget refuses any address but 127.0.0.1:PORT.
func checkTarget(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("hostile: target %q: %v", addr, err)
	}
	if host != "127.0.0.1" || port == "" || port == "0" {
		return fmt.Errorf("hostile: target %q: only 127.0.0.1:PORT may be attacked", addr)
	}
	return nil
}

var (
	servingLine  = regexp.MustCompile(`^(?:serving \S+|doorman serving \d+ templates) on (\S+)`)
	debugLine    = regexp.MustCompile(`debug endpoints on (http://\S+)`)
	framePattern = regexp.MustCompile(`^\t(\S+\.go):(\d+)`)
	helpCache    sync.Map // "bin doorman?" -> its server command's help
)

// commandHelp returns the help of the server command of spec's binary.
func commandHelp(spec *serverSpec, args []string) (string, error) {
	key := fmt.Sprintf("%s %v", spec.bin, spec.doorman)
	if h, ok := helpCache.Load(key); ok {
		return h.(string), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, spec.bin, append(args, "-h")...)
	cmd.Env = append(os.Environ(), ChildEnv+"=")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hostile: %s %s -h: %v", spec.bin, strings.Join(args, " "), err)
	}
	helpCache.Store(key, string(out))
	return string(out), nil
}

// startServer starts a server under the children's descriptor limit and
// waits for its address and debug endpoint.
func startServer(spec *serverSpec) (*Target, error) {
	cmdArgs := []string{"serve"}
	if spec.doorman {
		cmdArgs = []string{"doorman", "serve"}
	}
	help, err := commandHelp(spec, cmdArgs)
	if err != nil {
		return nil, err
	}
	args := append(cmdArgs, "--listen", "127.0.0.1:0", "--debug-listen", "127.0.0.1:0")
	if spec.doorman {
		args = append(args, "--config", spec.config)
	}
	t := &Target{spec: spec}
	for _, f := range spec.limits.flags(spec.doorman) {
		if !regexp.MustCompile(`--` + f[0] + `[ \n]`).MatchString(help) {
			t.Missing = append(t.Missing, "--"+f[0])
			continue
		}
		args = append(args, "--"+f[0], f[1])
		t.Flags = append(t.Flags, "--"+f[0]+" "+f[1])
	}
	addr, said := make(chan string, 1), false
	p, err := startChild(job{Kind: "exec", Bin: spec.bin, Args: args}, func(l string) {
		if m := servingLine.FindStringSubmatch(l); m != nil && !said {
			said = true
			addr <- m[1]
		}
	})
	if err != nil {
		return nil, err
	}
	failed := func(why string) (*Target, error) {
		p.stop()
		return nil, fmt.Errorf("hostile: the server (%s %s) %s; stderr %q", spec.bin, strings.Join(args, " "), why, p.stderr.last())
	}
	select {
	case t.Addr = <-addr:
	case <-p.Exited():
		if len(addr) == 0 {
			return failed("exited before saying where it listens: " + p.crash())
		}
		t.Addr = <-addr
	case <-time.After(serverStartLimit):
		return failed(fmt.Sprintf("did not say where it listens within %v", serverStartLimit))
	}
	// The debug line, on stderr, came first but is read by another goroutine.
	select {
	case <-p.stderr.seen:
	case <-p.Exited():
		return failed("exited right after saying where it listens: " + p.crash())
	case <-time.After(5 * time.Second):
	}
	t.DebugURL = p.stderr.debug()
	t.PID, t.p = p.Pid(), p
	if err := checkTarget(t.Addr); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// Alive reports whether the server process is running.
func (t *Target) Alive() bool {
	if t.p != nil {
		return !isClosed(t.p.Exited())
	}
	err := syscall.Kill(t.PID, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func (t *Target) waitDead(limit time.Duration) bool {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if !t.Alive() {
			return true
		}
	}
	return !t.Alive()
}

// Crash describes how the server died: a Go panic's message and where, or
// its exit status; "" while it runs, "died" for an external server.
func (t *Target) Crash() string {
	switch {
	case t.Alive():
		return ""
	case t.p == nil:
		return "died"
	}
	return t.p.crash()
}

func (t *Target) restart() error {
	t.Close()
	n, err := startServer(t.spec)
	if err != nil {
		return err
	}
	*t = *n
	return nil
}

// Close stops a server the runner started (not an external one).
func (t *Target) Close() error {
	if t.p == nil {
		return nil
	}
	return t.p.stop()
}

// proc is a child process: this binary doing a job.
type proc struct {
	*childproc.Proc
	stderr *stderrWatch
}

// startChild starts this binary as a child doing j; onLine gets its
// stdout's lines.
func startChild(j job, onLine func(string)) (*proc, error) {
	b, err := json.Marshal(j)
	if err != nil {
		return nil, err
	}
	p := &proc{stderr: &stderrWatch{seen: make(chan struct{})}}
	if p.Proc, err = childproc.Start(childproc.Config{Env: ChildEnv + "=" + string(b), OnLine: onLine, Stderr: p.stderr}); err != nil {
		return nil, err
	}
	return p, nil
}

// stop sends SIGTERM (a server does not read its stdin) and closes stdin,
// killing the process after procExitLimit; an error is a child that
// outlived SIGKILL.
func (p *proc) stop() error {
	if !isClosed(p.Exited()) {
		p.Process().Signal(syscall.SIGTERM)
	}
	return p.Close(procExitLimit)
}

// crash describes how the exited process died: its Go panic, or exit
// status.
func (p *proc) crash() string {
	if c := p.stderr.crash(); c != "" {
		return c
	}
	if st := p.ProcessState(); st != nil {
		return st.String()
	}
	return "exited"
}

// maxStderrLine bounds what stderrWatch keeps of a line.
const maxStderrLine = 4096

// stderrWatch reads a child's stderr as it comes, keeping a server's
// debug URL, the Go panic it died of and the first stack frame outside
// the runtime (a goroutine dump may run to megabytes), and the last line.
type stderrWatch struct {
	mu                          sync.Mutex
	partial                     []byte
	debugURL, msg, at, lastLine string
	seen                        chan struct{} // if not nil, closed once debugURL is set
}

func (w *stderrWatch) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, b...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			// An unended line keeps only its tail.
			if n := len(w.partial); n > maxStderrLine {
				w.partial = append(w.partial[:0], w.partial[n-maxStderrLine:]...)
			}
			return len(b), nil
		}
		w.line(string(w.partial[:i]))
		w.partial = w.partial[i+1:]
	}
}

func (w *stderrWatch) line(l string) {
	if s := strings.TrimSpace(l); s != "" {
		w.lastLine = s[max(0, len(s)-maxStderrLine):]
	}
	if m := debugLine.FindStringSubmatch(l); m != nil && w.debugURL == "" {
		w.debugURL = m[1]
		if w.seen != nil {
			close(w.seen)
		}
	}
	switch {
	case w.msg == "":
		if strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") {
			w.msg = strings.TrimSpace(l)
		}
	case w.at == "":
		if m := framePattern.FindStringSubmatch(l); m != nil && !strings.Contains(m[1], "/src/runtime/") {
			w.at = m[1][strings.LastIndexByte(m[1], '/')+1:] + ":" + m[2]
		}
	}
}

func (w *stderrWatch) debug() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.debugURL
}

func (w *stderrWatch) last() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := strings.TrimSpace(string(w.partial)); s != "" {
		return s
	}
	return w.lastLine
}

// crash is the panic the child died of, "" if none.
func (w *stderrWatch) crash() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.at == "" {
		return w.msg
	}
	return w.msg + " at " + w.at
}

// errNoChildHook is a child that ran the program instead of its job.
var errNoChildHook = errors.New("the child exited before reporting: does the binary call hostile.RunChildIfAsked first thing in main (or TestMain)?")
