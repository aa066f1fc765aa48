package balancing

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/serviceconfig"
	"github.com/sluice-rpc/sluice/tools/benchmarks/load"
	"github.com/sluice-rpc/sluice/tools/internal/benchrun"
)

// Result is a whole benchmark: the config it ran with (defaults filled
// in) and each scenario's rows; a scenario not run is nil.
type Result struct {
	Config        Config               `json:"config"`
	ScaleOut      *ScaleOutResult      `json:"scale_out,omitzero"`
	Heterogeneous *HeterogeneousResult `json:"heterogeneous,omitzero"`
	Shard         *ShardResult         `json:"shard,omitzero"`
	Erroring      *ErroringResult      `json:"erroring,omitzero"`
	// Verdicts are the done-when checks on the rows run.
	Verdicts []Verdict `json:"verdicts"`
}

// Run runs cfg's scenarios one after the other, each scenario's rows one
// after the other on fresh servers and clients. It stops at the end of
// ctx, returning what it has run so far with ctx's error.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	defer benchrun.SetGCPercent(cfg.GCPercent)()
	res := &Result{Config: cfg}
	defer func() { res.Verdicts = res.verdicts() }()
	for _, s := range cfg.Scenarios {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		var err error
		switch s {
		case ScaleOut:
			res.ScaleOut, err = runScaleOutScenario(ctx, cfg)
		case Heterogeneous:
			res.Heterogeneous, err = runHeterogeneousScenario(ctx, cfg)
		case Shard:
			res.Shard, err = runShardScenario(ctx, cfg)
		case Erroring:
			res.Erroring, err = runErroringScenario(ctx, cfg)
		}
		if err != nil {
			return res, fmt.Errorf("balancing: %s: %w", s, err)
		}
	}
	return res, nil
}

// newClient returns a channel with no retries, balancing by the service
// config cfgJSON, and its Client of Service, with no peers yet.
func newClient(cfgJSON string) (*channel.Channel, *channel.Client, error) {
	sc, err := serviceconfig.Parse([]byte(cfgJSON))
	if err != nil {
		return nil, nil, fmt.Errorf("balancing: the client's service config %s: %w", cfgJSON, err)
	}
	return load.NewClient("balancing-client", Service, nil, channel.WithRetries(channel.RetryConfig{Disabled: true}), channel.WithServiceConfig(sc))
}

// Service configs of the rows: every default, or one feature off.
const (
	defaultsConfig = `{}`
	noSlowStart    = `{"balancing": [{"slowStart": {"disabled": true}}]}`
	noEjection     = `{"balancing": [{"outlierEjection": {"disabled": true}}]}`
)

// bench is a row's servers, and a client with them as peers.
type bench struct {
	f      fleet
	ch     *channel.Channel
	client *channel.Client
}

// setup starts a server per config and a client of cfgJSON with them as
// peers (weights nil: all 1).
func setup(cfgs []serverConfig, cfgJSON string, weights []float64) (*bench, error) {
	f, err := startFleet(cfgs)
	if err != nil {
		return nil, err
	}
	b := &bench{f: f}
	if b.ch, b.client, err = newClient(cfgJSON); err == nil {
		if err = b.client.SetPeers(f.members(weights)); err != nil {
			b.ch.Close()
		}
	}
	if err != nil {
		f.close()
		return nil, err
	}
	return b, nil
}

func (b *bench) close() {
	b.ch.Close()
	b.f.close()
}

