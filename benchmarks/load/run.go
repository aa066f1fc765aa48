package load

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/peer"
)

// Bounds on a run.
const (
	MaxRPS         = 100_000
	MaxCalls       = 1_000_000
	MaxDuration    = 10 * time.Minute
	MaxConcurrency = 10_000
	MaxTimeout     = time.Minute
	MaxWarmup      = 10_000
)

// Config describes one run.
type Config struct {
	// Service and Method are called. Required.
	Service, Method string
	// Request is what every call sends (each call sends its own copy).
	// Default: a raw call with an empty body.
	Request *channel.Request
	// RPS is the arrival rate, calls per second: call i arrives at i/RPS
	// seconds after the start. In (0, MaxRPS].
	RPS float64
	// Duration is how long calls arrive, Calls how many arrive; give
	// either or both (the run stops at whichever comes first). The run
	// makes at most MaxCalls calls over at most MaxDuration.
	Duration time.Duration
	Calls    int
	// Concurrency is the most calls in flight; an arrival beyond it waits
	// for a slot, and that wait counts in its latency. In
	// [1, MaxConcurrency]; default 100.
	Concurrency int
	// Timeout is each call's deadline, all attempts included. Default 1s;
	// at most MaxTimeout.
	Timeout time.Duration
	// Warmup calls are made one at a time before the run (to open
	// connections and prime adaptive hedging) and left out of the Report.
	Warmup int
}

// Validate reports the first rule c breaks, naming the field.
func (c Config) Validate() error {
	switch {
	case c.Service == "" || c.Method == "":
		return errors.New("load: Service and Method are required")
	case !(c.RPS > 0 && c.RPS <= MaxRPS):
		return fmt.Errorf("load: RPS is %v, must be in (0, %d]", c.RPS, MaxRPS)
	case c.Duration < 0 || c.Duration > MaxDuration:
		return fmt.Errorf("load: Duration is %v, must be in [0, %v]", c.Duration, MaxDuration)
	case c.Calls < 0 || c.Calls > MaxCalls:
		return fmt.Errorf("load: Calls is %d, must be in [0, %d]", c.Calls, MaxCalls)
	case c.Duration == 0 && c.Calls == 0:
		return errors.New("load: give Duration or Calls (or both)")
	case c.Concurrency < 0 || c.Concurrency > MaxConcurrency:
		return fmt.Errorf("load: Concurrency is %d, must be in [1, %d]", c.Concurrency, MaxConcurrency)
	case c.Timeout < 0 || c.Timeout > MaxTimeout:
		return fmt.Errorf("load: Timeout is %v, must be in (0, %v]", c.Timeout, MaxTimeout)
	case c.Warmup < 0 || c.Warmup > MaxWarmup:
		return fmt.Errorf("load: Warmup is %d, must be in [0, %d]", c.Warmup, MaxWarmup)
	}
	return nil
}

// calls returns how many calls the run makes.
func (c Config) calls() int {
	d := c.Duration
	if d == 0 {
		d = MaxDuration
	}
	// Arrivals at 0, 1/RPS, ... strictly before d.
	n := int(math.Ceil(d.Seconds()*c.RPS - 1e-9))
	if c.Calls > 0 {
		n = min(n, c.Calls)
	}
	return min(max(n, 1), MaxCalls)
}

// result is one call's outcome.
type result struct {
	latency  time.Duration
	attempts int
	code     string // "" for OK
	late     bool
}

// lateAfter is how far behind its arrival a call may start and not be late.
const lateAfter = time.Millisecond

// Run makes the calls cfg describes through ch and reports on them. ch must
// already know the service's peers. Run stops early, with the calls made so
// far, when ctx ends; it returns once every call it started has returned.
func Run(ctx context.Context, ch *channel.Channel, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 100
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = time.Second
	}
	if cfg.Request == nil {
		cfg.Request = &channel.Request{Format: "raw"}
	}
	one := func(ctx context.Context) result {
		cctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
		req := *cfg.Request
		res, err := ch.Call(cctx, cfg.Service, cfg.Method, &req)
		if err != nil {
			return result{attempts: attemptsOf(err), code: codeOf(err)}
		}
		if res.AppError {
			return result{attempts: res.Attempts, code: "APPLICATION"}
		}
		return result{attempts: res.Attempts}
	}
	for i := 0; i < cfg.Warmup && ctx.Err() == nil; i++ {
		one(ctx)
	}
	before := sumPeers(ch.Peers(cfg.Service))

	n := cfg.calls()
	results := make([]result, n)
	slots := make(chan struct{}, cfg.Concurrency)
	done := make(chan struct{}, n)
	interval := time.Duration(float64(time.Second) / cfg.RPS)
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	start := time.Now()
	started := 0
loop:
	for i := 0; i < n; i++ {
		at := start.Add(time.Duration(i) * interval)
		if wait := time.Until(at); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				break loop
			}
			// The timer's oversleep (up to a millisecond or so) is the
			// generator's, not the call's: start the clock now.
			at = time.Now()
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			break loop
		}
		started++
		go func(i int, at time.Time) {
			late := time.Since(at) > lateAfter
			r := one(ctx)
			r.latency, r.late = time.Since(at), late
			results[i] = r
			<-slots
			done <- struct{}{}
		}(i, at)
	}
	for i := 0; i < started; i++ {
		<-done
	}
	elapsed := time.Since(start)
	after := sumPeers(ch.Peers(cfg.Service))
	r := summarize(results[:started], elapsed)
	r.OfferedRPS = cfg.RPS
	r.Busy = after.Busy - before.Busy
	r.Throttled = after.Throttled - before.Throttled
	r.Sent = after.Sent - before.Sent
	return r, nil
}

func sumPeers(cs []peer.Counts) (s peer.Counts) {
	for _, c := range cs {
		s.Sent += c.Sent
		s.Busy += c.Busy
		s.Throttled += c.Throttled
	}
	return s
}

// codeOf names a failed call's outcome: the TChannel code ("BUSY",
// "TIMEOUT"), or for local outcomes THROTTLED, NO_PEERS, RATE_LIMITED or
// LOCAL (channel.CallError.CodeName).
func codeOf(err error) string {
	var ce *channel.CallError
	switch {
	case errors.As(err, &ce):
		return ce.CodeName() // the tag call.errors counts it under
	case errors.Is(err, context.DeadlineExceeded):
		return "TIMEOUT"
	}
	return "LOCAL"
}

func attemptsOf(err error) int {
	var ce *channel.CallError
	if errors.As(err, &ce) {
		return ce.Attempts
	}
	return 0
}
