package deploy

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-rpc/sluice/tools/internal/childproc"
)

// Bounds on the waits for an instance.
const (
	// startLimit bounds the wait for a new instance to listen.
	startLimit = 15 * time.Second
	// exitLimit bounds the wait for an instance to exit once it said it
	// is done, or once its stdin closed, and again once killed.
	exitLimit = 5 * time.Second
)

// instance is a fleet server, a child process, seen from the parent: the
// times it reported (on its clock, the same machine's) and a channel
// closed at each milestone.
type instance struct {
	proc *childproc.Proc

	listening, registered, done chan struct{}

	mu           sync.Mutex
	addr         string
	listenAt     time.Time
	registeredAt time.Time
	firstAt      time.Time
	doneAt       time.Time
	handled      int64
	doneErr      string
	errs, other  []string
}

// startInstance starts a child serving j. It returns at once; the
// instance's channels say when it listens and registers.
func startInstance(j job) (*instance, error) {
	spec, err := json.Marshal(j)
	if err != nil {
		return nil, err
	}
	in := &instance{listening: make(chan struct{}), registered: make(chan struct{}), done: make(chan struct{})}
	p, err := childproc.Start(childproc.Config{Env: ChildEnv + "=" + string(spec), OnLine: in.onLine})
	if err != nil {
		return nil, fmt.Errorf("deploy: %w", err)
	}
	in.proc = p
	return in, nil
}

// onLine records one line of the child's output.
func (in *instance) onLine(l string) {
	f := strings.Fields(l)
	in.mu.Lock()
	defer in.mu.Unlock()
	at := func(i int) time.Time {
		if i >= len(f) {
			return time.Time{}
		}
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return time.Time{}
		}
		return time.Unix(0, n)
	}
	switch {
	case len(f) >= 3 && f[0] == lineListening && in.addr == "":
		in.addr, in.listenAt = f[1], at(2)
		close(in.listening)
	case len(f) >= 2 && f[0] == lineRegistered && in.registeredAt.IsZero():
		in.registeredAt = at(1)
		close(in.registered)
	case len(f) >= 2 && f[0] == lineFirst:
		in.firstAt = at(1)
	case len(f) >= 3 && f[0] == lineDone && in.doneAt.IsZero():
		in.doneAt = at(1)
		in.handled, _ = strconv.ParseInt(f[2], 10, 64)
		in.doneErr = strings.Join(f[3:], " ")
		close(in.done)
	case len(f) >= 1 && f[0] == lineError:
		in.errs = append(in.errs, strings.TrimPrefix(l, lineError+" "))
	default:
		if len(in.other) < 10 {
			in.other = append(in.other, l)
		}
	}
}

// Addr returns the host:port the instance listens on ("" before it does).
func (in *instance) Addr() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.addr
}

// times returns when the instance listened, registered and took its first
// request (zero: not yet).
func (in *instance) times() (listen, registered, first time.Time) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.listenAt, in.registeredAt, in.firstAt
}

// problem describes why the child failed or what it said besides events,
// for an error message.
func (in *instance) problem() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	var b strings.Builder
	if len(in.errs) > 0 {
		fmt.Fprintf(&b, "it said: %s; ", strings.Join(in.errs, "; "))
	}
	if len(in.other) > 0 {
		fmt.Fprintf(&b, "stdout %q; ", in.other)
	}
	fmt.Fprintf(&b, "stderr %q", in.proc.Stderr())
	return b.String()
}

// wait waits at most limit for milestone (one of the instance's channels)
// and fails, naming what, if the child exits or the limit passes first.
func (in *instance) wait(milestone <-chan struct{}, what string, limit time.Duration) error {
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-milestone:
		return nil
	case <-in.proc.Exited():
		select {
		case <-milestone: // its last words
			return nil
		default:
		}
		hint := ""
		if what == "listen" {
			hint = " (does the binary call deploy.ServeChildIfAsked first thing in main, or TestMain?)"
		}
		return fmt.Errorf("deploy: the server %s exited before it could %s%s: %s", in.name(), what, hint, in.problem())
	case <-t.C:
		return fmt.Errorf("deploy: the server %s did not %s within %v: %s", in.name(), what, limit, in.problem())
	}
}

// name names the instance in messages: its address, or its process id
// before it listens.
func (in *instance) name() string {
	if a := in.Addr(); a != "" {
		return a
	}
	return fmt.Sprintf("(pid %d)", in.proc.Pid())
}

// leave asks the instance to leave with cmd (cmdShutdown or cmdClose) and
// waits at most limit for it to say it is done, then for it to exit. It
// returns the error the child's Shutdown returned, if any.
func (in *instance) leave(cmd string, limit time.Duration) error {
	if err := in.proc.Send(cmd); err != nil {
		return err
	}
	if err := in.wait(in.done, "leave ("+cmd+")", limit); err != nil {
		in.proc.Close(exitLimit)
		return err
	}
	if err := in.proc.Close(exitLimit); err != nil {
		return err
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.doneErr != "" {
		return fmt.Errorf("deploy: the server %s: %s: %s", in.addr, cmd, in.doneErr)
	}
	return nil
}

// stop ends the instance, whatever its state: its stdin closes (it
// closes), and it is killed if it has not exited within exitLimit.
func (in *instance) stop() error { return in.proc.Close(exitLimit) }
