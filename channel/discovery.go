package channel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/channel/channelz"
	"github.com/sluice-rpc/sluice/discovery"
	"github.com/sluice-rpc/sluice/internal/config"
	"github.com/sluice-rpc/sluice/internal/peerlist"
	"github.com/sluice-rpc/sluice/internal/pool"
	"github.com/sluice-rpc/sluice/internal/watch"
	"github.com/sluice-rpc/sluice/peer"
	"github.com/sluice-rpc/sluice/stats"
)

// WithRegistrar has r announce the Channel's address once it listens
// (ListenAndServe or Serve: the address HostPort reports), and withdraw it
// first thing when it shuts down (Shutdown; Close too, waiting at most a
// second for the registry). The registration's state shows in Debug.
func WithRegistrar(r discovery.Registrar) Option { return func(o *options) { o.registrar = r } }

// Defaults of ShutdownConfig.
const (
	// DefaultShutdownGrace is the longest Shutdown serves on after
	// deregistering, for clients to learn the server is leaving: enough for
	// a DNS client that re-resolves every few seconds, and well inside
	// Kubernetes' default 30 s termination grace period.
	DefaultShutdownGrace = 10 * time.Second
	// DefaultShutdownQuiet ends the grace once no request has arrived
	// from a plain TChannel client for this long: clients that follow a
	// watched registry (etcd) stop sending within milliseconds of the
	// deregistration. (Sluice clients are told, and need no guess.)
	DefaultShutdownQuiet = time.Second
)

// ShutdownConfig says how Shutdown leaves. The zero value means the
// defaults.
type ShutdownConfig struct {
	// Grace is the longest Shutdown keeps serving normally, listener open,
	// after deregistering and telling its Sluice clients, >= 0. 0 means
	// DefaultShutdownGrace, unless NoGrace is set.
	Grace time.Duration
	// NoGrace makes Shutdown decline new calls at once after
	// deregistering, with no grace. Grace must then be 0.
	NoGrace bool
	// Quiet ends the grace early once no Sluice client holds a connection
	// and no request has come from a plain TChannel client for Quiet
	// (checked every Quiet/4, at most 10 ms, so the grace ends within 1.25
	// x Quiet of the last such request). 0 means DefaultShutdownQuiet; it
	// must not be negative.
	Quiet time.Duration
}

// Validate reports the first field that breaks its rule, as a
// *retry.FieldError, or nil.
func (s ShutdownConfig) Validate() error {
	switch {
	case s.Grace < 0:
		return config.Errorf("channel", "ShutdownConfig.Grace", s.Grace, "must be >= 0 (0 means the default, %v; NoGrace means none)", DefaultShutdownGrace)
	case s.NoGrace && s.Grace != 0:
		return config.Errorf("channel", "ShutdownConfig.Grace", s.Grace, "must be 0 when NoGrace is set")
	case s.Quiet < 0:
		return config.Errorf("channel", "ShutdownConfig.Quiet", s.Quiet, "must be >= 0 (0 means the default, %v)", DefaultShutdownQuiet)
	}
	return nil
}

// withDefaults returns s with its zero fields set to their defaults, and
// Grace negative (none) when NoGrace is set.
func (s ShutdownConfig) withDefaults() ShutdownConfig {
	switch {
	case s.NoGrace:
		s.Grace = -1
	case s.Grace == 0:
		s.Grace = DefaultShutdownGrace
	}
	if s.Quiet == 0 {
		s.Quiet = DefaultShutdownQuiet
	}
	return s
}

// WithShutdown sets how Shutdown leaves. Default: the zero ShutdownConfig.
func WithShutdown(s ShutdownConfig) Option { return func(o *options) { o.shutdown = s } }

// Phases of a Channel's life as a server (channelz.State.Phase).
const (
	phaseServing int32 = iota
	phaseLeaving
	phaseDraining
	phaseClosed
)

var phaseNames = [...]string{"SERVING", "LEAVING", "DRAINING", "CLOSED"}

// resolved is a Client whose peers come from a resolver.
type resolved struct {
	list    *peerlist.List
	watcher *watch.Watcher
	done    sync.WaitGroup // askForLookups
	// looks counts the peers askForLookups looked at: tests check that it
	// grows with the changes, not with the list's length at each.
	looks atomic.Int64
}

