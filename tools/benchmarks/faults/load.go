package faults

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/tools/benchmarks/load"
	"github.com/sluice-rpc/sluice/tools/internal/fleet"
	"github.com/uber/tchannel-go"
)

// Bounds on the waits around the load.
const (
	// DrainLimit bounds the wait, once the last call has started, for the
	// calls in flight to return; calls still out then are reported hung.
	DrainLimit = 10 * time.Second
	// faultLimit bounds the wait, once the last call has started (the
	// drain's time included), for a fault's injection to return.
	faultLimit = 10 * time.Second
	// lateAfter is how far behind its arrival time a call may start and
	// not count as late (Go timers wake up to a millisecond or so late).
	lateAfter = 2 * time.Millisecond
	// schedTick is how long watchSched sleeps at a time.
	schedTick = 5 * time.Millisecond
)

// call is one call's outcome.
type call struct {
	start    time.Time
	latency  time.Duration
	code     string // "" when it succeeded
	attempts int
	peers    []string // every peer an attempt went or tried to go to
	late     bool     // started more than lateAfter behind its arrival time
}

// loadOutcome is what runLoad saw.
type loadOutcome struct {
	calls []call
	// start is when the first call started; end when the last returned
	// (or the drain gave up); hung counts the calls still out then.
	start, end time.Time
	hung       int
	// faultAt is when the fault struck (start for one there from the
	// start, zero if it was not injected); faultErr why it could not be.
	faultAt  time.Time
	faultErr error
	// schedDelay is the longest a sleeping goroutine woke up late.
	schedDelay time.Duration
}

// watchSched sleeps schedTick at a time until stop is closed, then sends
// on out the longest it woke up late: how far the machine held this
// process's timers back.
func watchSched(stop <-chan struct{}, out chan<- time.Duration) {
	var worst time.Duration
	for {
		select {
		case <-stop:
			out <- worst
			return
		default:
		}
		due := time.Now().Add(schedTick)
		time.Sleep(schedTick)
		worst = max(worst, time.Since(due))
	}
}

// runLoad makes cfg's calls through cl and, if inject is not nil, calls it
// cfg.FaultAt after the first call. It stops early when ctx ends.
func runLoad(ctx context.Context, cl *channel.Client, cfg Config, inject func() error) loadOutcome {
	req, method := request(cfg), cfg.method()
	stopSched, schedc := make(chan struct{}), make(chan time.Duration, 1)
	go watchSched(stopSched, schedc)
	out := loadOutcome{start: time.Now()}
	// When the fault struck (zero if it did not) and its error.
	type injection struct {
		at  time.Time
		err error
	}
	faultc := make(chan injection, 1)
	if inject == nil {
		faultc <- injection{at: out.start} // there from the start, if at all
	} else {
		fault := time.AfterFunc(time.Until(out.start.Add(cfg.FaultAt.D())), func() {
			at := time.Now()
			faultc <- injection{at, inject()}
		})
		defer context.AfterFunc(ctx, func() {
			if fault.Stop() {
				faultc <- injection{}
			}
		})()
	}

	calls, hung, last := fleet.Load(out.start, cfg.Rate, cfg.calls(), ctx.Done(), DrainLimit, func(_ int, sched, _ time.Time) call {
		c := call{start: time.Now()}
		c.late = c.start.Sub(sched) > lateAfter
		cctx, cancel := context.WithTimeout(ctx, cfg.Deadline.D())
		res, err := cl.Call(cctx, method, req)
		c.latency = time.Since(c.start)
		cancel()
		var ce *channel.CallError
		switch {
		case err == nil:
			c.attempts, c.peers = res.Attempts, slices.Clone(res.Peers)
		case errors.As(err, &ce):
			c.code, c.attempts, c.peers = load.CodeOf(err), ce.Attempts, slices.Clone(ce.Peers)
		default:
			c.code = load.CodeOf(err)
		}
		return c
	})
	out.calls, out.end, out.hung = calls, time.Now(), hung
	close(stopSched)
	out.schedDelay = <-schedc

	var f injection
	select {
	case f = <-faultc: // ready already: however long the drain took
	default:
		t := time.NewTimer(faultLimit - min(faultLimit, time.Since(last)))
		defer t.Stop()
		select {
		case f = <-faultc:
		case <-t.C:
			f.err = fmt.Errorf("faults: the fault's injection had not returned %v after the last call started", faultLimit)
		}
	}
	out.faultAt, out.faultErr = f.at, f.err
	return out
}

// request returns the request every call of cfg sends: a body of
// cfg.Payload bytes, raw, or a JSON object of about that size.
func request(cfg Config) *channel.Request {
	if cfg.Format == "json" {
		pad := max(0, cfg.Payload-len(`{"pad":""}`))
		return &channel.Request{Format: tchannel.JSON, Arg3: []byte(`{"pad":"` + strings.Repeat("x", pad) + `"}`)}
	}
	return &channel.Request{Format: tchannel.Raw, Arg3: []byte(strings.Repeat("x", cfg.Payload))}
}
