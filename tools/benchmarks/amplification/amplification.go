// Package amplification measures how retries multiply a failing
// service's load across a call graph, with and without Sluice's bounds on
// it (the chained-retries rule, the retry budget, deadline refusals):
// `sluice bench --amplification`.
//
// An embedded chain runs on 127.0.0.1: client -> A -> B -> leaf, each
// layer retrying UNEXPECTED (maxAttempts 3), under an open-loop rate of
// calls. The leaves are down, flaky, down then well (recovery), or slow
// and flaky under a tight deadline (deadline). Mode naive turns the
// bounds off; bounded is Sluice's defaults.
package amplification

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/sluice-rpc/sluice/serviceconfig"
	"github.com/sluice-rpc/sluice/stats"
	"github.com/sluice-rpc/sluice/tools/internal/benchrun"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
	"github.com/uber-go/tally/v4"
	"github.com/uber/tchannel-go"
)

// Scenario is what the leaves do.
type Scenario string

// The scenarios.
const (
	Down     Scenario = "down"
	Flaky    Scenario = "flaky"
	Recovery Scenario = "recovery"
	Deadline Scenario = "deadline"
)

// Scenarios lists every scenario, in the order they run.
var Scenarios = []Scenario{Down, Flaky, Recovery, Deadline}

// Mode is how every layer's Channel is configured.
type Mode string

// The modes: without the amplification bounds, and Sluice's defaults.
const (
	Naive   Mode = "naive"
	Bounded Mode = "bounded"
)

// Modes lists the modes, in the order they run.
var Modes = []Mode{Naive, Bounded}

// ParseScenarios parses a comma-separated list of scenarios, or "all";
// naming one twice is an error.
func ParseScenarios(s string) ([]Scenario, error) {
	out, err := benchrun.ParseList(s, Scenarios, "scenario")
	switch {
	case err != nil:
		return nil, fmt.Errorf("amplification: %w", err)
	case strings.TrimSpace(s) != "all" && len(out) <= strings.Count(s, ","):
		return nil, fmt.Errorf("amplification: a scenario named twice in %q", s)
	}
	return out, nil
}

// Config configures a comparison. Zero fields take their defaults.
type Config struct {
	Scenarios []Scenario      `json:"scenarios"`
	Rate      float64         `json:"rate"`              // the client's calls per second; default 600
	Duration  millis.Duration `json:"duration_ms"`       // of each run (recovery: after DownFor); default 4s
	DownFor   millis.Duration `json:"down_for_ms"`       // the leaves' downtime in recovery; default 2s
	FlakyRate float64         `json:"flaky_rate"`        // the share of calls a flaky leaf fails; default 0.1
	Servers   int             `json:"servers_per_layer"` // default 3
	Timeout   millis.Duration `json:"timeout_ms"`        // each client call's deadline; default 1s
	Policy    string          `json:"policy"`            // every layer's retry policy (service config JSON)
	Seed      uint64          `json:"seed"`              // of the flaky leaves' draws; default 1
	// In the deadline scenario a leaf works Work (default 10ms) and then
	// fails DeadlineFailRate (default 0.2) of calls, each with a deadline
	// of DeadlineTimeout (default 3 x Work: room for one retry, not two).
	Work             millis.Duration `json:"work_ms"`
	DeadlineTimeout  millis.Duration `json:"deadline_timeout_ms"`
	DeadlineFailRate float64         `json:"deadline_fail_rate"`
	Progress         func(string)    `json:"-"` // if set, told each run as it starts
}

// CI is a tiny configuration, for tests.
func CI() Config {
	return Config{Rate: 200, Duration: millis.Duration(500 * time.Millisecond), DownFor: millis.Duration(300 * time.Millisecond)}
}

// DefaultPolicy retries UNEXPECTED, three attempts in all, with a short
// backoff.
const DefaultPolicy = `{"methodConfig":[{"name":[{"service":"amp-a"},{"service":"amp-b"},{"service":"amp-leaf"}],
 "retryPolicy":{"maxAttempts":3,"initialBackoff":"0.005s","maxBackoff":"0.02s","backoffMultiplier":2,"retryableStatusCodes":["UNEXPECTED"]}}]}`

