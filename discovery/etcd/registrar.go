package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/uber-go/tally/v4"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/discovery"
	"github.com/sluice-rpc/sluice/internal/hostport"
	"github.com/sluice-rpc/sluice/internal/ratelog"
	"github.com/sluice-rpc/sluice/stats"
)

// Registrar registers servers' addresses under an etcd prefix, each under
// a lease it keeps alive (see the package doc). It is safe for concurrent
// use. Its metrics are the sums over its registrations: the
// registration.registered gauge counts the addresses etcd holds now.
type Registrar struct {
	cfg  RegistrarConfig // defaults applied
	name string

	registered   tally.Gauge
	writes, errs tally.Counter
	log          *ratelog.Logger

	mu     sync.Mutex
	active map[string]bool // host:ports registered and not yet deregistered
	held   int             // registrations etcd holds now, for the gauge
}

var _ discovery.Registrar = (*Registrar)(nil)

// NewRegistrar returns a Registrar as cfg says.
func NewRegistrar(cfg RegistrarConfig) (*Registrar, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &Registrar{cfg: cfg, name: targetName(cfg.Client, cfg.Prefix), active: map[string]bool{},
		registered: cfg.Scope.Gauge(stats.RegistrationRegistered),
		writes:     cfg.Scope.Counter(stats.RegistrationWrites),
		errs:       cfg.Scope.Counter(stats.RegistrationErrors),
		log:        ratelog.New(cfg.Logger, cfg.Clock.Now)}, nil
}

// String returns etcd://<the client's endpoints>/<prefix>, the form
// ParseTarget reads.
func (r *Registrar) String() string { return r.name }