// startResolver starts r, the Client's resolver (WithResolver), with a
// goroutine that asks it for a fresh lookup when the Client's peers fail.
func (cl *Client) startResolver(r discovery.Resolver) error {
	c, l, svc := cl.ch, cl.list, cl.service
	w, err := watch.New(watch.Config{Resolver: r, Clock: c.o.clock, Logger: c.o.logger,
		Scope: c.rec.Scope().Tagged(map[string]string{stats.TagService: svc}),
		Apply: func(addrs []discovery.Address) error {
			ms := make([]peer.Member, len(addrs))
			for i, a := range addrs {
				ms[i] = peer.Member{HostPort: a.HostPort, Weight: a.Weight}
			}
			if err := l.Set(ms); errors.Is(err, pool.ErrClosed) {
				return ErrClosed
			} else if err != nil {
				return err
			}
			return nil
		}})
	if err != nil {
		return fmt.Errorf("channel: NewClient(%q): WithResolver: %w", svc, err)
	}
	rs := &resolved{list: l, watcher: w}
	cl.res = rs
	rs.done.Add(1)
	go func() {
		defer rs.done.Done()
		askForLookups(rs, cl.stop)
	}()
	return nil
}

// askForLookups asks r.watcher for a fresh lookup each time a peer of r.list enters
// TransientFailure, and whenever l has peers but none is Ready or
// connecting: the registry may know better. Resolvers bound how often they
// look up. It keeps the class of each peer it last saw, and looks only at
// the peers whose state changed (l.TakeChanged): its work is in
// proportion to the changes, not to the list's length at each of them.
func askForLookups(r *resolved, stop <-chan struct{}) {
	l, w := r.list, r.watcher
	seen := map[*peerlist.Peer]peerClass{}
	usable := 0 // peers of seen whose class is usable
	for {
		changed := l.Changed()
		ask := false
		for _, p := range l.TakeChanged() {
			r.looks.Add(1)
			old, known := seen[p]
			if known && old == classUsable {
				usable--
			}
			if l.Get(p.HostPort()) != p { // it left
				delete(seen, p)
				continue
			}
			cl := classOf(p.State())
			if cl == classFailed && (!known || old != classFailed) {
				ask = true
			}
			seen[p] = cl
			if cl == classUsable {
				usable++
			}
		}
		// The peers it knows, not l.Peers(): a peer that joined since its
		// take, not yet looked at, must not count as one not usable.
		if ask || (usable == 0 && len(seen) > 0) {
			w.ResolveNow()
		}
		select {
		case <-changed:
		case <-stop:
			return
		}
	}
}

// peerClass is what askForLookups makes of a peer's State.
type peerClass uint8

const (
	classUsable peerClass = iota // Ready, Connecting or Idle
	classFailed                  // TransientFailure
	classGone                    // Shutdown
)

func classOf(s peer.State) peerClass {
	switch s {
	case peer.Ready, peer.Connecting, peer.Idle:
		return classUsable
	case peer.TransientFailure:
		return classFailed
	}
	return classGone
}

// registerAddr announces the Channel's address through WithRegistrar's
// registrar, if any.
func (c *Channel) registerAddr() error {
	if c.o.registrar == nil {
		return nil
	}
	host, _, _ := net.SplitHostPort(c.HostPort())
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("channel: WithRegistrar: the Channel listens on %s, an address no client can dial; listen on the address clients reach this server at", c.HostPort())
	}
	reg, err := c.o.registrar.Register(c.HostPort())
	if err != nil {
		return fmt.Errorf("channel: WithRegistrar: register %s in %s: %w", c.HostPort(), c.o.registrar, err)
	}
	c.regMu.Lock()
	c.regs = append(c.regs, reg)
	c.regMu.Unlock()
	return nil
}

// deregister withdraws the Channel's registrations, each within ctx, and
// returns their errors joined.
func (c *Channel) deregister(ctx context.Context) error {
	c.regMu.Lock()
	regs := c.regs
	c.regMu.Unlock()
	var errs []error
	for _, r := range regs {
		if err := r.Deregister(ctx); err != nil {
			errs = append(errs, fmt.Errorf("channel: deregister %s from %s: %w", r.State().HostPort, r.State().Registry, err))
		}
	}
	return errors.Join(errs...)
}

