package faults

import (
	"fmt"

	"github.com/sluice-rpc/sluice/tools/internal/fleet"
)

// point is one peer of a run as the client sees it (an address) and as
// the suite counts it: the client's connection attempts, the connections
// accepted there (nil where nothing listens) and the handler executions
// behind it (nil where none runs).
type point struct {
	addr                  string
	dials, accepts, execs *events
}

// peers are the three peers of a run and its fault.
type peers struct {
	points []*point
	// faulty is the index of the failing peer; -1 when all three fail
	// alike or none does.
	faulty int
	// errs picks the calls the erroring peer fails (Erroring only).
	errs *erratic
	// inject applies a mid-run fault; nil when the fault is there from
	// the start. after runs once the load is over, before the client
	// closes (a frozen child gets SIGCONT, toxics are removed).
	inject, after func() error
	closers       fleet.Closers
}

// startPeers starts the peers of scenario s.
func startPeers(s Scenario) (_ *peers, err error) {
	f := &peers{faulty: -1}
	defer func() {
		if err != nil {
			f.closers.Close()
		}
	}()
	good := 2 // good servers after the failing peers
	switch s {
	case None, Declined, Busy:
		good = 3
	case Refused, AcceptClose:
		good = 0
		for range 3 {
			p := &point{}
			if s == Refused {
				p.addr, err = refusedAddr()
			} else {
				err = f.addFaultPoint(p, false)
			}
			if err != nil {
				return nil, err
			}
			f.points = append(f.points, p)
		}
	case BlackHole:
		p := &point{}
		if err := f.addFaultPoint(p, true); err != nil {
			return nil, err
		}
		f.points, f.faulty = append(f.points, p), 0
	case Reset, Latency, Bandwidth, Stall:
		if err := f.startProxied(s); err != nil {
			return nil, err
		}
		good = 0
	case Erroring:
		f.errs, f.faulty = newErratic(), 0
		if err := f.addServer(f.errs); err != nil {
			return nil, err
		}
	case Kill, Freeze:
		p := &point{accepts: &events{}, execs: &events{}}
		c, err := startChild(p.accepts, p.execs)
		if err != nil {
			return nil, err
		}
		p.addr = c.addr
		f.points, f.faulty = append(f.points, p), 0
		f.closers = append(f.closers, c.close)
		f.inject = c.kill
		if s == Freeze {
			f.inject, f.after = c.freeze, c.thaw
		}
	default:
		return nil, fmt.Errorf("faults: Scenario is %q, must be one of %s", s, scenarioList())
	}
	for range good {
		if err := f.addServer(nil); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// addFaultPoint starts an accept-close listener, or with hold a black
// hole, as p.
func (f *peers) addFaultPoint(p *point, hold bool) error {
	p.accepts = &events{}
	l, err := startFaultPoint(hold, p.accepts)
	if err != nil {
		return err
	}
	p.addr = l.Addr()
	f.closers.Add(func() { l.Close() })
	return nil
}

// addServer starts a server and adds it as a point: a good one, or with
// errs not nil one that fails the calls errs picks.
func (f *peers) addServer(errs *erratic) error {
	p, err := f.startServer(errs)
	if err == nil {
		f.points = append(f.points, p)
	}
	return err
}

// startServer starts a server, its counts in a new point.
func (f *peers) startServer(errs *erratic) (*point, error) {
	p := &point{accepts: &events{}, execs: &events{}}
	s, err := startServer(p.accepts.now, p.execs.now, errs)
	if err != nil {
		return nil, err
	}
	p.addr = s.HostPort()
	f.closers.Add(s.Close)
	return p, nil
}

// proxiedToxics are the toxics of the proxied scenarios.
var proxiedToxics = map[Scenario]toxic{
	Reset:     {Type: "reset_peer", Stream: "upstream", Attributes: map[string]any{"timeout": 0}},
	Latency:   {Type: "latency", Stream: "downstream", Attributes: map[string]any{"latency": 100}},
	Bandwidth: {Type: "bandwidth", Stream: "downstream", Attributes: map[string]any{"rate": 1}},
	Stall:     {Type: "timeout", Stream: "upstream", Attributes: map[string]any{"timeout": 0}},
}

// startProxied starts three good servers, each behind a toxiproxy proxy
// (so that the three differ only by the toxic), and arranges scenario s's
// toxic on the first: from the start (latency, bandwidth) or at FaultAt
// (reset, stall). The servers count the connections the proxies open to
// them, one per connection a proxy accepts.
func (f *peers) startProxied(s Scenario) error {
	px := newProxies()
	f.closers.Add(px.close)
	f.after, f.faulty = px.clearToxics, 0
	for i := range 3 {
		p, err := f.startServer(nil)
		if err != nil {
			return err
		}
		proxy, err := px.add(p.addr)
		if err != nil {
			return err
		}
		p.addr = proxy.Listen
		f.points = append(f.points, p)
		if i > 0 {
			continue
		}
		if s == Reset || s == Stall {
			f.inject = func() error { return addToxic(proxy, proxiedToxics[s]) }
		} else if err := addToxic(proxy, proxiedToxics[s]); err != nil {
			return err
		}
	}
	return nil
}

// close undoes startPeers, last first, and returns the errors joined.
func (f *peers) close() error { return f.closers.Close() }
