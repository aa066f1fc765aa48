// Package fleet holds what the benchmarks that run fleets of servers
// (benchmarks/faults, benchmarks/deploy) share: servers in child
// processes that report events as lines ("WORD ARGS..."; "listening
// HOST:PORT ..." once serving, "error MESSAGE" when they cannot), an
// open-loop load, undo lists and error-code tallies.
package fleet

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluice-rpc/sluice/tools/internal/childproc"
)

// The words every child uses.
const (
	Listening = "listening"
	Error     = "error"
)

// Lines writes a child's event lines from concurrent goroutines.
type Lines struct {
	mu sync.Mutex
	W  io.Writer
}

// Line writes fields as one space-separated line, newlines in them
// turned to "; ".
func (l *Lines) Line(fields ...string) {
	line := strings.ReplaceAll(strings.Join(fields, " "), "\n", "; ")
	l.mu.Lock()
	defer l.mu.Unlock()
	io.WriteString(l.W, line+"\n")
}

// Fail writes err as an error line and returns 1, a child's exit code.
func (l *Lines) Fail(err error) int {
	l.Line(Error, err.Error())
	return 1
}

// Child is a serving child process seen from the parent: the first line
// of each word it wrote, and a channel closed when that line came.
type Child struct {
	Proc *childproc.Proc
	// Addr is the HOST:PORT of its listening line.
	Addr string

	mu           sync.Mutex
	first        map[string][]string
	marks        map[string]chan struct{}
	errs, others []string
}

// Start starts this binary as a child with env (NAME=VALUE) added to its
// environment and waits at most limit for it to listen; a child that does
// not is ended. Each line goes to onLine, if not nil, as it comes; the
// lines it returns false for are kept. hook names the function the binary
// must call first thing, for the error when the child exits instead.
func Start(env, hook string, limit time.Duration, onLine func(fields []string) bool) (*Child, error) {
	c := &Child{first: map[string][]string{}, marks: map[string]chan struct{}{}}
	p, err := childproc.Start(childproc.Config{Env: env, OnLine: func(l string) {
		f := strings.Fields(l)
		if len(f) == 0 || onLine != nil && onLine(f) {
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		switch _, seen := c.first[f[0]]; {
		case f[0] == Error:
			if len(c.errs) < maxKept {
				c.errs = append(c.errs, strings.TrimPrefix(l, Error+" "))
			}
		case !seen && len(c.first) < maxWords:
			c.first[f[0]] = f[1:]
			close(c.mark(f[0]))
		case len(c.others) < maxKept:
			c.others = append(c.others, l)
		}
	}})
	if err != nil {
		return nil, err
	}
	c.Proc = p
	args, err := c.Wait(Listening, "listen", limit)
	if err == nil && len(args) == 0 {
		err = fmt.Errorf("the child (pid %d) wrote %q without its HOST:PORT", p.Pid(), Listening)
	}
	if err != nil {
		select {
		case <-p.Exited(): // as a binary without the hook does, at once
			err = fmt.Errorf("%w (does the binary call %s first thing in main, or TestMain?)", err, hook)
		default:
		}
		return nil, errors.Join(err, p.Close(exitLimit))
	}
	c.Addr = args[0]
	return c, nil
}

// What a Child keeps of a child's output, whatever it writes: the first
// line of at most maxWords words, and maxKept error and other lines.
const (
	maxWords = 32
	maxKept  = 10
)

// exitLimit bounds the wait for a child that did not listen to exit, and
// again once killed.
const exitLimit = 5 * time.Second

// mark returns word's channel; c.mu is held.
func (c *Child) mark(word string) chan struct{} {
	if c.marks[word] == nil {
		c.marks[word] = make(chan struct{})
	}
	return c.marks[word]
}

// Seen returns the arguments of the first line of word, nil if none came.
func (c *Child) Seen(word string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.first[word]
}

// Wait waits at most limit for the first line of word and returns its
// arguments; it fails, saying it waited to "what", if the child exits or
// the limit passes first.
func (c *Child) Wait(word, what string, limit time.Duration) ([]string, error) {
	c.mu.Lock()
	m := c.mark(word)
	c.mu.Unlock()
	select {
	case <-m:
		return c.Seen(word), nil
	case <-c.Proc.Exited():
		if args := c.Seen(word); args != nil { // its last words
			return args, nil
		}
		return nil, fmt.Errorf("the child %s exited before it could %s: %s", c.Proc.Executable(), what, c.problem())
	case <-time.After(limit):
		return nil, fmt.Errorf("the child (pid %d) did not %s within %v: %s", c.Proc.Pid(), what, limit, c.problem())
	}
}

// problem says what the child said besides its events, for an error.
func (c *Child) problem() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	if len(c.errs) > 0 {
		fmt.Fprintf(&b, "it said: %s; ", strings.Join(c.errs, "; "))
	}
	if len(c.others) > 0 {
		fmt.Fprintf(&b, "stdout %q; ", c.others)
	}
	fmt.Fprintf(&b, "stderr %q", c.Proc.Stderr())
	return b.String()
}

