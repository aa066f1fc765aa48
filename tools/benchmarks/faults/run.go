package faults

import (
	"context"
	"fmt"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/uber/tchannel-go"
)

// SettleLimit bounds the wait, after a run's client is closed, for the
// goroutine count to come back to what it was before the run.
const SettleLimit = 5 * time.Second

// Run makes one run: it starts cfg.Scenario's peers, a client with
// cfg.Setup's policy dialing through a counting Dialer, makes the calls,
// injects the fault, and measures. It returns an error only when the run
// could not be made; what went wrong while it ran is in Result.Problems.
// It ends early when ctx ends. Every wait is bounded.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	svc, err := cfg.Setup.serviceConfig()
	if err != nil {
		return nil, err
	}
	f, err := startPeers(cfg.Scenario)
	if err != nil {
		return nil, err
	}
	r := &Result{Config: cfg}
	defer func() { r.problem(f.closers.Close()) }()

	r.GoroutinesBefore = goroutines()
	if !cfg.Shared {
		r.HeapBefore = heapAfterGC()
	}
	client, err := channel.New("faults-client", channel.WithTChannelOptions(tchannel.ChannelOptions{Dialer: f.dial}), channel.WithServiceConfig(svc))
	if err != nil {
		return nil, fmt.Errorf("faults: the client: %w", err)
	}
	cl, err := client.NewClient(Service)
	for _, p := range f.points {
		if err == nil {
			err = cl.AddPeer(p.addr)
		}
	}
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("faults: the client: %w", err)
	}
	lo := runLoad(ctx, cl, cfg, f.inject)
	r.problem(lo.faultErr)
	if f.after != nil {
		r.problem(f.after())
	}
	r.count(f, lo)
	client.Close() // closing is not part of the run

	if cfg.Shared {
		r.GoroutinesAfter = goroutines()
	} else {
		r.GoroutinesAfter = settle(r.GoroutinesBefore)
		// Drop what the run kept before weighing the heap.
		lo.calls = nil
		for _, p := range f.points {
			p.dials.reset()
			p.accepts.reset()
			p.execs.reset()
		}
		r.HeapAfter = heapAfterGC()
	}
	if r.Hung > 0 {
		r.problem(fmt.Errorf("%d calls had not returned %v after the last call started", r.Hung, DrainLimit))
	}
	return r, nil
}

// count fills r's figures from the peers' logs and the load's calls. Each
// log is read once: the client still dials, and Connects must be the very
// count of Accepts (or Dials) it stands for.
func (r *Result) count(f *peers, lo loadOutcome) {
	after1s := lo.start.Add(time.Second)
	var dialsAfter, acceptsAfter int
	var dialsCut, acceptsCut bool
	r.Dials, dialsAfter, dialsCut = f.sum(func(p *point) *events { return &p.dials }, after1s)
	r.Accepts, acceptsAfter, acceptsCut = f.sum(func(p *point) *events { return &p.accepts }, after1s)
	r.Executions, _, _ = f.sum(func(p *point) *events { return &p.execs }, after1s)
	r.Connects, r.ConnectsAfter1s, r.Truncated = r.Accepts, acceptsAfter, acceptsCut
	if r.Config.Scenario == Refused { // nothing listens there to count
		r.Connects, r.ConnectsAfter1s, r.Truncated = r.Dials, dialsAfter, dialsCut
	}
	faulty := ""
	if f.faulty >= 0 {
		p := f.points[f.faulty]
		faulty = p.addr
		if !lo.faultAt.IsZero() {
			since := lo.faultAt.Add(time.Second)
			_, dn, _ := p.dials.countSince(since)
			_, an, _ := p.accepts.countSince(since)
			r.FaultyConnects = max(dn, an)
		}
	}
	r.summarize(lo, faulty)
	if f.errs != nil {
		streakAt, calls, failed := f.errs.state()
		r.summarizeStreak(lo, faulty, streakAt)
		if !r.Streak {
			r.problem(fmt.Errorf("the erroring peer never answered %d UNEXPECTEDs in a row (%d of its %d calls failed): its ejection was not put to the test",
				ErrorStreak, failed, calls))
		}
	}
}

// problem notes err, if not nil, among r's Problems.
func (r *Result) problem(err error) {
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
	}
}

// heapAfterGC returns the bytes of live heap objects after two collections
// (the second frees what the first's finalizers and pools let go).
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// settle waits, at most SettleLimit, for the goroutine count (goroutines)
// to come down to target, and returns the count it ended at.
func settle(target int) int {
	deadline := time.Now().Add(SettleLimit)
	for {
		n := goroutines()
		if n <= target || time.Now().After(deadline) {
			return n
		}
		time.Sleep(10 * time.Millisecond) // polling a count nothing signals
	}
}

// goroutines counts the process's goroutines but toxiproxy's: its latency
// and bandwidth toxics block forever when a client closes a connection
// they hold data for, a leak in toxiproxy, not in the client under test.
func goroutines() int {
	var b strings.Builder
	pprof.Lookup("goroutine").WriteTo(&b, 2) // as runtime.Stack(all)
	count := 0
	for g := range strings.SplitSeq(b.String(), "\n\n") {
		if strings.TrimSpace(g) != "" && !strings.Contains(g, "github.com/Shopify/toxiproxy/") {
			count++
		}
	}
	return count
}
