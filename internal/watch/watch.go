// Package watch runs a Channel Client's resolver (discovery.Resolver) and
// applies what it finds to the Client's peers, keeping the last good set
// when the resolver fails or reports a set that breaks its bounds. It is
// the Channel's machinery: a resolver's author implements
// discovery.Resolver and never needs it.
package watch

import (
	"context"
	"fmt"
	"github.com/sluice-rpc/sluice/discovery"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/balancing"
	"github.com/sluice-rpc/sluice/internal/config"
	"github.com/sluice-rpc/sluice/internal/hostport"
	"github.com/sluice-rpc/sluice/internal/ratelog"
	"github.com/sluice-rpc/sluice/stats"
	"github.com/uber-go/tally/v4"
)

// Status says how a Watcher's resolver is faring.
type Status string

const (
	// Resolving: no answer yet, neither a set nor a failure.
	Resolving Status = "RESOLVING"
	// OK: the resolver's last report was a set, now in force.
	OK Status = "OK"
	// Failing: the resolver's last report was a failure; the last good
	// set (if any) stays in force.
	Failing Status = "FAILING"
)

// State is what a Watcher knows of its resolver.
type State struct {
	// Target is the resolver's String.
	Target string
	Status Status
	// Peers is the number of peers in the set in force.
	Peers int
	// Updates counts the sets applied; LastUpdate is when the last one
	// was (zero: none yet).
	Updates    uint64
	LastUpdate time.Time
	// Errors counts the failures; LastError is the last one ("" if none),
	// LastErrorTime when it happened.
	Errors        uint64
	LastError     string
	LastErrorTime time.Time
}

// Config configures a Watcher.
type Config struct {
	// Resolver finds the peers. Required.
	Resolver discovery.Resolver
	// Apply receives each set the Watcher accepts, one call at a time, on
	// the resolver's goroutine: every address valid, no host:port twice,
	// each weight > 0. An error it returns counts as a failure. Required.
	Apply func([]discovery.Address) error
	// Clock stamps the State; nil means clock.Real.
	Clock clock.Clock
	// MaxPeers bounds a set: a larger one is a failure, and the last good
	// set stays. 0 means discovery.DefaultMaxPeers.
	MaxPeers int
	// Scope receives the discovery metrics (stats.DiscoveryUpdates, ...);
	// nil means nowhere. Tag it with what it watches for (the Channel tags
	// it with the service).
	Scope tally.Scope
	// Logger receives the Watcher's lines: at Warn when its resolver
	// starts failing (the last good set stays), at Info when it answers
	// again, at Debug each failure; at most 10 at once and 10 a second,
	// since a registry's content decides them. Nil means slog.Default(),
	// read when a line is written.
	Logger *slog.Logger
}

// Watcher runs a discovery.Resolver and applies what it finds, keeping the last good
// set through failures: a lookup error, an empty set after a non-empty
// one, or a set of more than MaxPeers, changes nothing but the State. An
// address that is not a valid host:port, an unspecified one (0.0.0.0, ::),
// or one whose weight is neither 0 nor in [balance.MinWeight, balance.MaxWeight]
// (balancing.CheckWeight), is left out of its set
// and reported as a failure; a host:port listed twice counts once (its
// first entry). It is safe for concurrent use.
//
// A set that shrinks but is not empty is applied as it is: the Watcher
// cannot tell a registry that lost entries from servers that left. After
// an etcd restarted empty, say, the first servers to register again are
// the whole set until the others do (within their lease's TTL).
type Watcher struct {
	cfg    Config
	cancel context.CancelFunc
	done   chan struct{}
	now    chan struct{} // ResolveNow's requests, coalesced

	updates, errors tally.Counter
	peers, failingG tally.Gauge
	log             *ratelog.Logger
	mu              sync.Mutex // serialises reports; guards st
	st              State
}

// Validate reports the first rule c breaks, in the order of the fields, as
// a *retry.FieldError, or nil.
func (c Config) Validate() error {
	switch {
	case c.Resolver == nil:
		return config.Errorf("watch", "Config.Resolver", config.Verbatim("nil"), "must be the resolver of the target to follow")
	case c.Apply == nil:
		return config.Errorf("watch", "Config.Apply", config.Verbatim("nil"), "must be the function that takes each peer set")
	case c.MaxPeers < 0:
		return config.Errorf("watch", "Config.MaxPeers", c.MaxPeers, "must be >= 0 (0 means the default, %d)", discovery.DefaultMaxPeers)
	}
	return nil
}

