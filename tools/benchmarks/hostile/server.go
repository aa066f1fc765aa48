package hostile

import (
	"bytes"
	"context"
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

// serverStartLimit bounds the wait for a server to report its address;
// procExitLimit the wait for a child to exit once asked (its stdin closed
// and SIGTERM), and again once killed.
const serverStartLimit, procExitLimit = 20 * time.Second, 10 * time.Second

// Limits are the limits a server under attack is started with, as flags of
// `sluice serve` (and of `sluice doorman serve`, where it has them). A zero
// field leaves the server's default. A server binary whose help does not
// list a flag is started without it, and the result says so.
type Limits struct {
	MaxConns         int           // --max-conns
	IdleTimeout      time.Duration // --idle-timeout
	HandshakeTimeout time.Duration // --handshake-timeout
	StallTimeout     time.Duration // --stall-timeout
	WriteTimeout     time.Duration // --write-timeout
	// MaxUnfinished and MaxUnfinishedPerConn are --max-unfinished and
	// --max-unfinished-per-conn: bytes of requests still arriving.
	MaxUnfinished, MaxUnfinishedPerConn int64
	// MaxClients is `sluice doorman serve --max-clients`: the most
	// distinct clients holding leases.
	MaxClients int
}

// CILimits are the limits of CI-size runs: low enough that 200 stalled
// connections, a handful of unfinished requests, unread replies and 3,000
// Doorman clients meet them within the attack's few seconds.
func CILimits() Limits {
	return Limits{MaxConns: 100, IdleTimeout: time.Second, HandshakeTimeout: time.Second,
		StallTimeout: time.Second, WriteTimeout: time.Second, MaxClients: 1000}
}

// flags returns the limits set as flag names and values, in a fixed order.
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
	// Addr is the server's host:port, on 127.0.0.1.
	Addr string
	// PID is its process id, for its memory and its liveness.
	PID int
	// DebugURL is its debug listener (http://host:port, serving
	// /debug/pprof/), for its goroutines; "" if it has none.
	DebugURL string
	// Flags are the limit flags it was started with; Missing those its
	// binary lacks.
	Flags, Missing []string

	spec *serverSpec // nil for an external server
	p    *proc
}

// External returns a Target for a server the runner did not start. addr
// must be on 127.0.0.1: only that is ever attacked.
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
	servingLine = regexp.MustCompile(`^(?:serving \S+|doorman serving \d+ templates) on (\S+)`)
	debugLine   = regexp.MustCompile(`debug endpoints on (http://\S+)`)
	// framePattern matches a stack frame's file line: "\t/path/file.go:123 +0x1f".
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

// startServer starts a server under attack, under the children's
// descriptor limit, and waits for its address and debug endpoint.
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
	p, err := startChild(job{Kind: "exec", Bin: spec.bin, Args: args})
	if err != nil {
		return nil, err
	}
	failed := func(why string) (*Target, error) {
		p.stop()
		return nil, fmt.Errorf("hostile: the server (%s %s) %s; stderr %q", spec.bin, strings.Join(args, " "), why, p.last())
	}
	timer := time.NewTimer(serverStartLimit)
	defer timer.Stop()
	for t.Addr == "" {
		select {
		case l, ok := <-p.lines:
			if !ok {
				p.Wait(procExitLimit)
				return failed("exited before saying where it listens: " + p.crash())
			}
			if m := servingLine.FindStringSubmatch(l); m != nil {
				t.Addr = m[1]
			}
		case <-timer.C:
			return failed(fmt.Sprintf("did not say where it listens within %v", serverStartLimit))
		}
	}
	go func() {
		for range p.lines { // a server may print more; nobody reads it
		}
	}()
	// The debug line is on stderr, written before the address on stdout
	// but read by another goroutine.
	wait := time.NewTimer(5 * time.Second)
	select {
	case <-p.stderr.debugSeen():
	case <-p.Exited():
		wait.Stop()
		return failed("exited right after saying where it listens: " + p.crash())
	case <-wait.C:
	}
	wait.Stop()
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
		return !t.p.dead()
	}
	err := syscall.Kill(t.PID, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// waitDead waits at most limit for the server to die, polling: a frame
// that crashes it does so at once.
func (t *Target) waitDead(limit time.Duration) bool {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if !t.Alive() {
			return true
		}
	}
	return !t.Alive()
}

