package leasing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/uber-go/tally/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-rpc/sluice/backoff"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/config"
	"github.com/sluice-rpc/sluice/internal/ratelog"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
	"github.com/sluice-rpc/sluice/leasing/internal/master"
	"github.com/sluice-rpc/sluice/leasing/internal/wirenum"
	"github.com/sluice-rpc/sluice/stats"
)

// Client defaults.
const (
	// DefaultClientMinRefreshInterval is the shortest interval between two
	// requests for the same resource: the original Doorman client's rule
	// (its servers answer every request; this bounds the load a client
	// puts on them).
	DefaultClientMinRefreshInterval = 5 * time.Second
	// DefaultRPCTimeout bounds one RPC to the server.
	DefaultRPCTimeout = 5 * time.Second
	// DefaultMaxRedirects bounds the mastership redirects one refresh follows.
	DefaultMaxRedirects = 3
)

// defaultBackoff returns the backoff after failed refreshes when
// ClientConfig.Backoff is the zero value: 1 s doubled per failure, at most
// a minute, each wait drawn from the upper half of its ceiling (equal
// jitter), so that clients that lost the server together do not return
// together.
func defaultBackoff() backoff.Exponential {
	return backoff.Exponential{Initial: time.Second, Max: time.Minute, Multiplier: 2, Jitter: backoff.EqualJitter}
}

// Mode says what capacity a client uses for a resource while it holds no
// valid lease (before the first answer, after its lease expired, or while
// the server is unreachable).
type Mode int

const (
	// Optimistic uses what the client wants: fit for online traffic to
	// resources protected by other means.
	Optimistic Mode = iota
	// Pessimistic uses 0: the resource is not used until a lease arrives.
	Pessimistic
	// Safe uses the safe capacity the server last sent (negative means
	// unlimited); 0 until the server has sent one.
	Safe
)