// arrivals calls fn for an open-loop schedule of rate arrivals a second
// from start, the ith due at start + i/rate (sched), until n have arrived
// (n < 0: no bound) or stop is closed, and returns how many arrived. at is
// sched, or when the timer woke if later: its oversleep is the
// generator's. fn should return at once.
func arrivals(start time.Time, rate float64, n int, stop <-chan struct{}, fn func(i int, sched, at time.Time)) int {
	interval := time.Duration(float64(time.Second) / rate)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	i := 0
	for ; i != n; i++ {
		sched := start.Add(time.Duration(i) * interval)
		at := sched
		select {
		case <-stop:
			return i
		default:
		}
		if wait := time.Until(sched); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
				at = time.Now()
			case <-stop:
				return i
			}
		}
		fn(i, sched, at)
	}
	return i
}

// Load makes an open-loop load: call i arrives at start + i/rate (sched;
// at is when the generator got to it, if later) and runs on a goroutine of
// its own, until n have arrived (n < 0: no bound) or stop is closed. It
// returns the results of the calls that returned within drain of the end
// of the arrivals, how many were still out then (hung: left running, their
// results not among them), and when the arrivals ended.
func Load[T any](start time.Time, rate float64, n int, stop <-chan struct{}, drain time.Duration, call func(i int, sched, at time.Time) T) (_ []T, hung int, ended time.Time) {
	var (
		mu  sync.Mutex
		out []T
		wg  sync.WaitGroup
	)
	started := arrivals(start, rate, n, stop, func(i int, sched, at time.Time) {
		wg.Go(func() {
			r := call(i, sched, at)
			mu.Lock()
			out = append(out, r)
			mu.Unlock()
		})
	})
	ended = time.Now()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(drain):
	}
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(out), started - len(out), ended
}

// Closers undo what was started, last first.
type Closers []func() error

// Add adds f, which cannot fail, to the list.
func (c *Closers) Add(f func()) { *c = append(*c, func() error { f(); return nil }) }

// Close calls every closer, last first, empties the list and returns the
// errors joined.
func (c *Closers) Close() error {
	var errs []error
	for i := len(*c) - 1; i >= 0; i-- {
		errs = append(errs, (*c)[i]())
	}
	*c = nil
	return errors.Join(errs...)
}

// Codes formats counts, the most frequent first (ties by name), each as
// format says with its code and count (%[1]s, %[2]d), joined by ", ".
func Codes(counts map[string]int, format string) string {
	codes := slices.Collect(maps.Keys(counts))
	slices.SortFunc(codes, func(a, b string) int { return cmp.Or(counts[b]-counts[a], strings.Compare(a, b)) })
	for i, c := range codes {
		codes[i] = fmt.Sprintf(format, c, counts[c])
	}
	return strings.Join(codes, ", ")
}