// Crash describes how the server died: a Go panic's message and where it
// happened, or its exit status. It is "" while it runs, and "died" for an
// external server, whose output is not seen.
func (t *Target) Crash() string {
	switch {
	case t.Alive():
		return ""
	case t.p == nil:
		return "died"
	}
	return t.p.crash()
}

// restart starts a new server in place of a dead one the runner started.
func (t *Target) restart() error {
	t.Close()
	n, err := startServer(t.spec)
	if err != nil {
		return err
	}
	*t = *n
	return nil
}

// Close stops a server the runner started (an external one is left
// alone).
func (t *Target) Close() error {
	if t.p == nil {
		return nil
	}
	return t.p.stop()
}

// proc is a child process: its stdout lines go to lines, its stderr to a
// stderrWatch.
type proc struct {
	*childproc.Proc
	lines  chan string // stdout, closed once the process has exited
	stderr *stderrWatch
}

// startProc starts a child as cfg says (but for OnLine and Stderr); the
// caller must drain p.lines, or the child blocks writing.
func startProc(cfg childproc.Config) (*proc, error) {
	p := &proc{lines: make(chan string, 1024), stderr: &stderrWatch{}}
	cfg.OnLine = func(l string) { p.lines <- l }
	cfg.Stderr = p.stderr
	var err error
	if p.Proc, err = childproc.Start(cfg); err != nil {
		return nil, err
	}
	go func() {
		<-p.Exited() // OnLine has had every line
		close(p.lines)
	}()
	return p, nil
}

// dead reports whether the process has exited.
func (p *proc) dead() bool {
	select {
	case <-p.Exited():
		return true
	default:
		return false
	}
}

// stop asks the process to end (SIGTERM, and its stdin closed), and kills
// it if it has not within procExitLimit; an error is a child that outlived
// SIGKILL.
func (p *proc) stop() error {
	if !p.dead() {
		p.Process().Signal(syscall.SIGTERM) // a server does not read its stdin
	}
	return p.Close(procExitLimit)
}

// crash describes how the process died: the Go panic or fatal error
// ("index out of range [4] with length 4 at checksum.go:45"), or else its
// exit status.
func (p *proc) crash() string {
	if !p.dead() {
		return ""
	}
	if c := p.stderr.crash(); c != "" {
		return c
	}
	if st := p.ProcessState(); st != nil {
		return st.String()
	}
	return "exited"
}

// last is the last line the process wrote on its standard error.
func (p *proc) last() string { return p.stderr.last() }

// maxStderrLine bounds what stderrWatch keeps of a line: the last 4 KiB,
// as much as an error message or a note quotes.
const maxStderrLine = 4096

// stderrWatch reads a child's standard error line by line as it comes,
// keeping what the runner wants of it: a server's debug listener URL, the
// Go panic or fatal error it died of and the first stack frame outside
// the runtime (a crash's goroutine dump may run to megabytes), and the
// last line.
type stderrWatch struct {
	mu                          sync.Mutex
	partial                     []byte
	debugURL, msg, at, lastLine string
	seen                        chan struct{} // closed once debugURL is set; made by debugSeen
}

func (w *stderrWatch) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, b...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			// A line without end keeps only its tail: a child cannot
			// make the runner hold its stderr without bound.
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

func (w *stderrWatch) get(f func() string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return f()
}

func (w *stderrWatch) debug() string { return w.get(func() string { return w.debugURL }) }

// debugSeen returns a channel closed once the child has said its debug
// listener's URL.
func (w *stderrWatch) debugSeen() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen == nil {
		w.seen = make(chan struct{})
		if w.debugURL != "" {
			close(w.seen)
		}
	}
	return w.seen
}

func (w *stderrWatch) last() string {
	return w.get(func() string {
		if s := strings.TrimSpace(string(w.partial)); s != "" {
			return s
		}
		return w.lastLine
	})
}

// crash is the panic the child died of, "" if none.
func (w *stderrWatch) crash() string {
	return w.get(func() string {
		if w.at == "" {
			return w.msg
		}
		return w.msg + " at " + w.at
	})
}

// errNoChildHook is the error of a child that ran the test or program
// instead of its job.
var errNoChildHook = errors.New("the child exited before reporting: does the binary call hostile.RunChildIfAsked first thing in main (or TestMain)?")
