package load

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/channel"
)

// Bounds on a run.
const (
	MaxRPS         = 100_000
	MaxCalls       = 1_000_000
	MaxDuration    = 10 * time.Minute
	MaxConcurrency = 10_000 // calls in flight in all
	MaxTimeout     = time.Minute
	MaxWarmup      = 10_000
)

// The Report's modes.
const (
	ModeRate      = "rate"      // Config.RPS > 0: open loop
	ModeUnbounded = "unbounded" // Config.RPS == 0: closed loop
)

// Config describes one run.
type Config struct {
	// Method is called on the Clients' service. Required.
	Method string
	// Request is what every call sends (Run never modifies it); Thrift
	// has Arg3 the encoded arguments and Method "Service::method".
	// Default: a raw call with an empty body.
	Request *channel.Request
	// CallOptions go with every call.
	CallOptions []channel.CallOption
	// Vary, Client and Context, if set, give call i of a rate run its own
	// request and options, Client (an index into RunClients' Clients, in
	// place of i % len), and context (derived from Run's). Run calls them
	// in arrival order on its scheduling goroutine: they must be quick.
	// Warmup calls use Request, CallOptions and Run's context.
	Vary    func(i int) (*channel.Request, []channel.CallOption)
	Client  func(i int) int
	Context func(ctx context.Context, i int) context.Context
	// RPS is the arrival rate, calls per second (open loop); 0 makes the
	// run unbounded (closed loop). In [0, MaxRPS].
	RPS float64
	// Duration is how long calls arrive, Calls how many; give either or
	// both (the run stops at whichever comes first).
	Duration time.Duration
	Calls    int
	// Concurrency bounds the calls in flight: in a rate run over every
	// channel, an arrival beyond it waiting for a slot (default 100); in
	// an unbounded run on each channel (default 1, as yab's).
	Concurrency int
	// Timeout is each call's deadline, all attempts included. Default 1s.
	Timeout time.Duration
	// Warmup calls are made one at a time on each channel before the run
	// and left out of the Report but for their number. A channel's warmup
	// ends at its first call that finds the peers unreachable or
	// overloaded (warmupEnds), which would otherwise wait out Timeout.
	Warmup int
	// Progress, if not nil, is called with the run's totals every
	// ProgressEvery (default 1s), one call at a time, on a goroutine of
	// its own; the last call returns before Run does.
	Progress      func(Progress)
	ProgressEvery time.Duration
	// Timeline asks for Report.Timeline and Record for Report.Records
	// (rate runs only); PerPeer for Report.PerPeer.
	Timeline bool
	Record   bool
	PerPeer  bool
	// Exception, if not nil, names a response's application error (a
	// Thrift exception's type) for Report.Exceptions; keep it cheap.
	Exception func(res *channel.Response) string
}

// Progress is a run's running totals: the time since the first arrival,
// the calls returned so far as the Report splits them, and the calls
// returned per second since the previous report.
type Progress struct {
	Elapsed                    time.Duration
	Calls, OK, Failed, Refused int
	Rate                       float64
}

// Validate reports the first rule c breaks, naming the field.
func (c Config) Validate() error {
	switch {
	case c.Method == "":
		return errors.New("load: Method is required")
	case !(c.RPS >= 0 && c.RPS <= MaxRPS):
		return fmt.Errorf("load: RPS is %v, must be in [0, %d] (0: unbounded)", c.RPS, MaxRPS)
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
	case c.Timeline && c.RPS == 0:
		return errors.New("load: Timeline needs RPS > 0 (an unbounded run has no schedule to group calls by)")
	case (c.Record || c.Vary != nil || c.Client != nil || c.Context != nil) && c.RPS == 0:
		return errors.New("load: Record, Vary, Client and Context need RPS > 0 (an unbounded run has no arrival order)")
	}
	return nil
}

// duration is how long calls may arrive.
func (c Config) duration() time.Duration {
	if c.Duration == 0 {
		return MaxDuration
	}
	return c.Duration
}

// calls returns how many calls a rate run makes: its arrivals at 0,
// 1/RPS, ... strictly before duration, at most Calls.
func (c Config) calls() int {
	n := int(math.Ceil(c.duration().Seconds()*c.RPS - 1e-9))
	if c.Calls > 0 {
		n = min(n, c.Calls)
	}
	return min(max(n, 1), MaxCalls)
}

// result is one call's outcome as the Report counts it.
type result struct {
	Record
	attempts  int
	late      bool   // started more than a millisecond after its arrival
	exception string // names an APPLICATION error (Config.Exception)
}

// Run makes the calls cfg describes through cl and reports on them:
// RunClients with one Client.
func Run(ctx context.Context, cl *channel.Client, cfg Config) (*Report, error) {
	return RunClients(ctx, []*channel.Client{cl}, cfg)
}