// Register starts announcing hostPort at PREFIX/hostPort and returns at
// once (see discovery.Registrar); State says when etcd holds it. It is an
// error to register a host:port that is not valid, or that this Registrar
// holds already (until its Deregister).
func (r *Registrar) Register(hostPort string) (discovery.Registration, error) {
	if err := hostport.Validate(hostPort); err != nil {
		return nil, fmt.Errorf("etcd: registering: %w", err)
	}
	value, err := encode(hostPort, r.cfg.Metadata)
	if err != nil { // Validate encoded it already
		return nil, fmt.Errorf("etcd: registering %s: %w", hostPort, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.active[hostPort] {
		return nil, fmt.Errorf("etcd: %s is registered already in %s; deregister it first", hostPort, r.name)
	}
	r.active[hostPort] = true
	ctx, cancel := context.WithCancel(context.Background())
	g := &registration{r: r, hostPort: hostPort, key: r.cfg.Prefix + "/" + hostPort, value: value, cancel: cancel, done: make(chan struct{}),
		st: discovery.RegistrationState{Registry: r.name, HostPort: hostPort}}
	go g.run(ctx)
	return g, nil
}

// registration is one address a Registrar announces.
type registration struct {
	r        *Registrar
	hostPort string
	key      string
	value    string
	cancel   context.CancelFunc
	done     chan struct{} // closed when run has returned

	mu      sync.Mutex
	st      discovery.RegistrationState
	granted clientv3.LeaseID // the last lease granted, 0 if none
	wrote   clientv3.LeaseID // the lease the key was last written under, 0 if none
	holds   bool             // counted in r.held

	dmu       sync.Mutex // serialises Deregister
	withdrawn bool       // Deregister deleted the key and revoked the lease
}

// run registers until ctx ends: each round grants a lease, writes the key
// under it and keeps it alive until etcd stops renewing it.
func (g *registration) run(ctx context.Context) {
	defer close(g.done)
	cfg := &g.r.cfg
	failures := 0 // in a row, for the backoff
	for {
		var written time.Time
		err := g.round(ctx, func() { written = cfg.Clock.Now() })
		if ctx.Err() != nil {
			return
		}
		g.fail(err)
		// A key kept a whole TTL was renewed: the backoff starts again.
		// One lost at once (etcd keeps refusing the keepalive) is not,
		// or each round would wait only the backoff's first step.
		if !written.IsZero() && cfg.Clock.Since(written) >= cfg.TTL {
			failures = 0
		}
		failures++
		if clock.Sleep(ctx, cfg.Clock, cfg.Backoff.Delay(failures, rand.Float64())) != nil {
			return
		}
	}
}

// round grants a lease, writes the key under it, calls written, and keeps
// the lease alive until it is lost (it returns why) or ctx ends.
func (g *registration) round(ctx context.Context, written func()) error {
	cli, ttl := g.r.cfg.Client, g.r.cfg.TTL
	rctx, cancel := context.WithTimeout(ctx, ttl)
	lease, err := cli.Grant(rctx, int64(ttl/time.Second))
	cancel()
	if err != nil {
		return fmt.Errorf("etcd: granting a lease for %s: %w", g.key, err)
	}
	g.mu.Lock()
	g.granted = lease.ID
	g.mu.Unlock()
	rctx, cancel = context.WithTimeout(ctx, ttl)
	_, err = cli.Put(rctx, g.key, g.value, clientv3.WithLease(lease.ID))
	cancel()
	if err != nil {
		return fmt.Errorf("etcd: writing %s under lease %016x: %w", g.key, lease.ID, err)
	}
	g.hold(lease.ID)
	written()
	kctx, kcancel := context.WithCancel(ctx)
	defer kcancel()
	ka, err := cli.KeepAlive(kctx, lease.ID)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		g.lose()
		return fmt.Errorf("etcd: keeping lease %016x of %s alive: %w", lease.ID, g.key, err)
	}
	// etcd's client closes ka when the lease is gone (etcd answered a
	// renewal with TTL 0: it expired, or etcd came back without it) or
	// when no renewal was answered within the TTL.
	for range ka {
	}
	if ctx.Err() != nil {
		return nil // Deregister's to account for
	}
	g.lose()
	return fmt.Errorf("etcd: lease %016x of %s lost: etcd no longer renews it (unreachable for longer than the TTL, or restarted without it); registering again",
		lease.ID, g.key)
}

// hold records that etcd holds the key under lease.
func (g *registration) hold(lease clientv3.LeaseID) {
	g.mu.Lock()
	if g.st.LastError != "" {
		g.r.log.Log(slog.LevelInfo, "etcd: registered again", slog.String("key", g.key))
	}
	g.wrote = lease
	g.st.Registered, g.st.Lease = true, fmt.Sprintf("%016x", int64(lease))
	g.st.Registrations++
	g.mu.Unlock()
	g.r.writes.Inc(1)
	g.setHeld(true)
}

// lose records that etcd no longer holds the key, as far as g knows.
func (g *registration) lose() {
	g.mu.Lock()
	g.st.Registered, g.st.Lease = false, ""
	g.mu.Unlock()
	g.setHeld(false)
}

// setHeld counts g in its Registrar's gauge, or not.
func (g *registration) setHeld(holds bool) {
	r := g.r
	r.mu.Lock()
	defer r.mu.Unlock()
	g.mu.Lock()
	changed := g.holds != holds
	g.holds = holds
	g.mu.Unlock()
	if !changed {
		return
	}
	if holds {
		r.held++
	} else {
		r.held--
	}
	r.registered.Update(float64(r.held))
}

func (g *registration) fail(err error) {
	g.mu.Lock()
	g.st.LastError, g.st.LastErrorTime = err.Error(), g.r.cfg.Clock.Now()
	g.mu.Unlock()
	g.r.log.Warn("etcd: registration failed; trying again after a backoff", slog.String("key", g.key), slog.Any("error", err))
	g.r.errs.Inc(1)
}

// State returns the registration's state now.
func (g *registration) State() discovery.RegistrationState {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.st
}

// Deregister stops renewing the lease, deletes the key if it is still
// under this registration's lease (a server registered since at the same
// address keeps its key), and revokes the lease. It returns once etcd has
// done both, or with an error when ctx ends first or etcd fails; etcd then
// drops the key when the lease expires, within the TTL. A later call after
// one that succeeded returns nil at once; after one that failed, it tries
// again.
func (g *registration) Deregister(ctx context.Context) error {
	g.mu.Lock()
	first := !g.st.Deregistered
	g.st.Deregistered = true
	g.mu.Unlock()
	if first {
		g.cancel()
		g.r.mu.Lock()
		delete(g.r.active, g.hostPort)
		g.r.mu.Unlock()
	}
	// Every wait of run's ends with its context: this is prompt.
	<-g.done
	g.dmu.Lock()
	defer g.dmu.Unlock()
	if g.withdrawn {
		return nil
	}
	err := g.withdraw(ctx)
	if err != nil {
		g.fail(err)
	} else {
		g.withdrawn = true
	}
	// Renewals have stopped: etcd drops the key within the TTL if the
	// withdrawal failed.
	g.lose()
	return err
}

// withdraw deletes the key if it is under the lease last written with,
// and revokes that lease and the last granted one.
func (g *registration) withdraw(ctx context.Context) error {
	cli := g.r.cfg.Client
	g.mu.Lock()
	granted, wrote := g.granted, g.wrote
	g.mu.Unlock()
	if wrote != 0 {
		_, err := cli.Txn(ctx).
			If(clientv3.Compare(clientv3.LeaseValue(g.key), "=", wrote)).
			Then(clientv3.OpDelete(g.key)).
			Commit()
		if err != nil {
			return fmt.Errorf("etcd: deregistering %s: deleting the key: %w", g.key, err)
		}
	}
	leases := []clientv3.LeaseID{wrote}
	if granted != wrote {
		leases = append(leases, granted)
	}
	for _, lease := range leases {
		if lease == 0 {
			continue
		}
		if _, err := cli.Revoke(ctx, lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return fmt.Errorf("etcd: deregistering %s: revoking lease %016x: %w", g.key, lease, err)
		}
	}
	return nil
}
