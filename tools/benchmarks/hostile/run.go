package hostile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/tools/internal/benchrun"
	"github.com/sluice-rpc/sluice/tools/internal/childproc"
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
	// started ones (the Doorman attacks cannot be made then). It is never
	// restarted: after a crash, the attacks that follow fail.
	Target *Target
	// Limits are the started servers' limit flags. Default: CILimits()
	// at CI size, none (the server's defaults) at full size.
	Limits *Limits
	// Progress, if not nil, gets a line as each attack starts and ends.
	Progress io.Writer
}

// Run makes c's attacks in turn, calling each, if not nil, with every
// result as it comes. It stops at the first attack that cannot be made,
// or when ctx ends, and returns the results so far.
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
	ctx      context.Context
	cfg      Config
	p        params
	r        *Result
	t        *Target
	s        *sampler     // the server's peaks
	side     func() *Load // stops the side client, if one runs
	cleanups []func()     // run last first once the attack is over
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
	defer func() {
		for i := len(e.cleanups) - 1; i >= 0; i-- {
			e.cleanups[i]()
		}
	}()
	start := time.Now()
	if info.target == onClient {
		e.logf("no server: the attack is on a client")
		err := info.run(e)
		e.r.Elapsed = millis.Duration(time.Since(start))
		return e.r, err
	}
	t, err := e.target(info.target == onDoorman)
	if err != nil {
		return nil, err
	}
	e.t = t
	s := &e.r.Server
	s.Flags, s.Missing = t.Flags, t.Missing
	s.GoroutinesPeak, s.GoroutinesAfter = -1, -1
	note := ""
	if len(t.Flags) > 0 {
		note += fmt.Sprintf(", limits %v", t.Flags)
	}
	if len(t.Missing) > 0 {
		note += fmt.Sprintf(", the binary lacks %v", t.Missing)
	}
	e.logf("server %s (pid %d)%s", t.Addr, t.PID, note)
	s.RSSBefore, _, _ = childproc.Memory(t.PID)
	s.GoroutinesBefore = readGoroutines(ctx, t.DebugURL)
	s.HeapBefore, _ = readHeap(ctx, t.DebugURL)
	rssEvery, gorEvery := 250*time.Millisecond, time.Second
	if a == Soak {
		rssEvery, gorEvery = e.p.soakEvery, e.p.soakEvery
	}
	e.s = startSampler(ctx, t.PID, t.DebugURL, rssEvery, gorEvery)
	err = info.run(e)
	e.stop()
	e.r.Elapsed = millis.Duration(time.Since(start))
	s.AliveAfter = e.t.Alive()
	e.r.serverFigures()
	e.logf("done in %.1fs", e.r.Elapsed.D().Seconds())
	return e.r, err
}

func (e *env) logf(format string, args ...any) {
	if e.cfg.Progress != nil {
		fmt.Fprintf(e.cfg.Progress, "  %s: %s\n", e.r.Attack, fmt.Sprintf(format, args...))
	}
}