// Bounds of Config.
const (
	MaxRate     = 5000
	MaxDuration = time.Minute
	MaxServers  = 8
)

func (c Config) withDefaults() Config {
	if len(c.Scenarios) == 0 {
		c.Scenarios = slices.Clone(Scenarios)
	}
	benchrun.Default(&c.Rate, 600)
	benchrun.Default(&c.Duration, millis.Duration(4*time.Second))
	benchrun.Default(&c.DownFor, millis.Duration(2*time.Second))
	benchrun.Default(&c.FlakyRate, 0.1)
	benchrun.Default(&c.Servers, 3)
	benchrun.Default(&c.Timeout, millis.Duration(time.Second))
	benchrun.Default(&c.Policy, DefaultPolicy)
	benchrun.Default(&c.Seed, 1)
	benchrun.Default(&c.Work, millis.Duration(10*time.Millisecond))
	benchrun.Default(&c.DeadlineTimeout, 3*c.Work)
	benchrun.Default(&c.DeadlineFailRate, 0.2)
	return c
}

// Validate reports the first field out of its bounds.
func (c Config) Validate() error {
	switch {
	case !(c.Rate >= 0 && c.Rate <= MaxRate):
		return fmt.Errorf("amplification: rate %v, must be in (0, %d]", c.Rate, MaxRate)
	case c.Duration < 0 || c.Duration.D() > MaxDuration || c.DownFor < 0 || c.DownFor.D() > MaxDuration:
		return fmt.Errorf("amplification: durations must be in (0, %v]", MaxDuration)
	case !(c.FlakyRate >= 0 && c.FlakyRate < 1):
		return fmt.Errorf("amplification: flaky rate %v, must be in (0, 1)", c.FlakyRate)
	case !(c.DeadlineFailRate >= 0 && c.DeadlineFailRate < 1):
		return fmt.Errorf("amplification: deadline fail rate %v, must be in (0, 1)", c.DeadlineFailRate)
	case c.Servers < 0 || c.Servers > MaxServers:
		return fmt.Errorf("amplification: %d servers per layer, must be in [1, %d]", c.Servers, MaxServers)
	case c.Timeout < 0:
		return fmt.Errorf("amplification: timeout %v, must be > 0", c.Timeout)
	case c.Work < 0 || c.Work.D() > time.Second:
		return fmt.Errorf("amplification: work %v, must be in (0, 1s]", c.Work)
	case c.DeadlineTimeout < 0 || c.DeadlineTimeout.D() > MaxDuration:
		return fmt.Errorf("amplification: deadline timeout %v, must be in (0, %v]", c.DeadlineTimeout, MaxDuration)
	}
	if c.Policy != "" {
		if _, err := serviceconfig.Parse([]byte(c.Policy)); err != nil {
			return fmt.Errorf("amplification: policy: %w", err)
		}
	}
	return nil
}

// Result is a whole comparison.
type Result struct {
	Config Config `json:"config"`
	Rows   []Row  `json:"rows"`
}

// Row is what one run (scenario, mode) measured.
type Row struct {
	Scenario Scenario `json:"scenario"`
	Mode     Mode     `json:"mode"`
	// Calls is the client calls made (in the deadline scenario, after its
	// warm-up); Success the share that succeeded.
	Calls   int     `json:"calls"`
	Success float64 `json:"success"`
	// The requests the leaves, A and B received per client call.
	LeafPerCall float64 `json:"leaf_per_call"`
	APerCall    float64 `json:"a_per_call"`
	BPerCall    float64 `json:"b_per_call"`
	// RecoverMS (recovery only) is the time from the leaves' return to the
	// first 100 ms of arrivals from which every 100 ms had 95% succeed;
	// null if none.
	RecoverMS *float64 `json:"recover_ms"`
	// Deadline scenario only, counted after its warm-up (deadlineWarmup):
	// the attempts any layer sent with less than Config.Work left
	// (LateRetries: those that were retries or hedges), the handler runs
	// begun so late, and the Channels' metrics of attempts skipped and
	// requests refused for want of time.
	LateAttempts    *int64 `json:"late_attempts"`
	LateRetries     *int64 `json:"late_retries"`
	LateRuns        *int64 `json:"late_runs"`
	SkippedDeadline *int64 `json:"skipped_deadline"`
	RefusedDeadline *int64 `json:"refused_deadline"`
}

