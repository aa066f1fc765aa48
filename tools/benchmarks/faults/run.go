package faults

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/uber/tchannel-go"
)

// SettleLimit bounds the wait, after a run's client is closed, for the
// goroutine count to come back to what it was before the run.
const SettleLimit = 5 * time.Second

// clientName is the service name the suite's client calls as.
const clientName = "faults-client"

// Run makes one run: it starts cfg.Scenario's peers, a client with
// cfg.Setup's policy dialing through a counting Dialer, makes the calls,
// injects the fault, and measures. It returns an error only when the run
// could not be made (an invalid cfg, a peer that would not start); what
// went wrong while it ran is in Result.Problems. Run ends early, with the
// calls made so far, when ctx ends. Every wait is bounded: a run lasts at
// most cfg.Duration plus DrainLimit, SettleLimit and the peers' own
// bounded shutdown.
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
	problem := func(err error) {
		if err != nil {
			r.Problems = append(r.Problems, err.Error())
		}
	}
	defer func() { problem(f.close()) }()

	r.GoroutinesBefore = goroutines()
	if !cfg.Shared {
		r.HeapBefore = heapAfterGC()
	}
	for _, p := range f.points {
		p.dials = &events{}
	}
	opts := []channel.Option{channel.WithTChannelOptions(tchannel.ChannelOptions{Dialer: f.dial})}
	if svc != nil {
		opts = append(opts, channel.WithServiceConfig(svc))
	}
	client, err := channel.New(clientName, opts...)
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
	problem(lo.faultErr)
	if f.after != nil {
		problem(f.after())
	}

	// Count before the client closes: closing is not part of the run.
	after1s := lo.start.Add(time.Second)
	var dials, accepts, execs []*events
	for _, p := range f.points {
		dials, accepts, execs = append(dials, p.dials), append(accepts, p.accepts), append(execs, p.execs)
	}
	var dialsAfter, acceptsAfter int
	var tr1, tr2 bool
	r.Dials, dialsAfter, tr1 = sumSince(dials, after1s)
	r.Accepts, acceptsAfter, tr2 = sumSince(accepts, after1s)
	r.Executions, _, _ = sumSince(execs, after1s)
	r.Connects, r.ConnectsAfter1s, r.Truncated = r.Accepts, acceptsAfter, tr2
	if cfg.Scenario == Refused {
		r.Connects, r.ConnectsAfter1s, r.Truncated = r.Dials, dialsAfter, tr1
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
	r.summarize(lo, faulty, lo.faultAt)
	if f.errs != nil {
		r.summarizeStreak(lo, faulty, f.errs.streak())
		if !r.Streak {
			calls, failed := f.errs.counts()
			r.Problems = append(r.Problems, fmt.Sprintf("the erroring peer never answered %d UNEXPECTEDs in a row (%d of its %d calls failed): its ejection was not put to the test",
				ErrorStreak, failed, calls))
		}
	}

	client.Close()
	if cfg.Shared {
		r.GoroutinesAfter = goroutines()
	} else {
		r.GoroutinesAfter = settle(r.GoroutinesBefore)
		// Drop what the run kept before weighing the heap.
		lo.calls = nil
		for _, e := range slices.Concat(dials, accepts, execs) {
			e.reset()
		}
		r.HeapAfter = heapAfterGC()
	}
	if r.Hung > 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("%d calls had not returned %v after the last call started", r.Hung, DrainLimit))
	}
	return r, nil
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

// toxiproxyFrames marks a goroutine running toxiproxy's code.
const toxiproxyFrames = "github.com/Shopify/toxiproxy/"

// goroutines counts the process's goroutines, leaving out toxiproxy's own.
// toxiproxy's latency and bandwidth toxics send on a channel with nothing
// else selected, so when a client closes a connection while such a toxic
// holds data for it (a client that finds the slow connection dead does),
// the toxic's goroutines, and those feeding it, wait forever: a leak in
// toxiproxy, not in the client under test, which the counts leave out.
func goroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if len(bytes.TrimSpace(g)) > 0 && !bytes.Contains(g, []byte(toxiproxyFrames)) {
			count++
		}
	}
	return count
}