// String returns "optimistic", "pessimistic" or "safe".
func (m Mode) String() string {
	switch m {
	case Optimistic:
		return "optimistic"
	case Pessimistic:
		return "pessimistic"
	case Safe:
		return "safe"
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// ClientConfig configures a Client.
type ClientConfig struct {
	// Addr is the HOST:PORT of a Doorman server; the client asks it who the
	// master is and follows redirects. Required.
	Addr string
	// ID identifies the client to the server; empty means HOSTNAME:PID.
	// It must be unique among the server's clients.
	ID string
	// Clock is the time source; nil means the wall clock.
	Clock clock.Clock
	// Scope receives the client's metrics; nil means tally.NoopScope.
	Scope tally.Scope
	// DialOptions are used to dial servers; nil means plaintext.
	DialOptions []grpc.DialOption
	// Dial, if set, opens the connections to servers instead of gRPC
	// (DialOptions are then unused): an in-process transport for
	// simulations and tests.
	Dial func(addr string) (pb.Conn, error)
	// MinRefreshInterval is the shortest interval between two requests
	// for the same resource (0 means DefaultClientMinRefreshInterval).
	MinRefreshInterval time.Duration
	// Backoff spaces the refreshes after failures in a row; the zero
	// value means 1 s doubled per failure, at most a minute, each wait
	// drawn from the upper half of its ceiling (equal jitter).
	Backoff backoff.Exponential
	// RPCTimeout bounds each RPC (0 means DefaultRPCTimeout).
	RPCTimeout time.Duration
	// MaxRedirects bounds mastership redirects per refresh (0 means
	// DefaultMaxRedirects).
	MaxRedirects int
	// ManualRefresh, if true, starts no background refresh loop: the
	// caller drives Refresh or Tick itself (one-shot tools, deterministic
	// tests, simulations).
	ManualRefresh bool
	// Rand returns uniform numbers in [0, 1) for the jitter of the backoff
	// after failed refreshes; nil means math/rand/v2's Float64. A
	// simulation passes a seeded source's Float64 to be reproducible. The
	// client calls it under its own lock, so it need not be safe for
	// concurrent use.
	Rand func() float64
	// Logger receives the client's lines: at Warn when refreshing the
	// leases starts failing (the client keeps its leases until they
	// expire, then falls back to each resource's Mode), at Info when a
	// refresh succeeds again; once per change, not per retry, and at most
	// 10 at once and 10 a second (a server decides what fails). Nil means
	// slog.Default(), read when a line is written. Any slog.Handler will
	// do (zap's through go.uber.org/zap/exp/zapslog).
	Logger *slog.Logger
}

// Validate reports the first field of c that breaks its rule, in the
// order of the fields, as a *retry.FieldError, or nil.
func (c ClientConfig) Validate() error {
	switch {
	case c.Addr == "":
		return config.Errorf(pkg, "ClientConfig.Addr", c.Addr, "must be the HOST:PORT of a Doorman server")
	case c.MinRefreshInterval < 0:
		return config.Errorf(pkg, "ClientConfig.MinRefreshInterval", c.MinRefreshInterval, "must be >= 0 (0 means the default, %v)", DefaultClientMinRefreshInterval)
	case c.RPCTimeout < 0:
		return config.Errorf(pkg, "ClientConfig.RPCTimeout", c.RPCTimeout, "must be >= 0 (0 means the default, %v)", DefaultRPCTimeout)
	case c.MaxRedirects < 0:
		return config.Errorf(pkg, "ClientConfig.MaxRedirects", c.MaxRedirects, "must be >= 0 (0 means the default, %d)", DefaultMaxRedirects)
	}
	return config.Nest(c.Backoff.Validate(), pkg, "ClientConfig.Backoff")
}

// pkg names this package in configuration errors.
const pkg = "leasing"

// ResourceConfig configures one resource of a Client.
type ResourceConfig struct {
	// Wants is the capacity wanted (>= 0, finite). With EstimateWants it is
	// the starting value.
	Wants float64
	// Priority is passed to the server; the built-in algorithms ignore it.
	Priority int64
	// Mode is what to use while no valid lease is held.
	Mode Mode
	// EstimateWants, if true, replaces Wants at every refresh with an
	// estimate of the demand observed by the resource's RateLimiter or
	// Gauge: the observed rate (or peak concurrency) plus 10%, or 1.5 times
	// the capacity when demand reaches 90% of it.
	EstimateWants bool
}

// Validate reports the first field of c that breaks its rule, as a
// *retry.FieldError, or nil.
func (c ResourceConfig) Validate() error {
	if !wirenum.FiniteNonNegative(c.Wants) {
		return config.Errorf(pkg, "ResourceConfig.Wants", c.Wants, "must be a finite number >= 0")
	}
	if c.Mode < Optimistic || c.Mode > Safe {
		return config.Errorf(pkg, "ResourceConfig.Mode", c.Mode, "must be Optimistic, Pessimistic or Safe")
	}
	return nil
}

// Client holds leases on Doorman resources for one process. It refreshes
// all of them with one bulk GetCapacity at the server's refresh interval
// (never more often than MinRefreshInterval per resource), follows
// mastership redirects, backs off exponentially while the server is
// unreachable and releases its leases on Close.
//
// A Client is safe for concurrent use.
type Client struct {
	cfg       ClientConfig
	id        string
	clock     clock.Clock
	scope     tally.Scope
	refreshes tally.Counter
	errors    tally.Counter

	mu        sync.Mutex
	resources map[string]*Resource
	closed    bool

	rpcMu  sync.Mutex    // serialises refreshes and connection changes
	master master.Finder // guarded by rpcMu

	wake chan struct{}
	stop context.CancelFunc // ends the refresh loop's context
	done chan struct{}

	// backoff after failed refreshes: cfg.Backoff, defaultBackoff() unless
	// set.
	backoff backoff.Exponential
	rand    func() float64 // uniform in [0, 1), for backoff jitter; used under tickMu

	log *ratelog.Logger // ClientConfig.Logger, rate-limited on the client's clock

	tickMu   sync.Mutex // serialises Tick
	failures int        // failed refreshes in a row (tickMu)
	retryAt  time.Time  // when the backoff after them ends (tickMu)
}

// NewClient returns a client of the Doorman server at cfg.Addr. Unless
// cfg.ManualRefresh is set it starts a background refresh loop, stopped by
// Close.
func NewClient(cfg ClientConfig) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.ID == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "localhost"
		}
		cfg.ID = host + ":" + strconv.Itoa(os.Getpid())
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
	}
	if cfg.Scope == nil {
		cfg.Scope = tally.NoopScope
	}
	if cfg.MinRefreshInterval == 0 {
		cfg.MinRefreshInterval = DefaultClientMinRefreshInterval
	}
	if cfg.Backoff == (backoff.Exponential{}) {
		cfg.Backoff = defaultBackoff()
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	if cfg.RPCTimeout == 0 {
		cfg.RPCTimeout = DefaultRPCTimeout
	}
	if cfg.MaxRedirects == 0 {
		cfg.MaxRedirects = DefaultMaxRedirects
	}
	if cfg.DialOptions == nil {
		cfg.DialOptions = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	c := &Client{
		cfg:       cfg,
		id:        cfg.ID,
		clock:     cfg.Clock,
		scope:     cfg.Scope,
		refreshes: cfg.Scope.Counter(stats.LeaseRequests),
		errors:    cfg.Scope.Counter(stats.LeaseRefreshErrors),
		resources: make(map[string]*Resource),
		master: master.Finder{Addr: cfg.Addr, Dial: cfg.Dial, DialOptions: cfg.DialOptions, RPCTimeout: cfg.RPCTimeout,
			MaxRedirects: cfg.MaxRedirects, Prefix: "leasing"},
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		rand:    cfg.Rand,
		backoff: cfg.Backoff,
		log:     ratelog.New(cfg.Logger, cfg.Clock.Now),
	}
	if cfg.ManualRefresh {
		close(c.done)
	} else {
		ctx, stop := context.WithCancel(context.Background())
		c.stop = stop
		go c.run(ctx)
	}
	return c, nil
}

// ID returns the identifier the client presents to the server.
func (c *Client) ID() string { return c.id }

// Resource starts leasing capacity for resource id. The first request is
// sent at once by the refresh loop (or by the next Refresh). It is an error
// to add the same resource twice.
func (c *Client) Resource(id string, rc ResourceConfig) (*Resource, error) {
	if id == "" {
		return nil, errors.New("leasing: resource id is empty")
	}
	if err := rc.Validate(); err != nil {
		return nil, fmt.Errorf("%w (resource %q)", err, id)
	}
	scope := c.scope.Tagged(map[string]string{stats.LeaseTagResource: id})
	r := &Resource{
		c:             c,
		id:            id,
		priority:      rc.Priority,
		mode:          rc.Mode,
		estimate:      rc.EstimateWants,
		wants:         rc.Wants,
		capWants:      math.Inf(1),
		changed:       make(chan struct{}),
		estimateStart: c.clock.Now(),
		capacityGauge: scope.Gauge(stats.LeaseCapacity),
		wantsGauge:    scope.Gauge(stats.LeaseWants),
		waits:         scope.Counter(stats.LeaseWaits),
		rateLimited:   scope.Counter(stats.LeaseRateLimited),
		expired:       scope.Counter(stats.LeaseExpired),
	}
	r.notified = r.capacityLocked(r.estimateStart)
	r.wantsGauge.Update(r.wants)
	r.capacityGauge.Update(r.notified)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if _, dup := c.resources[id]; dup {
		return nil, fmt.Errorf("leasing: resource %q was already added to this client", id)
	}
	c.resources[id] = r
	c.poke()
	return r, nil
}

// poke wakes the refresh loop.
func (c *Client) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *Client) snapshot() []*Resource {
	c.mu.Lock()
	defer c.mu.Unlock()
	rs := make([]*Resource, 0, len(c.resources))
	for _, r := range c.resources {
		rs = append(rs, r)
	}
	return rs
}