// target returns the server to attack; a started one stops with the
// attack's cleanups.
func (e *env) target(doorman bool) (*Target, error) {
	if e.cfg.Target != nil && doorman {
		return nil, errors.New("a Doorman attack needs a Doorman server the runner starts, not an external --target")
	}
	if e.cfg.Target != nil {
		return e.cfg.Target, nil
	}
	bin, err := e.bin()
	if err != nil {
		return nil, err
	}
	spec := &serverSpec{bin: bin, doorman: doorman, limits: e.cfg.Limits}
	if spec.limits == nil && e.cfg.Size == CI {
		l := CILimits()
		spec.limits = &l
	}
	if doorman {
		dir, err := os.MkdirTemp("", "sluice-hostile-")
		if err != nil {
			return nil, err
		}
		e.cleanups = append(e.cleanups, func() { os.RemoveAll(dir) })
		spec.config = filepath.Join(dir, "doorman.yaml")
		if err := os.WriteFile(spec.config, []byte(doormanConfig), 0o600); err != nil {
			return nil, err
		}
	}
	t, err := startServer(spec)
	if err != nil {
		return nil, err
	}
	e.cleanups = append(e.cleanups, func() {
		if err := t.Close(); err != nil {
			e.r.problem("stopping the server: %v", err)
		}
	})
	return t, nil
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

// end stops the side client and the sampler, waits settle unless err, and
// reads the "after" figures (memory first: reading the heap collects).
func (e *env) end(err error, settle time.Duration) error {
	e.stop()
	if err == nil {
		err = e.pause(settle)
	}
	if s := &e.r.Server; e.t.Alive() {
		s.RSSAfter, _, _ = childproc.Memory(e.t.PID)
		s.GoroutinesAfter = readGoroutines(e.ctx, e.t.DebugURL)
		s.HeapAfter, _ = readHeap(e.ctx, e.t.DebugURL)
	}
	return err
}

// stop stops the side client and the sampler, and records their figures.
func (e *env) stop() {
	if e.side != nil {
		e.r.Side = e.side()
		e.side = nil
	}
	rss, gor := e.s.finish()
	sv := &e.r.Server
	sv.RSSPeak = max(rss, sv.RSSBefore)
	sv.GoroutinesPeak = max(gor, sv.GoroutinesBefore)
}

// startLoad starts a legitimate client (what, in problems) making rate
// calls a second of payload bytes; the function returned stops it.
func (e *env) startLoad(what string, rate float64, payload int) func() *Load {
	done := make(chan struct{})
	res := make(chan *Load, 1)
	go func() {
		l, err := runLoad(e.ctx, e.t.Addr, rate, payload, done)
		if err != nil {
			e.r.problem("%s: %v", what, err)
		}
		res <- l
	}()
	return func() *Load {
		close(done)
		return <-res
	}
}

// startSide starts the side client, at e.p.sideRate until the attack ends.
func (e *env) startSide() { e.side = e.startLoad("the side client", e.p.sideRate, 100) }

func (e *env) sideFigure() { e.r.fig(fmt.Sprintf("side client (%g/s)", e.p.sideRate), "%s", e.r.Side) }

// pause waits d, or until the attack is interrupted (its error).
func (e *env) pause(d time.Duration) error { return clock.Sleep(e.ctx, clock.Real, d) }

// survived checks the server after case c, waiting up to wait for a death
// to show: a crash is recorded against c and a started server restarted.
func (e *env) survived(c *Case, wait time.Duration) {
	if !e.t.waitDead(wait) {
		c.Survived = true
		return
	}
	c.Crash = e.t.Crash()
	e.r.Server.Crashes = append(e.r.Server.Crashes, c.Name+": "+c.Crash)
	e.logf("the server died (%s): %s", c.Name, c.Crash)
	if e.t.spec != nil {
		e.s.follow(0, "")
		if err := e.t.restart(); err != nil {
			e.r.problem("restarting the server after %s: %v", c.Name, err)
		} else {
			e.s.follow(e.t.PID, e.t.DebugURL)
		}
	}
}

// doormanConfig configures the Doorman servers attacked: a configured
// resource (kv-rps), a PROPORTIONAL_SHARE one with short leases (poison)
// and a template for every other resource.
const doormanConfig = `resources:
- {identifier_glob: "kv-rps", capacity: 100, algorithm: {kind: FAIR_SHARE, lease_length: 60, refresh_interval: 15, learning_mode_duration: 0}}
- {identifier_glob: "poison", capacity: 1000, algorithm: {kind: PROPORTIONAL_SHARE, lease_length: 4, refresh_interval: 1, learning_mode_duration: 0}}
- {identifier_glob: "*", capacity: 1000, algorithm: {kind: FAIR_SHARE, lease_length: 60, refresh_interval: 15, learning_mode_duration: 0}}
`