// RunClients makes the calls cfg describes through cls, Clients of one
// service that know its peers, and reports on them: a rate run sends call
// i through cls[i % len(cls)]; an unbounded run keeps cfg.Concurrency
// calls in flight on each. The run stops early when ctx ends.
func RunClients(ctx context.Context, cls []*channel.Client, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(cls) == 0 {
		return nil, errors.New("load: no Client to call through")
	}
	for i, cl := range cls {
		switch {
		case cl == nil:
			return nil, fmt.Errorf("load: Client %d is nil", i)
		case cl.Service() != cls[0].Service():
			return nil, fmt.Errorf("load: Client %d calls service %q, Client 0 %q: a run calls one service", i, cl.Service(), cls[0].Service())
		}
	}
	run, concurrency, channels := runRate, 100, 1
	if cfg.RPS == 0 {
		run, concurrency, channels = runUnbounded, 1, len(cls)
	}
	cfg.Concurrency = cmp.Or(cfg.Concurrency, concurrency)
	inFlight := cfg.Concurrency * channels
	if inFlight > MaxConcurrency {
		return nil, fmt.Errorf("load: %d channels x Concurrency %d calls in flight, more than %d", len(cls), cfg.Concurrency, MaxConcurrency)
	}
	cfg.Timeout = cmp.Or(cfg.Timeout, time.Second)
	cfg.Request = cmp.Or(cfg.Request, &channel.Request{Format: "raw"})
	warm := warmup(ctx, cls, cfg)
	ledger := newPeerLedger(cls)
	r, t := run(ctx, cls, cfg)
	ledger.stop()
	ledger.read() // the counts at the run's end
	r.Connections, r.Concurrency, r.MaxInFlight, r.WarmupCalls = len(cls), cfg.Concurrency, inFlight, warm
	r.fillPeers(ledger, t)
	return r, nil
}

// call makes one call of req with opts through cl and returns its
// outcome; the caller fills in its latency and arrival.
func call(ctx context.Context, cl *channel.Client, cfg *Config, req *channel.Request, opts []channel.CallOption) result {
	cctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	res, err := cl.Call(cctx, cfg.Method, req, opts...)
	switch {
	case err != nil:
		r := result{Record: Record{Code: CodeOf(err)}}
		if ce := (*channel.CallError)(nil); errors.As(err, &ce) {
			r.attempts, r.Local, r.Peer = ce.Attempts, ce.Code.IsLocal(), ce.Peer
		}
		return r
	case res.AppError: // a JSON app error or a Thrift exception: answered, counted apart
		r := result{Record: Record{Code: "APPLICATION", Peer: res.Peer}, attempts: res.Attempts}
		if cfg.Exception != nil {
			r.exception = cfg.Exception(res)
		}
		return r
	}
	return result{Record: Record{Peer: res.Peer}, attempts: res.Attempts}
}

// warmup makes cfg.Warmup calls one at a time on each channel, the
// channels side by side, a channel's ending at a call warmupEnds; it
// returns how many calls it made in all.
func warmup(ctx context.Context, cls []*channel.Client, cfg Config) int {
	var made atomic.Int64
	var wg sync.WaitGroup
	for _, cl := range cls {
		wg.Go(func() {
			for i := 0; i < cfg.Warmup && ctx.Err() == nil; i++ {
				made.Add(1)
				if warmupEnds(call(ctx, cl, &cfg, cfg.Request, cfg.CallOptions)) {
					return
				}
			}
		})
	}
	wg.Wait()
	return int(made.Load())
}

// warmupEnds reports whether r, a warmup call's outcome, says the peers
// are unreachable or overloaded: refused in this process, no answer or a
// broken connection, BUSY or DECLINED. Any other answer comes from a
// server that handled the call, and the warmup goes on.
func warmupEnds(r result) bool {
	switch r.Code {
	case "TIMEOUT", "NETWORK", "PROTOCOL", "BUSY", "DECLINED", "LOCAL":
		return true
	}
	return r.Local
}