// run offers rate calls a second for d, open loop, each with c's timeout,
// recording every call. It returns the servers' counts at warmup, when it
// starts their in-flight peaks over (at the end if the load ends first),
// and at the end.
func (b *bench) run(ctx context.Context, c Config, rate float64, warmup, d time.Duration,
	vary func(int) (*channel.Request, []channel.CallOption)) (rep *load.Report, before, after []snapshot, err error) {
	wait := at(time.Now(), warmup, func() {
		for _, s := range b.f {
			s.pool.ResetPeak()
		}
		before = b.f.snapshots()
	})
	timeout := c.Timeout.D()
	rep, err = load.Run(ctx, b.client, load.Config{
		Method: Method, RPS: rate, Duration: d, Timeout: timeout,
		Concurrency: min(load.MaxConcurrency, int(rate*timeout.Seconds())+100),
		Record:      true, Vary: vary,
	})
	wait()
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, nil, nil, err
	}
	after = b.f.snapshots()
	if before == nil {
		before = after
	}
	return rep, before, after, nil
}

// span is a stretch of a run by the calls' arrival, from its start:
// [from, to).
type span struct{ from, to time.Duration }

func (s span) has(r load.Record) bool { return r.At >= s.from && r.At < s.to }

func (s span) seconds() float64 { return (s.to - s.from).Seconds() }

// tally is what became of a set of calls, and the successful ones'
// latencies.
type tally struct {
	Outcome
	lat []time.Duration
}

func (t *tally) add(r load.Record) {
	t.Calls++
	switch {
	case r.Code == "":
		t.OK++
		t.lat = append(t.lat, r.Latency)
	case r.Local:
		t.Refused++
	case r.Code == "BUSY":
		t.Busy++
	case r.Code == "TIMEOUT":
		t.Timeouts++
	default:
		t.Other++
	}
}

func (t *tally) failed() int { return t.Busy + t.Timeouts + t.Other }

// p99 returns the 99th percentile of the successful calls' latency.
func (t *tally) p99() load.Millis {
	slices.Sort(t.lat)
	return load.Millis(load.Quantile(t.lat, 0.99))
}

// outcome returns the tally with its p99.
func (t *tally) outcome() Outcome {
	o := t.Outcome
	o.P99 = t.p99()
	return o
}

// group tallies each record in the bucket, of n, that of returns for it
// (false: none).
func group(recs []load.Record, n int, of func(load.Record) (int, bool)) []*tally {
	out := make([]*tally, n)
	for i := range out {
		out[i] = &tally{}
	}
	for _, r := range recs {
		if i, ok := of(r); ok {
			out[i].add(r)
		}
	}
	return out
}

// count tallies the records keep accepts.
func count(recs []load.Record, keep func(load.Record) bool) *tally {
	return group(recs, 1, func(r load.Record) (int, bool) { return 0, keep(r) })[0]
}

// perSecond tallies the records keep accepts (nil: all) of a run that
// lasted d second by second.
func perSecond(recs []load.Record, d time.Duration, keep func(load.Record) bool) []*tally {
	return group(recs, int((d+time.Second-1)/time.Second), func(r load.Record) (int, bool) {
		return int(r.At / time.Second), r.At >= 0 && r.At < d && (keep == nil || keep(r))
	})
}

// onServers returns whether a record's peer is one of f[from:to].
func onServers(f fleet, from, to int) func(load.Record) bool {
	idx := f.index()
	return func(r load.Record) bool {
		i, ok := idx[r.Peer]
		return ok && i >= from && i < to
	}
}

// byServer tallies the records of sp by the server of f that took them.
func byServer(recs []load.Record, f fleet, sp span) []*tally {
	idx := f.index()
	return group(recs, len(f), func(r load.Record) (int, bool) {
		i, ok := idx[r.Peer]
		return i, ok && sp.has(r)
	})
}

// at runs f at t0 + d on a goroutine of its own; wait, to be called
// once, cancels it if it has not started and otherwise waits for it to end.
func at(t0 time.Time, d time.Duration, f func()) (wait func()) {
	done := make(chan struct{})
	t := time.AfterFunc(time.Until(t0.Add(d)), func() {
		defer close(done)
		f()
	})
	return func() {
		if !t.Stop() {
			<-done
		}
	}
}

// share returns a / b, 0 when b is 0.
func share(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