// Refresh sends one bulk GetCapacity for every resource not asked for in
// the last MinRefreshInterval and applies the answer. It follows mastership
// redirects; on an error the client forgets the master and rediscovers it
// on the next refresh.
func (c *Client) Refresh(ctx context.Context) error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return ErrClosed
	}
	c.rpcMu.Lock()
	defer c.rpcMu.Unlock()
	now := c.clock.Now()
	req := &pb.GetCapacityRequest{ClientId: proto.String(c.id)}
	type sent struct {
		r     *Resource
		wants uint64 // the resource's wantsGen when its request was made
	}
	asked := make(map[string]sent)
	for _, r := range c.snapshot() {
		if rr, gen := r.request(now, c.cfg.MinRefreshInterval); rr != nil {
			req.Resource = append(req.Resource, rr)
			asked[r.id] = sent{r, gen}
		}
	}
	if len(req.Resource) == 0 {
		return nil
	}
	c.refreshes.Inc(1)
	resp, err := c.getCapacity(ctx, req)
	if err != nil {
		c.errors.Inc(1)
		return err
	}
	// The server times its minimum refresh interval from when a request
	// arrived, which is after now: time ours from the answer, so that the
	// next request never arrives too soon and is dropped.
	now = c.clock.Now()
	answered := make(map[string]bool, len(asked))
	for _, rr := range resp.GetResponse() {
		if a, ok := asked[rr.GetResourceId()]; ok {
			answered[a.r.id] = true
			a.r.apply(rr, now)
		}
	}
	for _, a := range asked {
		r := a.r
		r.mu.Lock()
		r.lastRequest = now
		// The server has the wants we sent. A resource it skipped, or
		// whose wants changed while the request was in flight, keeps its
		// urgency: the newer wants still go out early.
		var (
			capacity float64
			changed  bool
		)
		if answered[r.id] && r.wantsGen == a.wants {
			r.urgent = false
			r.capWants = math.Inf(1)
			capacity, changed = r.checkChangedLocked(now)
		}
		r.mu.Unlock()
		if changed {
			r.capacityGauge.Update(capacity)
		}
	}
	return nil
}