// Shutdown takes the Channel out of service without failing calls, in
// order:
//
//  1. it withdraws its registrations (WithRegistrar), so that clients
//     following the registry stop choosing it;
//  2. it tells its Sluice clients, on every connection they made, that it
//     is leaving: each stops choosing it at once and closes its connection
//     once the calls on it are answered, so that no call is on the wire
//     when a connection closes;
//  3. it serves on, listener open, until every Sluice client has closed
//     its connection and no call has come from a plain TChannel client
//     (tchannel-go, yab) for ShutdownConfig.Quiet: for
//     ShutdownConfig.Grace at most (skipped when the Channel does not
//     serve). Plain clients cannot be told; their calls keep being served
//     until they stop, as their registry tells them;
//  4. it declines new requests before any handler runs, marked so that
//     Sluice clients retry them on another peer transparently;
//  5. it waits for the handlers in flight to finish, until ctx ends;
//  6. it closes, as Close does.
//
// A Sluice client whose every peer is leaving fails its calls at once with
// UNAVAILABLE, or waits for a peer within its deadline if it asked to
// (WaitForReady), as when every peer's connection has failed.
//
// Its outbound calls keep working until step 6, so handlers in flight
// can still call other services. It returns ctx's error if ctx ended
// before the handlers finished (the Channel is closed either way), or the
// deregistration's error. Close is the immediate form. Calling Shutdown
// on a closed Channel, or while another Shutdown runs, returns nil at once.
func (c *Channel) Shutdown(ctx context.Context) error {
	if c.closed.Load() || !c.phase.CompareAndSwap(phaseServing, phaseLeaving) {
		return nil
	}
	dctx, cancel := context.WithTimeout(ctx, deregisterWait)
	err := c.deregister(dctx)
	cancel()
	c.peers.g.Leave()
	if c.peers.serving() {
		c.leave(ctx)
	}
	c.phase.CompareAndSwap(phaseLeaving, phaseDraining) // not over a Close's CLOSED
	if err2 := c.drain(ctx); err2 != nil {
		err = errors.Join(err, err2)
	}
	c.closeWithin(ctx)
	return err
}

// leave serves on until no Sluice client holds a connection to the Channel
// and no call has come from a plain client for the quiet time, the grace
// has passed, or ctx ends.
func (c *Channel) leave(ctx context.Context) {
	s := c.o.shutdown.withDefaults()
	if s.Grace < 0 {
		return
	}
	clk := c.o.clock
	end := clk.Now().Add(s.Grace)
	step := max(min(s.Quiet/4, leavePoll), time.Millisecond)
	_, _, last := c.peers.g.Inbound()
	lastSeen := clk.Now()
	for {
		now := clk.Now()
		signalled, _, calls := c.peers.g.Inbound()
		if calls != last {
			last, lastSeen = calls, now
		}
		if signalled == 0 && now.Sub(lastSeen) >= s.Quiet || !now.Before(end) {
			return
		}
		t := clk.NewTimer(min(step, end.Sub(now)))
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// leavePoll is how often leave looks at the connections and calls.
const leavePoll = 10 * time.Millisecond

// drain declines new requests and waits until none is in a handler, or
// ctx ends.
func (c *Channel) drain(ctx context.Context) error {
	c.declining.Store(true)
	for c.started.Load() != c.ended.Load() {
		t := c.o.clock.NewTimer(drainPoll)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("channel: Shutdown: %d requests still in their handlers: %w", c.started.Load()-c.ended.Load(), ctx.Err())
		}
	}
	return nil
}

// drainPoll is how often drain looks whether the handlers are done.
const drainPoll = 5 * time.Millisecond

// debugDiscovery fills in the resolvers' and registrations' parts of st.
func (c *Channel) debugDiscovery(st *channelz.State) {
	st.Phase = phaseNames[c.phase.Load()]
	st.Registrations = []channelz.Registration{}
	c.regMu.Lock()
	regs := c.regs
	c.regMu.Unlock()
	for _, r := range regs {
		rs := r.State()
		st.Registrations = append(st.Registrations, channelz.Registration{Registry: rs.Registry, HostPort: rs.HostPort,
			Registered: rs.Registered, Lease: orNull(rs.Lease), Registrations: rs.Registrations, Deregistered: rs.Deregistered,
			LastError: orNull(rs.LastError), LastErrorTime: timeOrNull(rs.LastErrorTime)})
	}
	for i := range st.Services {
		cl := c.client(st.Services[i].Name)
		if cl == nil || cl.res == nil {
			continue
		}
		ws := cl.res.watcher.State()
		st.Services[i].Resolver = &channelz.Resolver{Target: ws.Target, Status: string(ws.Status), Peers: ws.Peers,
			Updates: ws.Updates, LastUpdate: timeOrNull(ws.LastUpdate), Errors: ws.Errors,
			LastError: orNull(ws.LastError), LastErrorTime: timeOrNull(ws.LastErrorTime)}
	}
}

func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func timeOrNull(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// regState guards the Channel's registrations.
type regState struct {
	regMu sync.Mutex
	regs  []discovery.Registration
}
