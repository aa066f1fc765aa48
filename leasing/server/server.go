package server

import (
	"context"
	"errors"
	"hash/maphash"
	"log/slog"
	"math"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uber-go/tally/v4"
	"google.golang.org/grpc"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/config"
	"github.com/sluice-rpc/sluice/internal/connlimit"
	"github.com/sluice-rpc/sluice/internal/ratelog"
)

// Server defaults and bounds.
const (
	// DefaultMaxResourcesPerRequest bounds the resources in one request.
	DefaultMaxResourcesPerRequest = 1000
	// DefaultMaxIDLength bounds client and resource identifiers, in bytes.
	DefaultMaxIDLength = 512
	// DefaultMaxResources bounds the resources a server keeps state for.
	DefaultMaxResources = 100_000
	// DefaultMaxClients bounds the distinct clients (and servers lower in
	// the tree) holding leases on a server.
	DefaultMaxClients = 100_000
	// DefaultMaxLeases bounds the leases (client and resource pairs) a
	// server keeps.
	DefaultMaxLeases = 1_000_000
	// MaxSubclients bounds the clients one GetServerCapacity request may
	// speak for in one resource (the sum of its bands' num_clients).
	MaxSubclients = 1 << 30
	// MaxCapacity bounds every quantity the server keeps: a template's
	// capacity and safe capacity are refused above it, and wants, claims
	// (has) and a parent's capacity above it are taken as MaxCapacity.
	// It is far above any rate or gauge (a thousand million million),
	// and far enough below float64's range that no sum over the clients
	// of a resource, nor any product of such a sum with a share, can
	// overflow: with finite, bounded inputs no NaN or infinity can enter
	// the server's state. (A client wanting more than the capacity still
	// counts for what it wants up to MaxCapacity: ProportionalShare
	// divides in proportion to wants, as the original does.)
	MaxCapacity = 1e15

	// unmatchedLeaseLength and unmatchedRefreshInterval are the lease given
	// for resources no template matches (the original's documented
	// defaults).
	unmatchedLeaseLength     = 60
	unmatchedRefreshInterval = 16
)