// getCapacity sends req to the master, discovering it and following
// redirects. Callers hold rpcMu.
func (c *Client) getCapacity(ctx context.Context, req *pb.GetCapacityRequest) (*pb.GetCapacityResponse, error) {
	var resp *pb.GetCapacityResponse
	err := c.master.Call(ctx, "GetCapacity", func(ctx context.Context, conn pb.Conn) (*pb.Mastership, error) {
		var err error
		resp, err = conn.GetCapacity(ctx, req)
		if err != nil || len(resp.GetResponse()) > 0 {
			return nil, err
		}
		return resp.GetMastership(), nil
	})
	return resp, err
}

// run is the background refresh loop, until ctx ends (Close).
func (c *Client) run(ctx context.Context) {
	defer close(c.done)
	for {
		next, _ := c.Tick(ctx)
		if ctx.Err() != nil {
			return
		}
		// The deadline is fixed by Tick: should the clock move before the
		// timer exists, the wait must not start over.
		t := c.clock.NewTimerAt(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-c.wake: // a resource was added or its wants changed
			t.Stop()
		case <-t.C():
		}
	}
}

// Tick does at the clock's now what the refresh loop does when it wakes:
// it announces capacity changes (leases that expired), sends one Refresh
// if a resource is due and the backoff after failed refreshes has passed,
// and starts a backoff if that refresh fails. It returns when it next has
// work (a refresh due, a lease expiring, the backoff ending) and the
// refresh's error. Calling it early is harmless: nothing is sent before
// its time.
//
// The refresh loop calls Tick; with ManualRefresh a caller driving the
// client on a fake clock (a simulation) calls it at the times it returns,
// and after Resource or SetWants.
func (c *Client) Tick(ctx context.Context) (next time.Time, err error) {
	c.tickMu.Lock()
	defer c.tickMu.Unlock()
	now := c.clock.Now()
	for _, r := range c.snapshot() {
		r.checkChanged(now)
	}
	if !now.Before(c.retryAt) && c.due(now) {
		if err = c.Refresh(ctx); err != nil && ctx.Err() == nil {
			if c.failures == 0 {
				c.log.Warn("leasing: refreshing leases failed, retrying with a backoff", slog.String("server", c.cfg.Addr), slog.Any("error", err))
			}
			c.failures++
			c.retryAt = c.clock.Now().Add(c.backoff.Delay(c.failures, c.rand()))
		} else if err == nil {
			if c.failures > 0 {
				c.log.Log(slog.LevelInfo, "leasing: refreshing leases works again", slog.String("server", c.cfg.Addr), slog.Int("failures", c.failures))
			}
			c.failures, c.retryAt = 0, time.Time{}
		}
		now = c.clock.Now()
	}
	return c.nextEvent(now), err
}

