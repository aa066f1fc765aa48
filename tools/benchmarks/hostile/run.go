package hostile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sluice-rpc/sluice/tools/internal/benchrun"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

// Config is a run of attacks. The zero value runs every attack at full
// size against servers started from this very binary.
type Config struct {
	// Attacks to make, in order. Default: every one (Attacks()).
	Attacks []Attack
	Size    Size
	// ServerBin is the sluice binary whose `serve` and `doorman serve`
	// are attacked, a fresh server for each attack. Default: this binary.
	ServerBin string
	// Target, if set, is an external TChannel server attacked instead of
	// started ones; Doorman likewise for the Doorman attacks. An external
	// server is never restarted: after a crash, the attacks that follow
	// fail.
	Target, Doorman *Target
	// Limits are the started servers' limit flags. Default: CILimits()
	// at CI size, none (the server's defaults) at full size.
	Limits *Limits
	// Progress, if not nil, gets a line as each attack starts and ends.
	Progress io.Writer
}

// limits returns the limits the started servers get.
func (c Config) limits() Limits {
	switch {
	case c.Limits != nil:
		return *c.Limits
	case c.Size == CI:
		return CILimits()
	}
	return Limits{}
}

// Run makes c's attacks one after another (no attack's load disturbs
// another's figures), calling each, if not nil, with every result as it
// comes. It stops at the first attack that cannot be made (a server that
// does not start, an attacker child that fails) or when ctx ends, and
// returns the results so far.
func (c Config) Run(ctx context.Context, each func(*Result)) ([]*Result, error) {
	attacks := c.Attacks
	if len(attacks) == 0 {
		attacks = Attacks()
	}
	var out []*Result
	for _, a := range attacks {
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		r, err := RunAttack(ctx, a, c)
		if r != nil {
			out = append(out, r)
			if each != nil {
				each(r)
			}
		}
		if err != nil {
			return out, fmt.Errorf("hostile: %s: %w", a, err)
		}
	}
	return out, nil
}

// env is one attack's run: its server, its size's numbers, its result.
type env struct {
	ctx  context.Context
	cfg  Config
	p    params
	r    *Result
	t    *Target
	logf func(format string, args ...any)
}

// RunAttack makes one attack of c (c.Attacks is ignored) against a fresh
// server, or c's external one, and returns its figures. An error means
// the attack could not be made; a server that crashes is a result.
func RunAttack(ctx context.Context, a Attack, c Config) (*Result, error) {
	info, ok := lookup(a)
	if !ok {
		return nil, fmt.Errorf("unknown attack %q; the attacks are %s", a, benchrun.Names(Attacks()))
	}
	e := &env{ctx: ctx, cfg: c, p: paramsFor(c.Size), r: &Result{Attack: a, Size: c.Size}}
	e.logf = func(format string, args ...any) {
		if c.Progress != nil {
			fmt.Fprintf(c.Progress, "  %s: %s\n", a, fmt.Sprintf(format, args...))
		}
	}
	start := time.Now()
	if info.client {
		e.logf("no server: the attack is on a client")
		err := info.run(e)
		e.r.Elapsed = millis.Duration(time.Since(start))
		return e.r, err
	}
	t, cleanup, err := e.target(info.doorman)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	e.t = t
	e.r.Server.Flags, e.r.Server.Missing = t.Flags, t.Missing
	e.r.Server.GoroutinesBefore, e.r.Server.GoroutinesPeak, e.r.Server.GoroutinesAfter = -1, -1, -1
	e.logf("server %s (pid %d)%s", t.Addr, t.PID, flagNote(t))
	err = info.run(e)
	e.r.Elapsed = millis.Duration(time.Since(start))
	e.r.Server.AliveAfter = e.t.Alive()
	e.r.serverFigures()
	e.logf("done in %.1fs", e.r.Elapsed.D().Seconds())
	return e.r, err
}

func flagNote(t *Target) string {
	s := ""
	if len(t.Flags) > 0 {
		s += fmt.Sprintf(", limits %v", t.Flags)
	}
	if len(t.Missing) > 0 {
		s += fmt.Sprintf(", the binary lacks %v", t.Missing)
	}
	return s
}