// Config configures a Server.
type Config struct {
	// Repository is the resource repository. Required for a root server;
	// an intermediate (Parent set) takes each resource's capacity, and its
	// algorithm when the parent sends one, from its parent, and uses its
	// own templates only for what the parent does not send (nil means
	// none).
	Repository *Repository
	// Clock is the time source; nil means the wall clock.
	Clock clock.Clock
	// Rand returns uniform numbers in [0, 1) for the jitter of the backoffs
	// after failed refreshes from the parent and failed elections; nil
	// means math/rand/v2's Float64. A simulation passes a seeded source's
	// Float64 to be reproducible. The server calls it under a lock of its
	// own, so it need not be safe for concurrent use, but must not be
	// shared with another server or a client: give each its own.
	Rand func() float64
	// Scope receives the server's metrics; nil means tally.NoopScope.
	Scope tally.Scope
	// Address is the address the server advertises as master in Discovery
	// answers. Empty means the address Serve listens on.
	Address string
	// MaxResourcesPerRequest bounds the resources in one GetCapacity,
	// GetServerCapacity or ReleaseCapacity request (0 means
	// DefaultMaxResourcesPerRequest). Beyond it a request is invalid.
	MaxResourcesPerRequest int
	// MaxIDLength bounds client and resource identifiers in bytes (0 means
	// DefaultMaxIDLength).
	MaxIDLength int
	// MaxResources bounds the resources the server keeps state for (0
	// means DefaultMaxResources). Configured resources (named exactly by
	// a template) count, but are created even in a full table, which they
	// may exceed by their number. A request that
	// would add resources beyond it is refused with
	// codes.ResourceExhausted, unless its source holds less than its share
	// of the table: it then takes the place of a resource of the source
	// holding the most (see the package doc); renewals never are.
	MaxResources int
	// MaxClients bounds the distinct client (and server) ids holding
	// leases (0 means DefaultMaxClients); beyond it a new client's request
	// is refused with codes.ResourceExhausted, unless its source holds
	// less than its share of the table: it then takes the place of a
	// client of the source holding the most (see the package doc).
	MaxClients int
	// MaxLeases bounds the leases, one per client and resource (0 means
	// DefaultMaxLeases); beyond it a request for new leases is refused
	// with codes.ResourceExhausted, unless its source holds less than its
	// share of the table: a client of the source holding the most then
	// gives up its leases (see the package doc). With the other two
	// limits it bounds the server's memory (see BenchmarkLeaseMemory).
	MaxLeases int

	// The connections Serve accepts (see the package doc, "Hostile
	// clients"). A server registered on a gRPC server of the caller's
	// (Register) uses that server's settings instead.

	// MaxConns bounds the connections Serve holds at once (0 means
	// DefaultMaxConns(): half the process's descriptor limit). At the cap
	// a new connection closes the least useful one: one that never made
	// a call before one that did, the longest idle first, never one with
	// a call in flight.
	MaxConns int
	// ConnectionTimeout bounds how long a new connection may take to
	// finish its handshakes, TLS and HTTP/2 (0 means
	// DefaultConnectionTimeout; gRPC's own default is 120 s).
	ConnectionTimeout time.Duration
	// MaxConnectionIdle closes a connection that has had no call for
	// this long, gracefully (HTTP/2 GOAWAY: a gRPC client reconnects at
	// its next call); 0 means DefaultMaxConnectionIdle.
	MaxConnectionIdle time.Duration
	// KeepaliveMinTime is the shortest interval between a client's pings
	// that the server tolerates (gRPC's keepalive.EnforcementPolicy
	// MinTime; a client pinging more often is sent GOAWAY after three
	// such pings); 0 means DefaultKeepaliveMinTime. Pings are tolerated
	// with no call in flight: a Doorman client is idle between refreshes.
	KeepaliveMinTime time.Duration
	// MaxConcurrentStreams bounds the calls in flight on one connection
	// (0 means DefaultMaxConcurrentStreams, at most math.MaxUint32).
	MaxConcurrentStreams int

	// Election, if set, decides whether this server is its node's master
	// (see Election and package etcdelection); nil means the server is
	// always its own master. It is run by Start (or Serve) with the
	// advertised Address as the server's id, so an Address that other
	// servers' clients can reach must be known by then.
	Election Election
	// OnMastership, if set, is called after every change of mastership,
	// for a program that acts on it (readiness, routing); each change is
	// logged on Logger at Info too. A failed Election.Run is logged at
	// Warn: the server has stepped down and runs it again after a
	// backoff.
	OnMastership func(Mastership)

	// Parent is the HOST:PORT of a server of the parent node, making this
	// server an intermediate in a server tree: it asks the parent's
	// master for its capacity with GetServerCapacity, on behalf of all its
	// clients, and hands out at most what it was leased. Empty means a
	// root server, whose capacity is its templates'.
	Parent string
	// ParentDialOptions are used to dial the parent; nil means plaintext.
	ParentDialOptions []grpc.DialOption
	// ID is the server_id presented to the parent; empty means the
	// advertised address. Required when Election is set too: the servers
	// of an elected intermediate node must all present the parent one
	// server_id (such as the election key), so that a new master's first
	// request renews the old master's lease; with one id each, the parent
	// would count the old master's lease until it expired and give the
	// new one nothing meanwhile.
	ID string
	// ParentRPCTimeout bounds each RPC to the parent (0 means
	// DefaultParentRPCTimeout).
	ParentRPCTimeout time.Duration
	// An intermediate logs on Logger, at Warn, when refreshing its leases
	// from the parent starts failing (the error names each failed batch
	// of resources), and at Info when a refresh succeeds again: once per
	// change, not per retry. Meanwhile the server retries with a backoff;
	// Status().Parent.LastError has the last error.

	// Logger receives the server's lines: at Warn a request refused as
	// invalid or for a limit, a failed election, a parent that stopped
	// answering; at Info a change of mastership, a parent answering
	// again. The lines a client or the parent can cause are rate-limited
	// (10 at once, 10 a second, the next line counting those left out in
	// suppressedBefore). Nil means slog.Default(), read when a line is
	// written. Any slog.Handler will do (zap's through
	// go.uber.org/zap/exp/zapslog).
	Logger *slog.Logger
}

// pkg names this package in configuration errors.
const pkg = "server"