// due reports whether some resource should be refreshed at now.
func (c *Client) due(now time.Time) bool {
	for _, r := range c.snapshot() {
		if !r.nextRefresh(c.cfg.MinRefreshInterval).After(now) {
			return true
		}
	}
	return false
}

// nextEvent returns when a resource is next due for refresh (not before
// the backoff ends) or a lease next expires, at most MaxBackoff after now
// (c.tickMu held).
func (c *Client) nextEvent(now time.Time) time.Time {
	next := now.Add(c.backoff.Max)
	for _, r := range c.snapshot() {
		t := r.nextRefresh(c.cfg.MinRefreshInterval)
		if t.Before(c.retryAt) {
			t = c.retryAt
		}
		if t.Before(next) {
			next = t
		}
		if t, ok := r.expiry(); ok && t.After(now) && t.Before(next) {
			next = t
		}
	}
	if next.Before(now) {
		return now
	}
	return next
}

// Close stops the refresh loop, releases every lease (best effort, within
// RPCTimeout) and closes the connection. It returns the release error, if
// any. Resources fall back to their modes afterwards.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	ids := make([]string, 0, len(c.resources))
	for id := range c.resources {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	if c.stop != nil {
		c.stop()
	}
	<-c.done
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.RPCTimeout)
	defer cancel()
	err := c.release(ctx, ids)
	c.rpcMu.Lock()
	c.master.Forget()
	c.rpcMu.Unlock()
	return err
}

// release sends ReleaseCapacity for ids to the master.
func (c *Client) release(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	c.rpcMu.Lock()
	defer c.rpcMu.Unlock()
	req := &pb.ReleaseCapacityRequest{ClientId: proto.String(c.id), ResourceId: ids}
	for redirects := 0; ; redirects++ {
		conn, err := c.master.Conn(ctx)
		if err != nil {
			return err
		}
		rctx, cancel := context.WithTimeout(ctx, c.cfg.RPCTimeout)
		resp, err := conn.ReleaseCapacity(rctx, req)
		cancel()
		if err != nil {
			target := c.master.Target()
			c.master.Forget()
			return fmt.Errorf("leasing: ReleaseCapacity to %s: %w", target, err)
		}
		m := resp.GetMastership()
		if m == nil || m.GetMasterAddress() == c.master.Target() || (m.GetMasterAddress() == "" && c.master.Known()) {
			return nil
		}
		if err := c.master.Redirect(m, redirects); err != nil {
			return err
		}
	}
}

// Resource is one resource leased by a Client. Its capacity is the
// capacity of its unexpired lease (held down at once by lowered wants, see
// Capacity), or while it has none the value its Mode gives. RateLimiter and Gauge turn it into a local limit.
type Resource struct {
	c        *Client
	id       string
	priority int64
	mode     Mode
	estimate bool

	capacityGauge, wantsGauge   tally.Gauge
	waits, rateLimited, expired tally.Counter

	mu          sync.Mutex
	wants       float64
	lease       *pb.Lease // nil until the first answer
	leaseExpiry time.Time
	refresh     time.Duration
	safe        float64
	lastRequest time.Time
	urgent      bool   // wants changed since the last answered request that carried them
	wantsGen    uint64 // counts SetWants changes
	released    bool
	notified    float64
	changed     chan struct{}

	// capWants is the least the resource has wanted since the server last
	// answered its current wants (+Inf once it has): the server may hand
	// anything above it to other clients as soon as it hears the lower
	// wants, and their answers can arrive before this one's, so the lease
	// is used only up to it meanwhile.
	capWants float64

	// demand observed since estimateStart, for EstimateWants.
	estimateStart time.Time
	arrivals      float64
	peak          float64
}