// target returns the server to attack and what to do after the attack.
func (e *env) target(doorman bool) (*Target, func(), error) {
	ext := e.cfg.Target
	if doorman {
		ext = e.cfg.Doorman
	}
	if ext != nil {
		return ext, func() {}, nil
	}
	if doorman && (e.cfg.Target != nil) {
		return nil, nil, errors.New("a Doorman attack against external servers needs an external Doorman server too")
	}
	bin, err := e.bin()
	if err != nil {
		return nil, nil, err
	}
	spec := &serverSpec{bin: bin, doorman: doorman, limits: e.cfg.limits()}
	var dir string
	if doorman {
		if dir, err = os.MkdirTemp("", "sluice-hostile-"); err != nil {
			return nil, nil, err
		}
		spec.config = filepath.Join(dir, "doorman.yaml")
		if err := os.WriteFile(spec.config, []byte(doormanConfig), 0o600); err != nil {
			os.RemoveAll(dir)
			return nil, nil, err
		}
	}
	t, err := startServer(spec)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return t, func() {
		if err := t.Close(); err != nil {
			e.r.problem("stopping the server: %v", err)
		}
		if dir != "" {
			os.RemoveAll(dir)
		}
	}, nil
}

// bin is the sluice binary whose servers and clients are attacked.
func (e *env) bin() (string, error) {
	if e.cfg.ServerBin != "" {
		return e.cfg.ServerBin, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find this binary to start servers from: %w", err)
	}
	return exe, nil
}

// before records the server's memory and goroutines before the attack.
func (e *env) before() {
	s := &e.r.Server
	s.RSSBefore, _ = readRSS(e.t.PID)
	s.GoroutinesBefore = e.goroutines()
	s.HeapBefore, _ = readHeap(e.ctx, e.t.DebugURL)
}

// after records them after the attack, if the server still runs: the
// resident memory first, as the heap is read after a collection.
func (e *env) after() {
	s := &e.r.Server
	if !e.t.Alive() {
		return
	}
	s.RSSAfter, _ = readRSS(e.t.PID)
	s.GoroutinesAfter = e.goroutines()
	s.HeapAfter, _ = readHeap(e.ctx, e.t.DebugURL)
}

func (e *env) goroutines() int {
	n, err := readGoroutines(e.ctx, e.t.DebugURL)
	if err != nil {
		return -1
	}
	return n
}

// startSide starts the side client: e.p.sideRate calls a second on a
// connection of its own, each with e.p.deadline, until stop. stop returns
// its figures; a second call returns the same, so that a deferred stop
// after the measured one waits for nothing.
func (e *env) startSide() (stop func() *Load) {
	done := make(chan struct{})
	res := make(chan *Load, 1)
	go func() {
		l, err := runLoad(e.ctx, e.t.Addr, loadSpec{rate: e.p.sideRate, deadline: e.p.deadline, payload: 100}, done)
		if err != nil {
			e.r.problem("the side client: %v", err)
		}
		res <- l
	}()
	var once sync.Once
	var l *Load
	return func() *Load {
		once.Do(func() {
			close(done)
			l = <-res
		})
		return l
	}
}

// sample starts sampling the server's peaks.
func (e *env) sample() *sampler {
	return startSampler(e.ctx, e.t, 250*time.Millisecond, time.Second)
}

// peaks stops s and records the peaks it saw.
func (e *env) peaks(s *sampler) []int64 {
	rss, gor, series := s.finish()
	sv := &e.r.Server
	sv.RSSPeak = max(rss, sv.RSSBefore)
	sv.GoroutinesPeak = max(gor, sv.GoroutinesBefore)
	return series
}

// pause waits d, or less if ctx ends: it paces an attack.
func (e *env) pause(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-e.ctx.Done():
		return e.ctx.Err()
	}
}

// survived checks the server after a case that may have crashed it: if it
// died, the crash is recorded against the case and a server the runner
// started is started again. wait is how long a death may take to show.
func (e *env) survived(c *Case, wait time.Duration) {
	if !e.t.waitDead(wait) {
		c.Survived = true
		return
	}
	c.Crash = e.t.Crash()
	e.r.Server.Crashes = append(e.r.Server.Crashes, c.Name+": "+c.Crash)
	e.logf("the server died (%s): %s", c.Name, c.Crash)
	if e.t.spec != nil {
		if err := e.t.restart(); err != nil {
			e.r.problem("restarting the server after %s: %v", c.Name, err)
		}
	}
}

// doormanConfig is the configuration of the Doorman servers attacked: a
// configured resource (kv-rps), a PROPORTIONAL_SHARE one with short leases
// (poison, see doorman_tables.go) and one template for every other
// resource.
const doormanConfig = `resources:
- identifier_glob: "kv-rps"
  capacity: 100
  algorithm:
    kind: FAIR_SHARE
    lease_length: 60
    refresh_interval: 15
    learning_mode_duration: 0
- identifier_glob: "poison"
  capacity: 1000
  algorithm:
    kind: PROPORTIONAL_SHARE
    lease_length: 4
    refresh_interval: 1
    learning_mode_duration: 0
- identifier_glob: "*"
  capacity: 1000
  algorithm:
    kind: FAIR_SHARE
    lease_length: 60
    refresh_interval: 15
    learning_mode_duration: 0
`