// Run runs every scenario in both modes.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	res := &Result{Config: cfg}
	for _, sc := range cfg.Scenarios {
		for _, m := range Modes {
			if cfg.Progress != nil {
				cfg.Progress(fmt.Sprintf("%s, %s", sc, m))
			}
			row, err := runOne(ctx, cfg, sc, m)
			if err != nil {
				return res, err
			}
			res.Rows = append(res.Rows, row)
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
		}
	}
	return res, nil
}

// leaf states.
const (
	leafWell int32 = iota
	leafDown
	leafFlaky
)

var errBroken = tchannel.NewSystemError(tchannel.ErrCodeUnexpected, "leaf broken")

// chain is one run's servers and client.
type chain struct {
	channels []*channel.Channel
	client   *channel.Client
	state    atomic.Int32
	leaf     atomic.Int64
	a, b     atomic.Int64
	mu       sync.Mutex
	rng      *rand.Rand
	flaky    float64
	// The deadline scenario's leaf work, late counts and metrics.
	work         time.Duration
	lateAttempts atomic.Int64
	lateRetries  atomic.Int64
	lateRuns     atomic.Int64
	scope        tally.TestScope
}

// late reports whether ctx has less than the chain's work left.
func (ch *chain) late(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && time.Until(dl) < ch.work
}

// close closes the Channels, the client's first; closing again does
// nothing.
func (ch *chain) close() {
	for i := len(ch.channels) - 1; i >= 0; i-- {
		ch.channels[i].Close()
	}
}

// connect returns c's client of service, with peers.
func connect(c *channel.Channel, service string, peers []string) (*channel.Client, error) {
	client, err := c.NewClient(service)
	for _, hp := range peers {
		if err == nil {
			err = client.AddPeer(hp)
		}
	}
	return client, err
}

func startChain(cfg Config, mode Mode, sc *serviceconfig.Config, scenario Scenario) (_ *chain, err error) {
	ch := &chain{rng: rand.New(rand.NewPCG(cfg.Seed, 0x616d70)), flaky: cfg.FlakyRate}
	defer func() {
		if err != nil {
			ch.close()
		}
	}()
	opts := []channel.Option{channel.WithServiceConfig(sc), channel.WithDefaultTimeout(cfg.Timeout.D())}
	if mode == Naive {
		opts = append(opts, channel.WithRetries(channel.RetryConfig{Chained: true, Budget: retry.BudgetConfig{Disabled: true}}),
			channel.WithShedding(channel.ShedConfig{NoDeadlineRefusals: true}))
	}
	if scenario == Deadline {
		// One scope for every Channel, so that metrics sum over the chain.
		ch.work, ch.flaky = cfg.Work.D(), cfg.DeadlineFailRate
		ch.scope = tally.NewTestScope("", nil)
		opts = append(opts, channel.WithScope(ch.scope),
			channel.WithAttemptMiddleware(func(ctx context.Context, a *channel.Attempt, next channel.AttemptInvoker) (*channel.Response, error) {
				if ch.late(ctx) {
					ch.lateAttempts.Add(1)
					if a.Number > 0 {
						ch.lateRetries.Add(1)
					}
				}
				return next(ctx, a)
			}),
			channel.WithInboundMiddleware(func(ctx context.Context, in *channel.Inbound, next func(context.Context) error) error {
				if ch.late(ctx) {
					ch.lateRuns.Add(1)
				}
				return next(ctx)
			}))
	}
	// From the leaves up, each layer's servers calling the layer below.
	below, peers := "", []string(nil)
	for _, l := range []struct {
		service string
		count   *atomic.Int64 // nil: the leaves, which count in serveLeaf
	}{{"amp-leaf", nil}, {"amp-b", &ch.b}, {"amp-a", &ch.a}} {
		var hps []string
		for range cfg.Servers {
			c, err := channel.New(l.service, opts...)
			if err != nil {
				return nil, err
			}
			ch.channels = append(ch.channels, c)
			h := ch.serveLeaf
			if l.count != nil {
				down, err := connect(c, below, peers)
				if err != nil {
					return nil, err
				}
				h = func(ctx context.Context, req *channel.RawRequest) (*channel.RawResponse, error) {
					l.count.Add(1)
					res, err := down.CallRaw(ctx, "work", nil, req.Arg3)
					if err != nil {
						return nil, err
					}
					return &channel.RawResponse{Arg3: res.Arg3}, nil
				}
			}
			if err := c.RegisterRaw("work", h); err != nil {
				return nil, err
			}
			if err := c.ListenAndServe("127.0.0.1:0"); err != nil {
				return nil, err
			}
			hps = append(hps, c.HostPort())
		}
		below, peers = l.service, hps
	}
	c, err := channel.New("amp-client", opts...)
	if err != nil {
		return nil, err
	}
	ch.channels = append(ch.channels, c)
	ch.client, err = connect(c, below, peers)
	return ch, err
}

