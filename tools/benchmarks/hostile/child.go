package hostile

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// ChildEnv is the environment variable, set to a job in JSON, that makes
// RunChildIfAsked turn a child the runner started into an attacker.
const ChildEnv = "SLUICE_HOSTILE_CHILD"

const (
	// childNofile is every child's descriptor limit: the hard limit of the
	// machine the attacks were written for.
	childNofile = 20_000
	perChild    = 10_000 // the most connections one attacker child holds
)

// job is what an attacker child does: Kind picks the attack, which reads
// its own parameters.
type job struct {
	Kind   string `json:"kind"`
	Target string `json:"target,omitempty"`
	Source string `json:"source,omitempty"` // local address to bind

	Bin  string   `json:"bin,omitempty"`
	Args []string `json:"args,omitempty"` // exec: run Bin with Args

	Conns     int           `json:"conns,omitempty"`
	Handshake bool          `json:"handshake,omitempty"`
	Count     int           `json:"count,omitempty"` // requests, calls, ids
	Size      int           `json:"size,omitempty"`  // bytes of each
	Over      time.Duration `json:"over,omitempty"`  // pace: spread over this long
	TTL       time.Duration `json:"ttl,omitempty"`
	For       time.Duration `json:"for,omitempty"`
	Workers   int           `json:"workers,omitempty"`
	Rate      float64       `json:"rate,omitempty"`
	Deadline  time.Duration `json:"deadline,omitempty"`
}

// event is a line an attacker child writes on its standard output.
type event struct {
	Ev string `json:"ev"`           // ready, closed, done or error
	At int64  `json:"at,omitempty"` // when, in Unix nanoseconds
	// Connections made, not made, and closed by the server.
	Opened int              `json:"opened,omitempty"`
	Failed int              `json:"failed,omitempty"`
	Closed int              `json:"closed,omitempty"`
	Sent   int64            `json:"sent,omitempty"` // requests, calls, connects, ids
	Bytes  int64            `json:"bytes,omitempty"`
	Got    map[string]int64 `json:"got,omitempty"`  // what the server sent back, by kind ("error BUSY", ...)
	Note   string           `json:"note,omitempty"` // a remark for the result
	Err    string           `json:"err,omitempty"`  // the error that ended the job
	Load   *Load            `json:"load,omitempty"` // soak's
}

// RunChildIfAsked makes this process an attacker child (or a server's
// launcher) when the environment variable ChildEnv holds a job, and then
// never returns; otherwise it returns at once. Any binary that runs
// attacks must call it first thing.
func RunChildIfAsked() {
	spec := os.Getenv(ChildEnv)
	if spec == "" {
		return
	}
	os.Exit(runChild(spec, os.Stdin, os.Stdout))
}

// childKinds are the attacker children's jobs, by kind.
var childKinds = map[string]func(ctx context.Context, j job, out *emitter, leave context.Context) error{
	"stall": childHold, "http-idle": childHold, "unfinished": childUnfinished, "unread": childUnread,
	"reset": childReset, "soak": childSoak, "flood": childFlood,
}

// runChild runs one job and returns the exit code.
func runChild(spec string, stdin io.Reader, stdout io.Writer) int {
	out := &emitter{w: stdout}
	fail := func(format string, args ...any) int {
		out.emit(event{Ev: "error", Err: fmt.Sprintf(format, args...)})
		return 1
	}
	var j job
	if err := json.Unmarshal([]byte(spec), &j); err != nil {
		return fail("bad job %q: %v", spec, err)
	}
	if err := setNofile(childNofile); err != nil {
		return fail("set the descriptor limit: %v", err)
	}
	if j.Kind == "exec" {
		os.Unsetenv(ChildEnv)
		err := execve(j.Bin, append([]string{j.Bin}, j.Args...))
		fmt.Fprintf(os.Stderr, "hostile: exec %s: %v\n", j.Bin, err)
		return 1
	}
	run, ok := childKinds[j.Kind]
	if !ok {
		return fail("unknown job kind %q", j.Kind)
	}
	leave, left := context.WithCancel(context.Background()) // when the parent closes stdin
	go func() {
		io.Copy(io.Discard, stdin)
		left()
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := run(ctx, j, out, leave); err != nil {
		return fail("%s", err)
	}
	return 0
}

// emitter writes events as JSON lines from concurrent goroutines.
type emitter struct {
	mu sync.Mutex
	w  io.Writer
}

func (e *emitter) emit(ev event) {
	if ev.At == 0 {
		ev.At = time.Now().UnixNano()
	}
	b, _ := json.Marshal(ev)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.w.Write(append(b, '\n'))
}

// attacker is an attacker child seen from the parent.
type attacker struct {
	*proc
	events chan event // every event but "closed"; closed once the child has exited
	mu     sync.Mutex
	closes []time.Time // when the child saw the server close a connection
}

// attacker starts an attacker child doing j, stopped with the cleanups,
// and waits at most limit for its event ev, unless ev is "".
func (e *env) attacker(j job, ev string, limit time.Duration) (*attacker, event, error) {
	a := &attacker{events: make(chan event, 64)}
	p, err := startChild(j, func(l string) {
		var ev event
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			ev = event{Ev: "error", Err: fmt.Sprintf("unreadable line %q", l)}
		}
		if ev.Ev != "closed" {
			a.events <- ev // a few: ready, done, error
			return
		}
		a.mu.Lock()
		a.closes = append(a.closes, time.Unix(0, ev.At))
		a.mu.Unlock()
	})
	if err != nil {
		return nil, event{}, err
	}
	a.proc = p
	e.cleanups = append(e.cleanups, func() { p.stop() })
	go func() {
		<-p.Exited() // every line has come
		close(a.events)
	}()
	if ev == "" {
		return a, event{}, nil
	}
	got, err := a.next(ev, limit)
	return a, got, err
}

// next waits at most limit for the child's next event of kind ev; an
// error event, or the child ending, is an error.
func (a *attacker) next(ev string, limit time.Duration) (event, error) {
	deadline := time.After(limit)
	for {
		select {
		case e, ok := <-a.events:
			switch {
			case !ok:
				return event{}, fmt.Errorf("attacker child: %v; stderr: %q", errNoChildHook, a.stderr.last())
			case e.Ev == "error":
				return e, fmt.Errorf("attacker child: %s", e.Err)
			case e.Ev == ev:
				return e, nil
			}
		case <-deadline:
			return event{}, fmt.Errorf("attacker child: no %q event within %v", ev, limit)
		}
	}
}

// leave tells the attacker to finish, ends it, and returns its last event.
func (e *env) leave(a *attacker) event {
	a.CloseStdin()
	done, err := a.next("done", leaveLimit)
	a.stop()
	if err != nil {
		e.r.problem("the attacker leaving: %v", err)
	}
	return done
}
