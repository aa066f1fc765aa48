package load

import (
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
	// Method is called, on the service of the Clients Run is given.
	// Required.
	Method string
	// Request is what every call sends: raw, JSON or Thrift (Format
	// tchannel.Thrift, Arg3 the encoded arguments struct, Method
	// "Service::method"). Run never modifies it: the calls share it.
	// Default: a raw call with an empty body.
	Request *channel.Request
	// CallOptions go with every call (a shard key, a caller name, ...).
	CallOptions []channel.CallOption
	// Vary, if not nil, gives call i of a rate run (from 0, in arrival
	// order) its own request and call options, in place of Request and
	// CallOptions: a key of its own, say. Run calls it on its scheduling
	// goroutine, one call at a time, as call i arrives; it must not keep
	// Run waiting. Warmup calls send Request and CallOptions.
	Vary func(i int) (*channel.Request, []channel.CallOption)
	// Client, if not nil, gives call i of a rate run (as Vary) the Client
	// it goes through, an index into RunClients' Clients, in place of
	// i % len(Clients): callers of different rates, each a Channel of its
	// own, say. It must return an index in range (Run panics on one that
	// is not, a bug in the caller). Run calls it as it calls Vary.
	Client func(i int) int
	// Context, if not nil, gives call i of a rate run (as Vary) the
	// context it is made with, which must derive from ctx, Run's (so that
	// the end of Run's ends the call): a criticality class of its own,
	// say (criticality.WithClass). The call's deadline is set on it. Run
	// calls it as it calls Vary. Warmup calls use Run's context.
	Context func(ctx context.Context, i int) context.Context
	// RPS is the arrival rate, calls per second: call i arrives at i/RPS
	// seconds after the start, whether or not earlier calls have returned
	// (open loop). 0 makes the run unbounded: on each channel Concurrency
	// calls are in flight, and each starts as soon as one returns (closed
	// loop), as fast as the servers and the client allow. In [0, MaxRPS].
	RPS float64
	// Duration is how long calls arrive (or, unbounded, start), Calls how
	// many; give either or both (the run stops at whichever comes first).
	// A run lasts at most MaxDuration; a rate run makes at most MaxCalls
	// calls, an unbounded run with Calls too.
	Duration time.Duration
	Calls    int
	// Concurrency bounds the calls in flight. In a rate run it is the most
	// calls in flight in all, over every channel: an arrival beyond it
	// waits for a slot, and that wait counts in its latency (default 100).
	// In an unbounded run it is the calls in flight on each channel
	// (default 1, as yab's --concurrency). At most MaxConcurrency calls in
	// flight in all.
	Concurrency int
	// Timeout is each call's deadline, all attempts included. Default 1s;
	// at most MaxTimeout.
	Timeout time.Duration
	// Warmup calls are made one at a time on each channel before the run
	// (to open connections and prime adaptive hedging) and left out of the
	// Report but for their number (Report.WarmupCalls). A channel's warmup
	// ends at its first call that finds the peers unreachable or
	// overloaded (warmupEnds: TIMEOUT, NETWORK, PROTOCOL, BUSY, DECLINED,
	// or refused in this process): against a peer that never answers,
	// Warmup calls would each run out Timeout before the run even starts,
	// and the run reports the failure anyway. A call that was answered,
	// with an application error or UNEXPECTED or BAD_REQUEST, does not end
	// it: a service that answers errors is reachable, and warms up.
	Warmup int
	// Progress, if not nil, is called with the run's totals once every
	// ProgressEvery (default 1s) while calls arrive or are in flight. It
	// runs on Run's goroutine, which it holds up: keep it short. A period
	// that ends while Run cannot report (its goroutine held up) is reported
	// as soon as it can, at the latest before Run returns, so a run that
	// lasts n periods reports at least once if n >= 1.
	Progress      func(Progress)
	ProgressEvery time.Duration
	// Timeline asks for Report.Timeline, the run second by second (rate
	// runs only).
	Timeline bool
	// Record asks for Report.Records, every call of the run in arrival
	// order (rate runs only).
	Record bool
	// PerPeer asks for Report.PerPeer, the calls by the peer that ended
	// them (yab's --per-peer-stats).
	PerPeer bool
	// Exception, if not nil, names the application error of a response
	// (Response.AppError): a Thrift exception's type, say; "" leaves it
	// unnamed. Report.Exceptions counts the names. It runs on the caller's
	// goroutine for every application error: keep it cheap.
	Exception func(res *channel.Response) string
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

// calls returns how many calls a rate run makes.
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
	peer     string // the host:port that answered, or of the last attempt
	// exception names an APPLICATION error (Config.Exception), "" if none.
	exception string
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

// Run makes the calls cfg describes through cl and reports on them:
// RunClients with one Client.
func Run(ctx context.Context, cl *channel.Client, cfg Config) (*Report, error) {
	return RunClients(ctx, []*channel.Client{cl}, cfg)
}

// RunClients makes the calls cfg describes through cls, Clients of one
// service, each of a Channel of its own, and reports on them: a rate run
// sends call i through cls[i % len(cls)]; an unbounded run keeps
// cfg.Concurrency calls in flight on each. Each Client must already know
// the service's peers. The run stops early, with the calls made so far,
// when ctx ends; RunClients returns once every call it started has
// returned.
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
	unbounded := cfg.RPS == 0
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 100
		if unbounded {
			cfg.Concurrency = 1
		}
	}
	inFlight := cfg.Concurrency
	if unbounded {
		if cfg.Concurrency*len(cls) > MaxConcurrency {
			return nil, fmt.Errorf("load: %d channels x Concurrency %d calls in flight, more than %d", len(cls), cfg.Concurrency, MaxConcurrency)
		}
		inFlight *= len(cls)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = time.Second
	}
	if cfg.Request == nil {
		cfg.Request = &channel.Request{Format: "raw"}
	}
	warm := warmup(ctx, cls, cfg)
	ledger := newPeerLedger(cls)
	ledger.watch()
	var r *Report
	var tallies map[string]*peerTally
	if unbounded {
		r, tallies = runUnbounded(ctx, cls, cfg)
		r.Mode = ModeUnbounded
	} else {
		var rs []result
		r, rs = runRate(ctx, cls, cfg)
		r.Mode = ModeRate
		rps := cfg.RPS
		r.OfferedRPS = &rps
		if cfg.PerPeer {
			tallies = tallyPeers(rs)
		}
	}
	ledger.finish()
	r.Connections, r.Concurrency, r.MaxInFlight = len(cls), cfg.Concurrency, inFlight
	r.WarmupCalls = warm
	r.fillPeers(ledger, tallies)
	return r, nil
}