// runRate makes a rate run: open loop, each call in a goroutine of its
// own, its latency from its scheduled arrival. It returns the Report and
// the tally it was made of.
func runRate(ctx context.Context, cls []*channel.Client, cfg Config) (*Report, *tally) {
	n := cfg.calls()
	results := make([]result, n)
	slots := make(chan struct{}, cfg.Concurrency) // a token per call in flight
	interval := time.Duration(float64(time.Second) / cfg.RPS)
	timer := time.NewTimer(time.Hour) // reset before each wait below
	defer timer.Stop()
	start := time.Now()
	var totals counts
	stopProgress := progress(cfg, start, &totals)
	var wg sync.WaitGroup
	started := 0
schedule:
	for ; started < n; started++ {
		i, at := started, start.Add(time.Duration(started)*interval)
		if wait := time.Until(at); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				break schedule
			}
			// The timer's oversleep is the generator's, not the call's.
			at = time.Now()
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			break schedule
		}
		req, opts, cl, cctx := cfg.Request, cfg.CallOptions, cls[i%len(cls)], ctx
		if cfg.Vary != nil {
			req, opts = cfg.Vary(i)
		}
		if cfg.Client != nil {
			k := cfg.Client(i)
			if k < 0 || k >= len(cls) {
				panic(fmt.Sprintf("load: Config.Client gave call %d Client %d, want one in [0, %d)", i, k, len(cls)))
			}
			cl = cls[k]
		}
		if cfg.Context != nil {
			cctx = cfg.Context(ctx, i)
		}
		wg.Go(func() {
			late := time.Since(at) > time.Millisecond
			r := call(cctx, cl, &cfg, req, opts)
			r.Latency, r.late, r.At = time.Since(at), late, at.Sub(start)
			results[i] = r
			totals.add(r)
			<-slots
		})
	}
	wg.Wait()
	stopProgress()
	elapsed := time.Since(start) // before the tallies, which a big run takes a while to make
	rs := results[:started]
	t := newTally(true, cfg.PerPeer)
	for _, c := range rs {
		t.add(c, c.Latency)
	}
	r := t.report(elapsed)
	r.Mode, r.OfferedRPS, r.Start = ModeRate, new(cfg.RPS), start
	if cfg.Timeline {
		r.Timeline = timeline(rs)
	}
	if cfg.Record {
		r.Records = make([]Record, len(rs))
		for i, c := range rs {
			r.Records[i] = c.Record
		}
	}
	return r, t
}

// caller is one of an unbounded run's callers: what it recorded, and its
// running totals for Progress, padded against false sharing.
type caller struct {
	counts
	all *tally
	_   [64]byte
}

// runUnbounded makes an unbounded run: cfg.Concurrency goroutines per
// channel, each making one call after another until the run stops; the
// latencies go in the callers' histograms. It returns what runRate does.
func runUnbounded(ctx context.Context, cls []*channel.Client, cfg Config) (*Report, *tally) {
	var stop atomic.Bool
	var next atomic.Int64
	callers := make([]*caller, len(cls)*cfg.Concurrency)
	totals := make([]*counts, len(callers))
	for i := range callers {
		callers[i] = &caller{all: newTally(false, cfg.PerPeer)}
		totals[i] = &callers[i].counts
	}
	start := time.Now()
	deadline := time.AfterFunc(cfg.duration(), func() { stop.Store(true) })
	defer deadline.Stop()
	stopProgress := progress(cfg, start, totals...)
	var wg sync.WaitGroup
	for i, w := range callers {
		wg.Go(func() {
			// The end of ctx is polled before each call: calls failing at
			// once on an ended context would race a context.AfterFunc.
			for !stop.Load() && ctx.Err() == nil && (cfg.Calls == 0 || next.Add(1) <= int64(cfg.Calls)) {
				t0 := time.Now()
				r := call(ctx, cls[i%len(cls)], &cfg, cfg.Request, cfg.CallOptions)
				w.all.add(r, time.Since(t0))
				w.counts.add(r)
			}
		})
	}
	wg.Wait()
	stopProgress()
	elapsed := time.Since(start)
	all := newTally(false, cfg.PerPeer)
	for _, w := range callers {
		all.merge(w.all)
	}
	r := all.report(elapsed)
	r.Mode = ModeUnbounded
	return r, all
}

// progress calls cfg.Progress every cfg.ProgressEvery (a second by
// default) with totals, the calls returned so far, on a goroutine of its
// own until the returned stop, which reports once more if a period ended.
func progress(cfg Config, start time.Time, totals ...*counts) (stop func()) {
	if cfg.Progress == nil {
		return func() {}
	}
	every := cmp.Or(cfg.ProgressEvery, time.Second)
	next, prev := every, Progress{}
	report := func(now time.Time) {
		el := now.Sub(start)
		if el < next {
			return
		}
		next = (el/every + 1) * every // the first period end after el
		p := Progress{Elapsed: el}
		for _, c := range totals {
			p.OK += int(c.sets[setOK].Load())
			p.Failed += int(c.sets[setFailed].Load())
			p.Refused += int(c.sets[setRefused].Load())
		}
		p.Calls = p.OK + p.Failed + p.Refused
		p.Rate = float64(p.Calls-prev.Calls) / (el - prev.Elapsed).Seconds()
		prev = p
		cfg.Progress(p)
	}
	stopTicks := Every(every, report)
	return func() {
		stopTicks()
		report(time.Now())
	}
}

// CodeOf names a failed call's outcome as the benchmarks count it: the
// TChannel code ("BUSY"), or THROTTLED, NO_PEERS, RATE_LIMITED,
// UNAVAILABLE or LOCAL (channel.CallError.CodeName).
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