func (ch *chain) serveLeaf(ctx context.Context, req *channel.RawRequest) (*channel.RawResponse, error) {
	ch.leaf.Add(1)
	if ch.work > 0 {
		t := time.NewTimer(ch.work)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	switch ch.state.Load() {
	case leafDown:
		return nil, errBroken
	case leafFlaky:
		ch.mu.Lock()
		fail := ch.rng.Float64() < ch.flaky
		ch.mu.Unlock()
		if fail {
			return nil, errBroken
		}
	}
	return &channel.RawResponse{Arg3: req.Arg3}, nil
}

// maxInFlight bounds the client's calls in flight; one beyond it fails.
const maxInFlight = 4000

// bucket is the width of recovery's goodput measure.
const bucket = 100 * time.Millisecond

func runOne(ctx context.Context, cfg Config, sc Scenario, mode Mode) (Row, error) {
	row := Row{Scenario: sc, Mode: mode}
	scfg, err := serviceconfig.Parse([]byte(cfg.Policy))
	if err != nil {
		return row, err
	}
	ch, err := startChain(cfg, mode, scfg, sc)
	if err != nil {
		return row, err
	}
	defer ch.close()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = ch.client.Connect(cctx)
	cancel()
	if err != nil {
		return row, fmt.Errorf("amplification: connecting the client: %w", err)
	}

	total, timeout := cfg.Duration, cfg.Timeout
	ch.state.Store(leafFlaky)
	switch sc {
	case Down:
		ch.state.Store(leafDown)
	case Recovery:
		ch.state.Store(leafDown)
		total += cfg.DownFor
	case Deadline:
		timeout = cfg.DeadlineTimeout
	}
	interval := time.Duration(float64(time.Second) / cfg.Rate)
	var skipped0, refused0 int64
	if sc == Deadline {
		ch.drive(ctx, int(cfg.Rate*deadlineWarmup.Seconds()), interval, timeout.D(), nil)
		for _, n := range []*atomic.Int64{&ch.leaf, &ch.a, &ch.b, &ch.lateAttempts, &ch.lateRetries, &ch.lateRuns} {
			n.Store(0)
		}
		skipped0, refused0 = ch.deadlineMetrics()
	}
	ok := ch.drive(ctx, int(cfg.Rate*total.D().Seconds()), interval, timeout.D(), func(at time.Duration) {
		if sc == Recovery && at >= cfg.DownFor.D() {
			ch.state.Store(leafWell)
		}
	})
	made := float64(len(ok))
	if made == 0 {
		return row, errors.New("amplification: no call was made")
	}
	row.Calls = len(ok)
	row.Success = float64(succeeded(ok)) / made
	row.LeafPerCall = float64(ch.leaf.Load()) / made
	row.APerCall = float64(ch.a.Load()) / made
	row.BPerCall = float64(ch.b.Load()) / made
	if sc == Recovery {
		row.RecoverMS = recoverMS(ok, interval, cfg.DownFor.D())
	}
	if sc == Deadline {
		// Close first: every handler and attempt has then ended.
		ch.close()
		skipped, refused := ch.deadlineMetrics()
		row.LateAttempts, row.LateRetries, row.LateRuns = new(ch.lateAttempts.Load()), new(ch.lateRetries.Load()), new(ch.lateRuns.Load())
		row.SkippedDeadline, row.RefusedDeadline = new(skipped-skipped0), new(refused-refused0)
	}
	return row, nil
}

// deadlineWarmup is how long the deadline scenario's chain serves calls
// before its counts start. Every Client's expected latency and every
// server's expected service time form in it (latency.MinSamples first
// attempts or requests each: under 200 ms at the default rate), and until
// they have formed nothing is skipped or refused, by design (the cold
// start), so late attempts then say nothing of the rule.
const deadlineWarmup = 500 * time.Millisecond

// drive makes n client calls at one per interval, each with timeout, and
// waits for them; at, if set, is told each arrival's time from the start
// before its call is made. It returns whether each call made succeeded
// (fewer than n when ctx ends).
func (ch *chain) drive(ctx context.Context, n int, interval, timeout time.Duration, at func(time.Duration)) []bool {
	ok := make([]bool, n)
	var (
		wg       sync.WaitGroup
		inFlight atomic.Int64
	)
	start := time.Now()
	made := 0
	for i := range n {
		off := time.Duration(i) * interval
		if at != nil {
			at(off)
		}
		if d := time.Until(start.Add(off)); d > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
		if ctx.Err() != nil {
			break
		}
		made++
		if inFlight.Add(1) > maxInFlight {
			inFlight.Add(-1)
			continue
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer inFlight.Add(-1)
			cctx, cancel := context.WithTimeout(context.Background(), timeout)
			_, err := ch.client.CallRaw(cctx, "work", nil, []byte("x"))
			cancel()
			ok[i] = err == nil
		}(i)
	}
	wg.Wait()
	return ok[:made]
}

// deadlineMetrics returns the chain's attempts skipped and requests
// refused for want of time, summed over its Channels and tag sets.
func (ch *chain) deadlineMetrics() (skipped, refused int64) {
	for _, c := range ch.scope.Snapshot().Counters() {
		switch c.Name() {
		case stats.AttemptsSkippedDeadline:
			skipped += c.Value()
		case stats.ServerRefused:
			if c.Tags()[stats.TagReason] == stats.ReasonDeadline {
				refused += c.Value()
			}
		}
	}
	return skipped, refused
}

// recoverMS returns the time from back (the leaves' return) to the first
// bucket of arrivals from which every bucket had 95% succeed; nil if none.
// Call i arrived at i x interval.
func recoverMS(ok []bool, interval, back time.Duration) *float64 {
	per := max(int(bucket/interval), 1)
	first := int(back / interval) // the first call after the return
	from := -1
	for s := first; s < len(ok); s += per {
		e := min(s+per, len(ok))
		if float64(succeeded(ok[s:e])) >= 0.95*float64(e-s) {
			if from < 0 {
				from = s
			}
		} else {
			from = -1
		}
	}
	if from < 0 {
		return nil
	}
	return new(float64(time.Duration(from-first)*interval) / float64(time.Millisecond))
}

// succeeded counts the calls of ok that succeeded.
func succeeded(ok []bool) int {
	n := 0
	for _, g := range ok {
		if g {
			n++
		}
	}
	return n
}