// New starts cfg.Resolver on a goroutine of its own and returns its
// Watcher, or cfg's validation error; Close stops it.
func New(cfg Config) (*Watcher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxPeers == 0 {
		cfg.MaxPeers = discovery.DefaultMaxPeers
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
	}
	scope := cfg.Scope
	if scope == nil {
		scope = tally.NoopScope
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &Watcher{cfg: cfg, cancel: cancel, done: make(chan struct{}), now: make(chan struct{}, 1),
		updates: scope.Counter(stats.DiscoveryUpdates), errors: scope.Counter(stats.DiscoveryErrors),
		peers: scope.Gauge(stats.DiscoveryPeers), failingG: scope.Gauge(stats.DiscoveryFailing),
		log: ratelog.New(cfg.Logger, cfg.Clock.Now),
		st:  State{Target: cfg.Resolver.String(), Status: Resolving}}
	go func() {
		defer close(w.done)
		cfg.Resolver.Resolve(ctx, (*updates)(w))
	}()
	return w, nil
}

// ResolveNow asks the resolver for a fresh lookup (see
// discovery.Updates.ResolveNow). It does not wait; requests made before the resolver
// takes the last one count as one.
func (w *Watcher) ResolveNow() {
	select {
	case w.now <- struct{}{}:
	default:
	}
}

// State returns the Watcher's state now.
func (w *Watcher) State() State {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.st
}

// Close stops the resolver and waits for it to return. The set in force
// stays applied.
func (w *Watcher) Close() {
	w.cancel()
	<-w.done
}

// updates is the Watcher as its resolver's discovery.Updates, kept off the
// Watcher's own method set.
type updates Watcher

func (u *updates) ResolveNow() <-chan struct{} { return u.now }

func (u *updates) Error(err error) {
	w := (*Watcher)(u)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failLocked(err.Error())
}

func (u *updates) Update(addrs []discovery.Address) {
	w := (*Watcher)(u)
	w.mu.Lock()
	defer w.mu.Unlock()
	set, bad := clean(addrs)
	if len(set) == 0 && w.st.Peers > 0 {
		why := "the answer is empty"
		if bad != "" {
			why = "no valid peer in the answer (" + bad + ")"
		}
		w.failLocked(fmt.Sprintf("%s; keeping the last good set of %d peers", why, w.st.Peers))
		return
	}
	if len(set) > w.cfg.MaxPeers {
		w.failLocked(fmt.Sprintf("the answer has %d peers, more than MaxPeers (%d); keeping the last good set of %d peers", len(set), w.cfg.MaxPeers, w.st.Peers))
		return
	}
	if err := w.cfg.Apply(set); err != nil {
		w.failLocked(fmt.Sprintf("applying %d peers: %v", len(set), err))
		return
	}
	w.st.Peers = len(set)
	w.st.Updates++
	w.st.LastUpdate = w.cfg.Clock.Now()
	w.updates.Inc(1)
	w.peers.Update(float64(len(set)))
	if bad != "" {
		w.failLocked(bad + "; applied the other " + fmt.Sprint(len(set)))
		return
	}
	if w.st.Status == Failing {
		w.log.Log(slog.LevelInfo, "discovery: the resolver answers again", slog.String("target", w.st.Target), slog.Int("peers", len(set)))
	}
	w.st.Status = OK
	w.failingG.Update(0)
}

// failLocked records the failure msg: at Warn in the log when the
// resolver was not failing already, at Debug when it was.
func (w *Watcher) failLocked(msg string) {
	level := slog.LevelWarn
	if w.st.Status == Failing {
		level = slog.LevelDebug
	}
	w.log.Log(level, "discovery: the resolver failed; the last good set stays", slog.String("target", w.st.Target), slog.String("error", msg))
	w.st.Status = Failing
	w.st.Errors++
	w.st.LastError = msg
	w.st.LastErrorTime = w.cfg.Clock.Now()
	w.errors.Inc(1)
	w.failingG.Update(1)
}

// clean returns addrs without the invalid entries and the repeated
// host:ports, weights defaulted to 1, and a description of the first
// invalid entry ("" if none).
func clean(addrs []discovery.Address) ([]discovery.Address, string) {
	set := make([]discovery.Address, 0, len(addrs))
	seen := make(map[string]bool, len(addrs))
	bad, nbad := "", 0
	for i, a := range addrs {
		var why string
		if err := hostport.Validate(a.HostPort); err != nil {
			why = err.Error()
		} else if unspecified(a.HostPort) {
			why = fmt.Sprintf("%s: an unspecified address (0.0.0.0, ::), which no client can dial", a.HostPort)
		} else if err := balancing.CheckWeight(a.Weight); err != nil {
			why = a.HostPort + ": " + err.Error()
		}
		if why != "" {
			if nbad++; bad == "" {
				bad = fmt.Sprintf("entry %d: %s", i+1, why)
			}
			continue
		}
		if seen[a.HostPort] {
			continue
		}
		seen[a.HostPort] = true
		if a.Weight == 0 {
			a.Weight = 1
		}
		set = append(set, a)
	}
	if nbad > 1 {
		bad += fmt.Sprintf(" (and %d more invalid entries)", nbad-1)
	}
	return set, bad
}

// unspecified reports whether hostPort's host is 0.0.0.0 or ::: what a
// server listening on every interface would register, and what some DNS
// servers answer for a name they block.
func unspecified(hostPort string) bool {
	host, _, _ := net.SplitHostPort(hostPort)
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}