// ID returns the resource's identifier.
func (r *Resource) ID() string { return r.id }

// Mode returns the resource's mode.
func (r *Resource) Mode() Mode { return r.mode }

// Capacity returns the capacity the resource may use now: the capacity of
// its unexpired lease, but no more than the least it has wanted since the
// server last answered its current wants, or, without a lease, what its
// Mode gives (wants, 0 or the safe capacity). It is +Inf when unlimited. A change it is the first to
// see (a lease that has just expired) is announced to Changed waiters.
func (r *Resource) Capacity() float64 {
	now := r.c.clock.Now()
	r.mu.Lock()
	capacity, changed := r.checkChangedLocked(now)
	r.mu.Unlock()
	if changed {
		r.capacityGauge.Update(capacity)
	}
	return capacity
}

func (r *Resource) capacityLocked(now time.Time) float64 {
	if r.lease != nil && now.Before(r.leaseExpiry) && !r.released {
		return min(r.lease.GetCapacity(), r.capWants)
	}
	switch r.mode {
	case Optimistic:
		return r.wants
	case Safe: // 0 until the server has sent a safe capacity
		if r.safe < 0 {
			return math.Inf(1)
		}
		return r.safe
	}
	return 0
}

// Lease returns the capacity and expiry of the resource's current lease;
// ok is false when it holds no unexpired lease.
func (r *Resource) Lease() (capacity float64, expiry time.Time, ok bool) {
	now := r.c.clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lease == nil || !now.Before(r.leaseExpiry) || r.released {
		return 0, time.Time{}, false
	}
	return r.lease.GetCapacity(), r.leaseExpiry, true
}

// Wants returns the capacity the resource asks for.
func (r *Resource) Wants() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.wants
}

// SetWants changes the capacity the resource asks for. A change is sent
// early, as soon as MinRefreshInterval has passed since the resource's
// last request, rather than at the next regular refresh.
func (r *Resource) SetWants(w float64) error {
	if !wirenum.FiniteNonNegative(w) {
		return fmt.Errorf("leasing: wants is %v for resource %q, must be a finite number >= 0", w, r.id)
	}
	r.mu.Lock()
	if w != r.wants {
		r.wants = w
		r.capWants = min(r.capWants, w)
		r.urgent = true
		r.wantsGen++
	}
	r.mu.Unlock()
	r.wantsGauge.Update(w)
	r.checkChanged(r.c.clock.Now())
	r.c.poke()
	return nil
}

// Changed returns a channel closed when the resource's capacity next
// changes (a new lease, an expiry, lowered wants, or a wants change in
// optimistic mode).
func (r *Resource) Changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

// checkChanged wakes Changed waiters if the capacity differs from the last
// value announced.
func (r *Resource) checkChanged(now time.Time) {
	r.mu.Lock()
	capacity, changed := r.checkChangedLocked(now)
	r.mu.Unlock()
	if changed {
		r.capacityGauge.Update(capacity)
	}
}

// checkChangedLocked is checkChanged with r.mu held; the caller updates the
// gauge if it reports a change. Whoever reads the new capacity under r.mu
// afterwards also gets the new Changed channel.
func (r *Resource) checkChangedLocked(now time.Time) (capacity float64, changed bool) {
	capacity = r.capacityLocked(now)
	if r.lease != nil && !now.Before(r.leaseExpiry) {
		// Count an expiry once.
		r.expired.Inc(1)
		r.lease = nil
	}
	if capacity == r.notified {
		return capacity, false
	}
	r.notified = capacity
	close(r.changed)
	r.changed = make(chan struct{})
	return capacity, true
}

// Release gives the resource's lease back to the server and removes it
// from the client. Its capacity falls back to its mode.
func (r *Resource) Release(ctx context.Context) error {
	c := r.c
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed // Close released every lease already
	}
	if c.resources[r.id] != r {
		c.mu.Unlock()
		return fmt.Errorf("leasing: resource %q is not held by this client", r.id)
	}
	delete(c.resources, r.id)
	c.mu.Unlock()
	r.mu.Lock()
	r.released = true
	r.mu.Unlock()
	r.checkChanged(c.clock.Now())
	return c.release(ctx, []string{r.id})
}