// call makes one call of req with opts through cl and returns its
// outcome, but for its latency and arrival.
func call(ctx context.Context, cl *channel.Client, cfg *Config, req *channel.Request, opts []channel.CallOption) result {
	cctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	res, err := cl.Call(cctx, cfg.Method, req, opts...)
	if err != nil {
		var ce *channel.CallError
		r := result{attempts: attemptsOf(err), code: CodeOf(err)}
		if errors.As(err, &ce) {
			r.local, r.peer = ce.Code.IsLocal(), ce.Peer
		}
		return r
	}
	if res.AppError { // a JSON app error or a Thrift exception: answered, counted apart
		r := result{attempts: res.Attempts, code: "APPLICATION", peer: res.Peer}
		if cfg.Exception != nil {
			r.exception = cfg.Exception(res)
		}
		return r
	}
	return result{attempts: res.Attempts, peer: res.Peer}
}

// warmup makes cfg.Warmup calls one at a time on each channel, the
// channels side by side, a channel's ending at a call warmupEnds; it
// returns how many calls it made in all.
func warmup(ctx context.Context, cls []*channel.Client, cfg Config) int {
	if cfg.Warmup == 0 {
		return 0
	}
	var made atomic.Int64
	var wg sync.WaitGroup
	for _, cl := range cls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < cfg.Warmup && ctx.Err() == nil; i++ {
				r := call(ctx, cl, &cfg, cfg.Request, cfg.CallOptions)
				made.Add(1)
				if warmupEnds(r) {
					return
				}
			}
		}()
	}
	wg.Wait()
	return int(made.Load())
}

