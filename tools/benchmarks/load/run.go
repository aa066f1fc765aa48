package load

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
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
	// Progress, if not nil, is called with the run's totals once every
	// ProgressEvery (default 1s) while calls arrive or are in flight. It
	// runs on Run's goroutine, which it holds up: keep it short. A period
	// that ends while Run cannot report (its goroutine held up) is reported
	// as soon as it can, at the latest before Run returns, so a run that
	// lasts n periods reports at least once if n >= 1.
	Progress      func(Progress)
	ProgressEvery time.Duration
	// Timeline asks for Report.Timeline, the run second by second.
	Timeline bool
}

// Progress is a run's running totals: the calls that have returned so
// far, split as the Report splits them.
type Progress struct {
	// Elapsed is the time since the first arrival.
	Elapsed time.Duration
	// Calls returned: OK, Failed and Refused as in Report.
	Calls, OK, Failed, Refused int
	// Rate is the calls returned per second since the previous report.
	Rate float64
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
	case c.ProgressEvery < 0:
		return fmt.Errorf("load: ProgressEvery is %v, must be >= 0 (0: a second)", c.ProgressEvery)
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
	at       time.Duration // arrival, from the start
	latency  time.Duration
	attempts int
	code     string // "" for OK
	local    bool   // refused locally: code is THROTTLED, RATE_LIMITED, NO_PEERS or UNAVAILABLE
	late     bool
}

// counts are the running totals Progress reports.
type counts struct{ ok, failed, refused atomic.Int64 }

func (c *counts) add(r result) {
	switch {
	case r.code == "":
		c.ok.Add(1)
	case r.local:
		c.refused.Add(1)
	default:
		c.failed.Add(1)
	}
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
			var ce *channel.CallError
			return result{attempts: attemptsOf(err), code: CodeOf(err), local: errors.As(err, &ce) && ce.Code.IsLocal()}
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
	var totals counts
	tick, report, stopTicks := progress(cfg, start, &totals)
	defer stopTicks()
	started := 0
loop:
	for i := 0; i < n; i++ {
		at := start.Add(time.Duration(i) * interval)
		if wait := time.Until(at); wait > 0 {
			timer.Reset(wait)
		arrive:
			for {
				select {
				case <-timer.C:
					break arrive
				case now := <-tick:
					report(now)
				case <-ctx.Done():
					break loop
				}
			}
			// The timer's oversleep (up to a millisecond or so) is the
			// generator's, not the call's: start the clock now.
			at = time.Now()
		}
	slot:
		for {
			select {
			case slots <- struct{}{}:
				break slot
			case now := <-tick:
				report(now)
			case <-ctx.Done():
				break loop
			}
		}
		started++
		go func(i int, at time.Time) {
			late := time.Since(at) > lateAfter
			r := one(ctx)
			r.latency, r.late, r.at = time.Since(at), late, at.Sub(start)
			results[i] = r
			totals.add(r)
			<-slots
			done <- struct{}{}
		}(i, at)
	}
	for i := 0; i < started; {
		select {
		case <-done:
			i++
		case now := <-tick:
			report(now)
		}
	}
	report(time.Now())
	elapsed := time.Since(start)
	after := sumPeers(ch.Peers(cfg.Service))
	r := summarize(results[:started], elapsed)
	if cfg.Timeline {
		r.Timeline = timeline(results[:started])
	}
	r.OfferedRPS = cfg.RPS
	r.Busy = after.Busy - before.Busy
	r.Throttled = after.Throttled - before.Throttled
	r.Sent = after.Sent - before.Sent
	return r, nil
}

// progress returns the ticker channel of cfg.Progress's reports (nil,
// never ready, without one), the function that reports if a period has
// ended since the last report, and the one that stops the ticker.
func progress(cfg Config, start time.Time, totals *counts) (<-chan time.Time, func(now time.Time), func()) {
	if cfg.Progress == nil {
		return nil, func(time.Time) {}, func() {}
	}
	every := cfg.ProgressEvery
	if every == 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
	next, prev := every, Progress{}
	return t.C, func(now time.Time) {
		el := now.Sub(start)
		if el < next {
			return
		}
		for next <= el {
			next += every
		}
		p := Progress{Elapsed: el, OK: int(totals.ok.Load()), Failed: int(totals.failed.Load()), Refused: int(totals.refused.Load())}
		p.Calls = p.OK + p.Failed + p.Refused
		p.Rate = float64(p.Calls-prev.Calls) / (el - prev.Elapsed).Seconds()
		prev = p
		cfg.Progress(p)
	}, t.Stop
}

func sumPeers(cs []peer.Counts) (s peer.Counts) {
	for _, c := range cs {
		s.Sent += c.Sent
		s.Busy += c.Busy
		s.Throttled += c.Throttled
	}
	return s
}

// CodeOf names a failed call's outcome: the TChannel code ("BUSY",
// "TIMEOUT"), or for local outcomes THROTTLED, NO_PEERS, RATE_LIMITED,
// UNAVAILABLE or LOCAL (channel.CallError.CodeName): the benchmarks count
// failures under these names.
func CodeOf(err error) string {
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
