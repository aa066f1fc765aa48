package hostile

import (
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
)

// serverStartLimit bounds the wait for a server to report its address.
const serverStartLimit = 20 * time.Second

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

// flags returns the limits as flags, in a fixed order.
func (l Limits) flags() [][2]string {
	var out [][2]string
	if l.MaxConns > 0 {
		out = append(out, [2]string{"max-conns", fmt.Sprint(l.MaxConns)})
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"idle-timeout", l.IdleTimeout}, {"handshake-timeout", l.HandshakeTimeout}, {"stall-timeout", l.StallTimeout}, {"write-timeout", l.WriteTimeout}} {
		if d.v > 0 {
			out = append(out, [2]string{d.name, d.v.String()})
		}
	}
	if l.MaxUnfinished > 0 {
		out = append(out, [2]string{"max-unfinished", fmt.Sprint(l.MaxUnfinished)})
	}
	if l.MaxUnfinishedPerConn > 0 {
		out = append(out, [2]string{"max-unfinished-per-conn", fmt.Sprint(l.MaxUnfinishedPerConn)})
	}
	if l.MaxClients > 0 {
		out = append(out, [2]string{"max-clients", fmt.Sprint(l.MaxClients)})
	}
	return out
}

// serverSpec is how to start a server under attack.
type serverSpec struct {
	bin     string
	doorman bool
	config  string // doorman: the configuration file
	limits  Limits
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
)

// helpCache holds each binary's command help, read once.
var helpCache sync.Map // "bin doorman?" -> string

// commandHelp returns the help of the server command of spec's binary.
func commandHelp(spec *serverSpec) (string, error) {
	key := fmt.Sprintf("%s %v", spec.bin, spec.doorman)
	if h, ok := helpCache.Load(key); ok {
		return h.(string), nil
	}
	args := []string{"serve", "-h"}
	if spec.doorman {
		args = []string{"doorman", "serve", "-h"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, spec.bin, args...)
	cmd.Env = append(os.Environ(), ChildEnv+"=")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hostile: %s %s: %v", spec.bin, strings.Join(args, " "), err)
	}
	helpCache.Store(key, string(out))
	return string(out), nil
}

// startServer starts a server under attack and waits for its address and
// debug endpoint.
func startServer(spec *serverSpec) (*Target, error) {
	help, err := commandHelp(spec)
	if err != nil {
		return nil, err
	}
	args := []string{"serve"}
	if spec.doorman {
		args = []string{"doorman", "serve", "--config", spec.config}
	}
	args = append(args, "--listen", "127.0.0.1:0", "--debug-listen", "127.0.0.1:0")
	t := &Target{spec: spec}
	for _, f := range spec.limits.flags() {
		if f[0] == "max-clients" && !spec.doorman {
			continue
		}
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
	timer := time.NewTimer(serverStartLimit)
	defer timer.Stop()
	for t.Addr == "" {
		select {
		case l, ok := <-p.lines:
			if !ok {
				p.Wait(procExitLimit)
				return nil, fmt.Errorf("hostile: the server (%s %s) exited before saying where it listens: %s; stderr %q",
					spec.bin, strings.Join(args, " "), p.crash(), p.stderr.last())
			}
			if m := servingLine.FindStringSubmatch(l); m != nil {
				t.Addr = m[1]
			}
		case <-timer.C:
			p.stop()
			return nil, fmt.Errorf("hostile: the server (%s %s) did not say where it listens within %v; stderr %q",
				spec.bin, strings.Join(args, " "), serverStartLimit, p.stderr.last())
		}
	}
	go func() {
		for range p.lines { // a server may print more; nobody reads it
		}
	}()
	// The debug line is on stderr, written before the address on stdout
	// but read by another goroutine.
	for deadline := time.Now().Add(5 * time.Second); t.DebugURL == "" && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if m := debugLine.FindStringSubmatch(p.stderr.head()); m != nil {
			t.DebugURL = m[1]
		}
	}
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
	if !t.Alive() {
		return true
	}
	if t.p != nil {
		return t.p.Wait(limit)
	}
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
	if t.Alive() {
		return ""
	}
	if t.p == nil {
		return "died"
	}
	return t.p.crash()
}

// restart starts a new server in place of a dead one the runner started.
func (t *Target) restart() error {
	if t.spec == nil {
		return errors.New("hostile: an external server cannot be restarted")
	}
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