// warmupEnds reports whether r, a warmup call's outcome, says the peers
// are unreachable or overloaded, so that more warmup calls would only
// wait out their deadlines or add to the load: refused in this process
// (UNAVAILABLE, THROTTLED, NO_PEERS, RATE_LIMITED, LOCAL), no answer in
// time or a broken connection (TIMEOUT, NETWORK, PROTOCOL), or an answer
// that the server is overloaded (BUSY, DECLINED). A success or any other
// answer (APPLICATION, UNEXPECTED, BAD_REQUEST, CANCELLED) comes from a
// server that handled the call, and the warmup goes on.
func warmupEnds(r result) bool {
	if r.local {
		return true
	}
	switch r.code {
	case "TIMEOUT", "NETWORK", "PROTOCOL", "BUSY", "DECLINED", "LOCAL":
		return true
	}
	return false
}

// runRate makes a rate run: open loop, each call in a goroutine of its
// own, its latency from its scheduled arrival.
func runRate(ctx context.Context, cls []*channel.Client, cfg Config) (*Report, []result) {
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
	tick, report, stopTicks := progress(cfg, start, func() (ok, failed, refused int64) {
		return totals.ok.Load(), totals.failed.Load(), totals.refused.Load()
	})
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
		req, opts := cfg.Request, cfg.CallOptions
		if cfg.Vary != nil {
			req, opts = cfg.Vary(i)
		}
		cl := cls[i%len(cls)]
		if cfg.Client != nil {
			k := cfg.Client(i)
			if k < 0 || k >= len(cls) {
				panic(fmt.Sprintf("load: Config.Client gave call %d Client %d, want one in [0, %d)", i, k, len(cls)))
			}
			cl = cls[k]
		}
		cctx := ctx
		if cfg.Context != nil {
			cctx = cfg.Context(ctx, i)
		}
		go func(i int, at time.Time) {
			late := time.Since(at) > lateAfter
			r := call(cctx, cl, &cfg, req, opts)
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
	r := summarize(results[:started], elapsed)
	r.Start = start
	if cfg.Timeline {
		r.Timeline = timeline(results[:started])
	}
	if cfg.Record {
		r.Records = records(results[:started])
	}
	return r, results[:started]
}

// caller is one of an unbounded run's callers: what it recorded, and its
// running totals for Progress. Each caller is allocated on its own and
// padded, so that callers on different cores do not share cache lines.
type caller struct {
	ok, failed, refused atomic.Int64
	lat                 [3]hist // ok, failed, refused
	attempts            int
	errors              map[string]int
	exceptions          map[string]int
	peers               map[string]*peerTally // with Config.PerPeer
	_                   [64]byte
}

// runUnbounded makes an unbounded run: cfg.Concurrency goroutines per
// channel, each making one call after another until the run stops (its
// Calls made, its Duration or MaxDuration passed, or ctx ended). A call
// costs its context's deadline timer and two clock readings; its latency
// goes in the caller's histograms (with cfg.PerPeer, its peer's too,
// returned by peer).
func runUnbounded(ctx context.Context, cls []*channel.Client, cfg Config) (*Report, map[string]*peerTally) {
	var stop atomic.Bool
	var next atomic.Int64
	limit := int64(cfg.Calls)
	d := cfg.Duration
	if d == 0 {
		d = MaxDuration
	}
	callers := make([]*caller, 0, len(cls)*cfg.Concurrency)
	for range cap(callers) {
		w := &caller{errors: map[string]int{}, exceptions: map[string]int{}}
		if cfg.PerPeer {
			w.peers = map[string]*peerTally{}
		}
		callers = append(callers, w)
	}
	start := time.Now()
	deadline := time.AfterFunc(d, func() { stop.Store(true) })
	defer deadline.Stop()
	// The end of ctx is checked before each call, synchronously: a
	// context.AfterFunc would set stop from a goroutine of its own, and
	// the calls, failing at once on the ended context, would go on until
	// it ran. A poll of a channel that is not closed costs nothing.
	ended := ctx.Done()
	var wg sync.WaitGroup
	for i, w := range callers {
		cl := cls[i%len(cls)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				select {
				case <-ended:
					return
				default:
				}
				if limit > 0 && next.Add(1) > limit {
					return
				}
				t0 := time.Now()
				r := call(ctx, cl, &cfg, cfg.Request, cfg.CallOptions)
				lat := time.Since(t0)
				w.attempts += r.attempts
				if w.peers != nil && r.peer != "" {
					t := w.peers[r.peer]
					if t == nil {
						t = &peerTally{}
						w.peers[r.peer] = t
					}
					t.add(r, lat, true)
				}
				switch {
				case r.code == "":
					w.lat[0].add(lat)
					w.ok.Add(1)
					continue
				case r.local:
					w.lat[2].add(lat)
					w.refused.Add(1)
				default:
					w.lat[1].add(lat)
					w.failed.Add(1)
				}
				w.errors[r.code]++
				if r.exception != "" {
					w.exceptions[r.exception]++
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	tick, report, stopTicks := progress(cfg, start, func() (ok, failed, refused int64) {
		for _, w := range callers {
			ok, failed, refused = ok+w.ok.Load(), failed+w.failed.Load(), refused+w.refused.Load()
		}
		return ok, failed, refused
	})
	defer stopTicks()
	for waiting := true; waiting; {
		select {
		case <-done:
			waiting = false
		case now := <-tick:
			report(now)
		}
	}
	report(time.Now())
	elapsed := time.Since(start)

	var lat [3]hist
	r := &Report{Elapsed: Seconds(elapsed), Errors: map[string]int{}}
	exceptions := map[string]int{}
	var tallies map[string]*peerTally
	if cfg.PerPeer {
		tallies = map[string]*peerTally{}
	}
	for _, w := range callers {
		for k := range lat {
			lat[k].merge(&w.lat[k])
		}
		r.Attempts += w.attempts
		for code, n := range w.errors {
			r.Errors[code] += n
		}
		for e, n := range w.exceptions {
			exceptions[e] += n
		}
		for p, t := range w.peers {
			if tallies[p] == nil {
				tallies[p] = &peerTally{}
			}
			tallies[p].merge(t)
		}
	}
	r.Exceptions = exceptionCounts(exceptions)
	r.OK, r.Failed, r.Refused = int(lat[0].n), int(lat[1].n), int(lat[2].n)
	r.Calls = r.OK + r.Failed + r.Refused
	r.Latency, r.FailedLatency, r.RefusedLatency = lat[0].quantiles(), lat[1].quantiles(), lat[2].quantiles()
	r.fillRates()
	return r, tallies
}

// progress returns the ticker channel of cfg.Progress's reports (nil,
// never ready, without one), the function that reports if a period has
// ended since the last report, and the one that stops the ticker. totals
// returns the calls returned so far.
func progress(cfg Config, start time.Time, totals func() (ok, failed, refused int64)) (<-chan time.Time, func(now time.Time), func()) {
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
		ok, failed, refused := totals()
		p := Progress{Elapsed: el, OK: int(ok), Failed: int(failed), Refused: int(refused)}
		p.Calls = p.OK + p.Failed + p.Refused
		p.Rate = float64(p.Calls-prev.Calls) / (el - prev.Elapsed).Seconds()
		prev = p
		cfg.Progress(p)
	}, t.Stop
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
