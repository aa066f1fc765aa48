package hostile

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// runSoak has an attacker child make a steady legitimate load of echo
// calls at e.p.soakRate for e.p.soakFor, and samples the server's memory
// every e.p.soakEvery.
func runSoak(e *env) error {
	p := e.p
	e.before()
	s := startSampler(e.ctx, e.t, p.soakEvery, p.soakEvery)
	a, err := startAttacker(job{Kind: "soak", Target: e.t.Addr, Rate: p.soakRate, For: p.soakFor, Deadline: p.deadline})
	if err != nil {
		e.peaks(s)
		return err
	}
	defer a.stop()
	done, err := a.next("done", p.soakFor+leaveLimit, nil)
	series := e.peaks(s)
	if err != nil {
		return err
	}
	e.r.Side = done.Load
	if err := e.pause(p.settle); err != nil {
		return err
	}
	e.after()
	e.r.fig(fmt.Sprintf("load (%g/s for %s)", p.soakRate, sec(p.soakFor)), "%s", e.r.Side)
	var mbs []string
	for _, rss := range series {
		mbs = append(mbs, mb(rss))
	}
	e.r.fig(fmt.Sprintf("server RSS MiB every %s", sec(p.soakEvery)), "%s", strings.Join(mbs, " "))
	return nil
}

// childSoak is the soak's load: a legitimate client in a process of its
// own, so that its calls do not share the runner's processor time.
func childSoak(ctx context.Context, j job, out *emitter, leave <-chan struct{}) error {
	stop := make(chan struct{})
	t := time.AfterFunc(j.For, func() { close(stop) })
	defer t.Stop()
	go func() {
		select {
		case <-leave:
			if t.Stop() {
				close(stop)
			}
		case <-stop:
		}
	}()
	l, err := runLoad(ctx, j.Target, loadSpec{rate: j.Rate, deadline: j.Deadline, payload: 100}, stop)
	if err != nil {
		return err
	}
	out.emit(event{Ev: "done", Load: l})
	<-leave
	return nil
}
