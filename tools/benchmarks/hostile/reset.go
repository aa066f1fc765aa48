package hostile

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// runConnectReset has an attacker child connect and reset (SO_LINGER 0,
// then close) as fast as e.p.resetWorkers goroutines can for e.p.resetFor,
// while a side client calls at e.p.sideRate.
func runConnectReset(e *env) error {
	p := e.p
	e.before()
	s := e.sample()
	stopSide := e.startSide()
	a, err := startAttacker(job{Kind: "reset", Target: e.t.Addr, For: p.resetFor, Workers: p.resetWorkers})
	if err != nil {
		stopSide()
		e.peaks(s)
		return err
	}
	defer a.stop()
	done, err := a.next("done", p.resetFor+leaveLimit, nil)
	e.r.Side = stopSide()
	e.peaks(s)
	if err != nil {
		return err
	}
	if err := e.pause(p.settle); err != nil {
		return err
	}
	e.after()
	e.r.fig("connects", "%d in %s (%.0f/s) from %d goroutines, %d failed", done.Sent, sec(p.resetFor),
		float64(done.Sent)/p.resetFor.Seconds(), p.resetWorkers, done.Failed)
	if done.Note != "" {
		e.r.fig("attacker", "%s", done.Note)
	}
	e.r.fig(fmt.Sprintf("side client (%g/s)", p.sideRate), "%s", e.r.Side)
	return nil
}

// childReset is the attacker child of "connect-reset".
func childReset(ctx context.Context, j job, out *emitter, leave <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, j.For)
	defer cancel()
	go func() {
		select {
		case <-leave:
			cancel()
		case <-ctx.Done():
		}
	}()
	var connects, failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for w := 0; w < max(1, j.Workers); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{Timeout: time.Second}
			for ctx.Err() == nil {
				c, err := d.DialContext(ctx, "tcp", j.Target)
				if err != nil {
					if ctx.Err() == nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
					}
					continue
				}
				c.(*net.TCPConn).SetLinger(0)
				c.Close()
				connects.Add(1)
			}
		}()
	}
	wg.Wait()
	done := event{Ev: "done", Sent: connects.Load(), Failed: int(failed.Load())}
	if s, ok := firstErr.Load().(string); ok {
		done.Note = "first failed connect: " + s
	}
	out.emit(done)
	<-leave
	return nil
}
