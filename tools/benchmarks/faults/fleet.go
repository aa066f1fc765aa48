package faults

import (
	"errors"
	"fmt"
	"time"
)

// point is one peer of a fleet as the client sees it (an address) and as
// the suite counts it (the connections accepted there and the handler
// executions behind it).
type point struct {
	addr string
	// accepts is nil where nothing listens (a refused address); execs is
	// nil where no handler runs.
	accepts, execs *events
}

// fleet is the three peers of a run and its fault.
type fleet struct {
	points []*point
	// faulty is the index of the failing peer; -1 when all three fail
	// alike or none does.
	faulty int
	// errs picks the calls the erroring peer fails; nil in the other
	// scenarios.
	errs *erratic
	// inject applies a mid-run fault; nil when the fault is there from
	// the start.
	inject func() error
	// after runs once the load is over, before the client closes (a
	// frozen child gets SIGCONT, toxics are removed).
	after func() error
	// closers undo the start, last first.
	closers []func() error
}

// startFleet starts the peers of scenario s.
func startFleet(s Scenario) (_ *fleet, err error) {
	f := &fleet{faulty: -1}
	defer func() {
		if err != nil {
			f.close()
		}
	}()
	switch s {
	case None, Declined, Busy:
		if err := f.addServers(3); err != nil {
			return nil, err
		}
	case Refused:
		for i := 0; i < 3; i++ {
			addr, err := refusedAddr()
			if err != nil {
				return nil, err
			}
			f.points = append(f.points, &point{addr: addr})
		}
	case AcceptClose:
		for i := 0; i < 3; i++ {
			if err := f.addFaultPoint(false); err != nil {
				return nil, err
			}
		}
	case BlackHole:
		if err := f.addFaultPoint(true); err != nil {
			return nil, err
		}
		f.faulty = 0
		if err := f.addServers(2); err != nil {
			return nil, err
		}
	case Reset, Latency, Bandwidth, Stall:
		if err := f.startProxied(s); err != nil {
			return nil, err
		}
	case Erroring:
		f.errs, f.faulty = newErratic(), 0
		if err := f.addServer(f.errs); err != nil {
			return nil, err
		}
		if err := f.addServers(2); err != nil {
			return nil, err
		}
	case Kill, Freeze:
		p := &point{accepts: &events{}, execs: &events{}}
		c, err := startChild(p.accepts, p.execs)
		if err != nil {
			return nil, err
		}
		p.addr = c.Addr()
		f.points = append(f.points, p)
		f.closers = append(f.closers, c.close)
		f.faulty = 0
		if s == Kill {
			f.inject = c.kill
		} else {
			f.inject, f.after = c.freeze, c.thaw
		}
		if err := f.addServers(2); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("faults: Scenario is %q, must be one of %s", s, scenarioList())
	}
	return f, nil
}

// addFaultPoint starts an accept-close listener, or with hold a black
// hole, and adds it as a point.
func (f *fleet) addFaultPoint(hold bool) error {
	p := &point{accepts: &events{}}
	l, err := startFaultPoint(hold, p.accepts)
	if err != nil {
		return err
	}
	p.addr = l.Addr()
	f.points = append(f.points, p)
	f.closers = append(f.closers, func() error { l.Close(); return nil })
	return nil
}

// addServer starts a server and adds it as a point: a good one, or with
// errs not nil one that fails the calls errs picks.
func (f *fleet) addServer(errs *erratic) error {
	p := &point{accepts: &events{}, execs: &events{}}
	s, err := startServer(p.accepts, p.execs, errs)
	if err != nil {
		return err
	}
	p.addr = s.Addr()
	f.points = append(f.points, p)
	f.closers = append(f.closers, func() error { s.Close(); return nil })
	return nil
}

// addServers starts n good servers and adds them as points.
func (f *fleet) addServers(n int) error {
	for i := 0; i < n; i++ {
		if err := f.addServer(nil); err != nil {
			return err
		}
	}
	return nil
}

// proxiedToxic returns the toxic of scenario s, a proxied one.
func proxiedToxic(s Scenario) toxic {
	switch s {
	case Reset:
		return toxic{Type: "reset_peer", Stream: "upstream", Attributes: map[string]any{"timeout": 0}}
	case Latency:
		return toxic{Type: "latency", Stream: "downstream", Attributes: map[string]any{"latency": 100}}
	case Bandwidth:
		return toxic{Type: "bandwidth", Stream: "downstream", Attributes: map[string]any{"rate": 1}}
	}
	return toxic{Type: "timeout", Stream: "upstream", Attributes: map[string]any{"timeout": 0}} // Stall
}

// startProxied starts three good servers, each behind a toxiproxy proxy
// (so the three differ only by the toxic), and arranges scenario s's toxic
// on the first: from the start (latency, bandwidth) or at FaultAt (reset,
// stall). The servers count the connections the proxies open to them, one
// per connection a proxy accepts.
func (f *fleet) startProxied(s Scenario) error {
	px := newProxies()
	f.closers = append(f.closers, func() error { px.close(); return nil })
	f.after = px.clearToxics
	for i := 0; i < 3; i++ {
		p := &point{accepts: &events{}, execs: &events{}}
		srv, err := startServer(p.accepts, p.execs, nil)
		if err != nil {
			return err
		}
		f.closers = append(f.closers, func() error { srv.Close(); return nil })
		proxy, err := px.add(srv.Addr())
		if err != nil {
			return err
		}
		p.addr = proxy.Listen
		f.points = append(f.points, p)
		if i == 0 {
			t := proxiedToxic(s)
			f.faulty = 0
			if s == Reset || s == Stall {
				f.inject = func() error { return addToxic(proxy, t) }
			} else if err := addToxic(proxy, t); err != nil {
				return err
			}
		}
	}
	return nil
}

// close undoes startFleet, last first, and returns the errors joined.
func (f *fleet) close() error {
	var errs []error
	for i := len(f.closers) - 1; i >= 0; i-- {
		errs = append(errs, f.closers[i]())
	}
	f.closers = nil
	return errors.Join(errs...)
}

// sum adds up, over every point, the log that of picks (accepts or
// executions): all the events, those at or after since, and whether that
// count is a lower bound.
func (f *fleet) sum(of func(*point) *events, since time.Time) (all, after int, truncated bool) {
	for _, p := range f.points {
		e := of(p)
		all += e.count()
		n, tr := e.countSince(since)
		after += n
		truncated = truncated || tr
	}
	return all, after, truncated
}