// Validate reports the first thing wrong with c, as a *retry.FieldError.
func (c Config) Validate() error {
	if c.Repository == nil && c.Parent == "" {
		return config.Errorf(pkg, "Config.Repository", config.Verbatim("nil"), "must be a resource repository (only an intermediate, with a Parent, may have none)")
	}
	if c.Repository != nil {
		if err := c.Repository.Validate(); err != nil {
			return config.Errorf(pkg, "Config.Repository", config.Verbatim("invalid"), "must be a valid repository: %v", err)
		}
	}
	if c.Parent != "" && c.Election != nil && c.ID == "" {
		return config.Errorf(pkg, "Config.ID", c.ID, "must be set with both Parent and Election: the servers of an elected intermediate node must present the parent one server_id (such as the election key), not each its own address")
	}
	if c.ParentRPCTimeout < 0 {
		return config.Errorf(pkg, "Config.ParentRPCTimeout", c.ParentRPCTimeout, "must be >= 0 (0 means the default)")
	}
	for _, f := range []struct {
		name string
		v    int
	}{
		{"MaxResourcesPerRequest", c.MaxResourcesPerRequest}, {"MaxIDLength", c.MaxIDLength},
		{"MaxResources", c.MaxResources}, {"MaxClients", c.MaxClients}, {"MaxLeases", c.MaxLeases},
		{"MaxConns", c.MaxConns}, {"MaxConcurrentStreams", c.MaxConcurrentStreams},
	} {
		if f.v < 0 {
			return config.Errorf(pkg, "Config."+f.name, f.v, "must be >= 0 (0 means the default)")
		}
	}
	if int64(c.MaxConcurrentStreams) > math.MaxUint32 {
		return config.Errorf(pkg, "Config.MaxConcurrentStreams", c.MaxConcurrentStreams, "must be <= %d (HTTP/2's limit)", uint32(math.MaxUint32))
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{
		{"ConnectionTimeout", c.ConnectionTimeout}, {"MaxConnectionIdle", c.MaxConnectionIdle}, {"KeepaliveMinTime", c.KeepaliveMinTime},
	} {
		if f.v < 0 {
			return config.Errorf(pkg, "Config."+f.name, f.v, "must be >= 0 (0 means the default)")
		}
	}
	return nil
}

// Server is a Doorman server speaking the original's gRPC protocol
// (service doorman.Capacity). A server with no Election is its own
// master; with one, it serves only while it is the master of its node
// and otherwise redirects (see Election). A server with a Parent is an
// intermediate in a server tree, its capacity leased from the parent
// node (see the package doc).
//
// For every resource it keeps each client's wants and unexpired lease. It
// never hands a client more than the capacity left after the other
// clients' unexpired leases (for ProportionalShare and FairShare; Static
// and NoAlgorithm do not bound the total, as in the original). For a
// learning period after it starts it hands clients back what they report
// they have, since it cannot know the leases a previous master gave out.
// It answers every request, however soon after the last one (the 5 s
// minimum between refreshes is the clients' rule).
//
// State is kept per resource under the resource's own lock, and expired
// leases are found in O(1) from expiry-ordered lists, so no request
// waits on a server-wide sweep. Limits on resources, clients and leases
// bound its memory.
//
// A Server is safe for concurrent use.
type Server struct {
	clock   clock.Clock
	rand    func() float64 // uniform in [0, 1), for backoff jitter; safe for concurrent use
	scope   tally.Scope
	started time.Time
	// rpcMetrics records the RPCs, made by the first UnaryInterceptor.
	rpcOnce    sync.Once
	rpcMetrics *rpcMetrics
	// masterSince is when the server last became master (its start when
	// it has no election): learning mode is timed from it. Guarded by
	// epochMu.
	masterSince time.Time
	maxRes      int
	maxID       int
	unmatched   tally.Counter
	requests    tally.Counter
	invalid     tally.Counter

	seed      maphash.Seed
	resources [numShards]resourceShard
	clients   [numShards]clientShard

	// The client table's sources (see sources.go); srcMu is taken after
	// any other lock.
	srcMu   sync.Mutex
	sources map[netip.Addr]*source
	// srcHeaps orders the sources per table by what they hold of it;
	// srcHolding counts the sources holding some of each table.
	srcHeaps                         [numTables]sourceHeap
	srcHolding                       [numTables]int
	clientsEvicted, resourcesEvicted tally.Counter

	nResources, nClients, nLeases limit

	setMu    sync.Mutex   // serialises SetRepository
	cfgMu    sync.RWMutex // guards repo
	repo     *Repository
	startCfg *Repository // the configuration at start (or on becoming master), which bounds learning mode; guarded by epochMu

	bulk chan struct{} // a token per bulk request running
	// wall and hold pace bulk requests in wall time (time.Now and a
	// timer that the request's context cuts short; tests replace them):
	// CPU time is shared in wall time, whatever clock the leases run on.
	wall func() time.Time
	hold func(context.Context, time.Duration)

	reapMu  sync.Mutex
	reapQ   reapHeap
	nextDue atomic.Int64

	// epochMu is held for reading by every request while it works on the
	// state, and for writing by a change of mastership, which empties the
	// state: a request never sees half of one master's state.
	epochMu      sync.RWMutex
	ms           atomic.Pointer[Mastership] // nil: no election, always master
	election     Election
	onMastership func(Mastership)
	// logger is Config.Logger (nil: slog.Default() when a line is
	// written); clientLog and parentLog limit the lines clients and the
	// parent can cause, each with a budget of its own.
	logger               *slog.Logger
	clientLog, parentLog *ratelog.Logger
	parent               *parentLink // nil for a root server

	conns connConfig

	mu       sync.Mutex
	address  string
	grpc     *grpc.Server
	listener *connlimit.Listener // Serve's
	stopped  bool
	bgStop   context.CancelFunc // ends Start's goroutines
	bgDone   sync.WaitGroup
}

// Counts returns how many resources, distinct clients and leases the
// server holds now (including reservations of requests in flight).
func (s *Server) Counts() (resources, clients, leases int) {
	return int(s.nResources.n.Load()), int(s.nClients.n.Load()), int(s.nLeases.n.Load())
}

// SetRepository replaces the resource repository. Known resources are
// matched again against the new templates; their clients and leases are
// kept.
func (s *Server) SetRepository(repo *Repository) error {
	if repo == nil {
		return errors.New("server: SetRepository: repository is nil")
	}
	if err := repo.Validate(); err != nil {
		return err
	}
	s.setMu.Lock()
	defer s.setMu.Unlock()
	s.epochMu.RLock()
	defer s.epochMu.RUnlock()
	s.cfgMu.Lock()
	s.repo = repo
	s.cfgMu.Unlock()
	for _, r := range s.snapshot() {
		r.mu.Lock()
		if s.parent != nil {
			// An intermediate's templates come from its parent; the local
			// ones count again when the parent next answers (applyParent
			// starts from the configuration then).
			r.mu.Unlock()
			continue
		}
		r.tmpl = repo.Match(r.id)
		// A new learning duration may shorten learning mode, never restart it
		// for a resource that has left it.
		if until := s.learningUntil(r.id, r.tmpl, repo); until.Before(r.learningUntil) {
			r.learningUntil = until
		}
		r.sharesValid = false
		r.mu.Unlock()
	}
	return nil
}

// snapshot returns every resource the server knows now.
func (s *Server) snapshot() []*resource {
	var rs []*resource
	for i := range s.resources {
		sh := &s.resources[i]
		sh.mu.RLock()
		for _, r := range sh.m {
			rs = append(rs, r)
		}
		sh.mu.RUnlock()
	}
	return rs
}

// learningUntil returns when resource id, of template t in repo, leaves
// learning mode.
func (s *Server) learningUntil(id string, t *Template, repo *Repository) time.Time {
	if t == nil {
		return s.masterSince
	}
	until := s.masterSince.Add(t.LearningDuration())
	// Learning mode protects leases granted before this server started (or
	// became master); a configuration pushed later cannot make it outlast
	// what the configuration then said (those leases have expired by
	// then).
	if s.startCfg != repo {
		first := s.masterSince // no template at start: nothing to learn
		if st := s.startCfg.Match(id); st != nil {
			first = s.masterSince.Add(st.LearningDuration())
		}
		if first.Before(until) {
			until = first
		}
	}
	return until
}