// request returns the resource's part of a GetCapacity request and the
// generation of the wants it carries, or nil if the resource was asked for
// less than minInterval ago.
func (r *Resource) request(now time.Time, minInterval time.Duration) (*pb.ResourceRequest, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.lastRequest.IsZero() && now.Sub(r.lastRequest) < minInterval {
		return nil, 0
	}
	if r.estimate {
		r.estimateLocked(now)
		// A lower estimate holds from now (see capWants).
		if capacity, changed := r.checkChangedLocked(now); changed {
			r.capacityGauge.Update(capacity)
		}
	}
	rr := &pb.ResourceRequest{
		ResourceId: proto.String(r.id),
		Priority:   proto.Int64(r.priority),
		Wants:      proto.Float64(r.wants),
	}
	if r.lease != nil && now.Before(r.leaseExpiry) {
		rr.Has = proto.Clone(r.lease).(*pb.Lease)
	}
	return rr, r.wantsGen
}

// estimateLocked replaces wants by the demand observed since the last
// estimate.
func (r *Resource) estimateLocked(now time.Time) {
	elapsed := now.Sub(r.estimateStart).Seconds()
	if elapsed <= 0 {
		return
	}
	if r.arrivals == 0 && r.peak == 0 {
		// No demand at all: after a second of silence want nothing, so an
		// idle client does not keep capacity others could use.
		if elapsed >= 1 {
			r.wants, r.capWants = 0, 0
			r.estimateStart = now
			r.wantsGauge.Update(0)
		}
		return
	}
	demand := math.Max(r.arrivals/elapsed, r.peak)
	capacity := r.capacityLocked(now)
	if !math.IsInf(capacity, 1) && capacity > 0 && demand >= 0.9*capacity {
		r.wants = 1.5 * math.Max(demand, capacity)
	} else {
		r.wants = 1.1 * demand
	}
	r.capWants = min(r.capWants, r.wants)
	r.estimateStart, r.arrivals, r.peak = now, 0, 0
	r.wantsGauge.Update(r.wants)
}

// observeArrival records one call for wants estimation.
func (r *Resource) observeArrival() {
	if !r.estimate {
		return
	}
	r.mu.Lock()
	r.arrivals++
	r.mu.Unlock()
}

// observeConcurrency records a concurrent demand level for wants
// estimation.
func (r *Resource) observeConcurrency(n int) {
	if !r.estimate {
		return
	}
	r.mu.Lock()
	r.peak = math.Max(r.peak, float64(n))
	r.mu.Unlock()
}

// apply stores a lease from the server.
func (r *Resource) apply(rr *pb.ResourceResponse, now time.Time) {
	r.mu.Lock()
	r.lease = proto.Clone(rr.GetGets()).(*pb.Lease)
	if c := r.lease.GetCapacity(); !(c >= 0) { // NaN or negative from a broken server
		r.lease.Capacity = proto.Float64(0)
	}
	r.leaseExpiry = time.Unix(r.lease.GetExpiryTime(), 0)
	// Any server may answer: clamp what it says before it becomes a
	// Duration, which a huge number of seconds would overflow.
	r.refresh = wirenum.Seconds(r.lease.GetRefreshInterval(), 0)
	if rr.SafeCapacity != nil {
		r.safe = rr.GetSafeCapacity()
	}
	// Announce under the same lock: a reader who sees the new capacity
	// must not get the Changed channel this change closes.
	capacity, changed := r.checkChangedLocked(now)
	r.mu.Unlock()
	if changed {
		r.capacityGauge.Update(capacity)
	}
}

// nextRefresh is when the resource should next be asked for.
func (r *Resource) nextRefresh(minInterval time.Duration) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lastRequest.IsZero() {
		return time.Time{}
	}
	if r.urgent {
		return r.lastRequest.Add(minInterval)
	}
	return r.lastRequest.Add(max(r.refresh, minInterval))
}

// expiry returns the expiry of the resource's lease, if it has one.
func (r *Resource) expiry() (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lease == nil {
		return time.Time{}, false
	}
	return r.leaseExpiry, true
}
