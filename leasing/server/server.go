package server

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uber-go/tally/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/connlimit"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
	"github.com/sluice-rpc/sluice/stats"
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
	// Rand draws the jitter of the backoffs after failed refreshes from
	// the parent and failed elections; nil means math/rand/v2's global
	// source. A simulation passes a seeded one to be reproducible. The
	// server draws from it under a lock of its own.
	Rand *rand.Rand
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
	// means DefaultMaxResources). A request that would add resources beyond
	// it is refused with codes.ResourceExhausted; renewals never are.
	MaxResources int
	// MaxClients bounds the distinct client (and server) ids holding
	// leases (0 means DefaultMaxClients); beyond it a new client's request
	// is refused with codes.ResourceExhausted, unless its source holds
	// less than its share of the table: it then takes the place of a
	// client of the source holding the most (see the package doc).
	MaxClients int
	// MaxLeases bounds the leases, one per client and resource (0 means
	// DefaultMaxLeases); beyond it a request for new leases is refused
	// with codes.ResourceExhausted. With the other two limits it bounds
	// the server's memory (see BenchmarkLeaseMemory).
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
	// OnMastership, if set, is called after every change of mastership
	// (for logging).
	OnMastership func(Mastership)
	// OnElectionError, if set, is called when Election.Run fails: the
	// server has stepped down and runs it again after a backoff (for
	// logging).
	OnElectionError func(error)

	// Parent is the HOST:PORT of a server of the parent node, making this
	// server an intermediate in a server tree: it asks the parent's
	// master for its capacity with GetServerCapacity, on behalf of all its
	// clients, and hands out at most what it was leased. Empty means a
	// root server, whose capacity is its templates'.
	Parent string
	// ParentDialOptions are used to dial the parent; nil means plaintext.
	ParentDialOptions []grpc.DialOption
	// ParentDial, if set, opens the connections to the parent node's
	// servers instead of gRPC (ParentDialOptions are then unused): an
	// in-process transport for simulations and tests.
	ParentDial func(addr string) (pb.Conn, error)
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
	// ManualParentRefresh, if true, makes Start run no refresh loop for
	// the parent: the caller drives TickParent itself (simulations on a
	// fake clock).
	ManualParentRefresh bool
	// OnParentError, if set, is called by an intermediate when refreshing
	// its leases from the parent starts failing, with the error (one per
	// failed batch of resources), and with nil when a refresh succeeds
	// again: once per change, not per retry (for logging). Meanwhile the
	// server retries with a backoff; ParentStatus.LastError has the last
	// error.
	OnParentError func(error)
}

// Validate reports the first thing wrong with c.
func (c *Config) Validate() error {
	if c.Repository == nil && c.Parent == "" {
		return errors.New("server: Config.Repository is nil, a resource repository is required (only an intermediate, with a Parent, may have none)")
	}
	if c.Repository != nil {
		if err := c.Repository.Validate(); err != nil {
			return err
		}
	}
	if c.Parent != "" && c.Election != nil && c.ID == "" {
		return errors.New("server: Config.ID is empty with both Parent and Election set: the servers of an elected intermediate node must present the parent one server_id (such as the election key), not each its own address")
	}
	if c.ParentRPCTimeout < 0 {
		return fmt.Errorf("server: Config.ParentRPCTimeout is %v, must be >= 0 (0 means the default)", c.ParentRPCTimeout)
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
			return fmt.Errorf("server: Config.%s is %d, must be >= 0 (0 means the default)", f.name, f.v)
		}
	}
	if int64(c.MaxConcurrentStreams) > math.MaxUint32 {
		return fmt.Errorf("server: Config.MaxConcurrentStreams is %d, must be <= %d (HTTP/2's limit)", c.MaxConcurrentStreams, uint32(math.MaxUint32))
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{
		{"ConnectionTimeout", c.ConnectionTimeout}, {"MaxConnectionIdle", c.MaxConnectionIdle}, {"KeepaliveMinTime", c.KeepaliveMinTime},
	} {
		if f.v < 0 {
			return fmt.Errorf("server: Config.%s is %v, must be >= 0 (0 means the default)", f.name, f.v)
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
	pb.UnimplementedCapacityServer

	clock   clock.Clock
	rand    func() float64 // uniform in [0, 1), for backoff jitter; safe for concurrent use
	scope   tally.Scope
	started time.Time
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
	srcMu          sync.Mutex
	sources        map[netip.Addr]*source
	srcHeap        sourceHeap
	clientsEvicted tally.Counter

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
	epochMu         sync.RWMutex
	ms              atomic.Pointer[Mastership] // nil: no election, always master
	election        Election
	onMastership    func(Mastership)
	onElectionError func(error)
	parent          *parentLink // nil for a root server

	conns connConfig

	mu       sync.Mutex
	address  string
	grpc     *grpc.Server
	listener *connlimit.Listener // Serve's
	stopped  bool
	bgStop   context.CancelFunc // ends Start's goroutines
	bgDone   sync.WaitGroup
}

// New returns a server for cfg. Its learning period starts now (or, with
// an Election, when it wins mastership).
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	def := func(v, d int) int64 {
		if v == 0 {
			return int64(d)
		}
		return int64(v)
	}
	s := &Server{
		clock:    cfg.Clock,
		scope:    cfg.Scope,
		maxRes:   int(def(cfg.MaxResourcesPerRequest, DefaultMaxResourcesPerRequest)),
		maxID:    int(def(cfg.MaxIDLength, DefaultMaxIDLength)),
		seed:     maphash.MakeSeed(),
		repo:     cfg.Repository,
		startCfg: cfg.Repository,
		address:  cfg.Address,
		election: cfg.Election,

		onMastership:    cfg.OnMastership,
		onElectionError: cfg.OnElectionError,
		conns:           newConnConfig(&cfg),
	}
	if s.repo == nil {
		s.repo = &Repository{}
		s.startCfg = s.repo
	}
	if cfg.Election != nil {
		s.ms.Store(&Mastership{}) // not the master until the election says so
	}
	if cfg.Parent != "" {
		s.parent = newParentLink(cfg)
	}
	s.nResources.max, s.nResources.what, s.nResources.name = def(cfg.MaxResources, DefaultMaxResources), "resources", "Config.MaxResources, --max-resources"
	s.nClients.max, s.nClients.what, s.nClients.name = def(cfg.MaxClients, DefaultMaxClients), "clients", "Config.MaxClients, --max-clients"
	s.nLeases.max, s.nLeases.what, s.nLeases.name = def(cfg.MaxLeases, DefaultMaxLeases), "leases", "Config.MaxLeases, --max-leases"
	for i := range s.resources {
		s.resources[i].m = make(map[string]*resource)
		s.clients[i].m = make(map[string]*clientEntry)
	}
	s.sources = make(map[netip.Addr]*source)
	s.nextDue.Store(math.MaxInt64)
	s.bulk = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)-1))
	if s.clock == nil {
		s.clock = clock.Real
	}
	s.rand = rand.Float64
	if r := cfg.Rand; r != nil {
		var mu sync.Mutex
		s.rand = func() float64 {
			mu.Lock()
			defer mu.Unlock()
			return r.Float64()
		}
	}
	if s.scope == nil {
		s.scope = tally.NoopScope
	}
	s.wall, s.hold = time.Now, hold
	s.unmatched = s.scope.Counter(stats.LeaseUnmatchedTemplate)
	s.requests = s.scope.Counter(stats.LeaseRequests)
	s.invalid = s.scope.Counter(stats.LeaseInvalidRequests)
	s.clientsEvicted = s.scope.Counter(metricClientsEvicted)
	s.started = s.clock.Now()
	s.masterSince = s.started
	return s, nil
}

// Register registers s as the doorman.Capacity service of g.
func (s *Server) Register(g grpc.ServiceRegistrar) { pb.RegisterCapacityServer(g, s) }

// Serve answers gRPC requests on lis until Stop is called. It bounds
// the connections it accepts as Config says (MaxConns, ConnectionTimeout,
// MaxConnectionIdle, KeepaliveMinTime, MaxConcurrentStreams) and makes its
// gRPC server with those settings first, then opts (TLS credentials,
// interceptors such as NewMetrics'): an option in opts overrides the
// setting it names. If the server has no advertised Address it
// advertises lis's address.
func (s *Server) Serve(lis net.Listener, opts ...grpc.ServerOption) error {
	limited, tracker, err := s.limitConns(lis)
	if err != nil {
		return err
	}
	g := grpc.NewServer(append(s.conns.grpcOptions(tracker), opts...)...)
	s.Register(g)
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		limited.Close()
		return errors.New("server: Serve after Stop")
	}
	if s.address == "" {
		s.address = lis.Addr().String()
	}
	s.grpc = g
	s.listener = limited.Listener
	s.mu.Unlock()
	if err := s.Start(); err != nil {
		limited.Close()
		return err
	}
	return g.Serve(limited)
}

// Start starts the server's background work: the election, if
// Config.Election is set, and the refresh of its capacity from its
// parent, if Config.Parent is set. Serve calls it; a server registered
// on a gRPC server of its own with Register must call it (with
// Config.Address set). Stop ends the work. Start is idempotent.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errors.New("server: Start after Stop")
	}
	if s.bgStop != nil || (s.election == nil && s.parent == nil) {
		return nil
	}
	if s.election != nil && s.address == "" {
		return errors.New("server: Start with an Election needs Config.Address (or Serve), the address other servers send clients to")
	}
	ctx, stop := context.WithCancel(context.Background())
	s.bgStop = stop
	if s.election != nil {
		s.bgDone.Add(1)
		go func(id string) {
			defer s.bgDone.Done()
			s.runElection(ctx, id)
		}(s.address)
	}
	if s.parent != nil {
		if s.parent.id == "" {
			s.parent.id = s.address
		}
	}
	if s.parent != nil && !s.parent.manual {
		s.bgDone.Add(1)
		go func() {
			defer s.bgDone.Done()
			s.runParent(ctx)
		}()
	}
	return nil
}

// Stop stops a server started with Serve, closing its listener and
// connections.
//
// With an Election, Stop first ends the campaign (resigning mastership,
// so that another server takes over at once) and waits for the server's
// background work to end.
func (s *Server) Stop() {
	s.mu.Lock()
	s.stopped = true
	g := s.grpc
	bg := s.bgStop
	s.mu.Unlock()
	if bg != nil {
		bg()
		s.bgDone.Wait()
	}
	if s.parent != nil && s.parent.manual {
		s.stopParent()
	}
	if g != nil {
		g.Stop()
	}
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

// Discovery tells the caller who the master is: this server (is_master
// true, with its address) or another (is_master false, with the master's
// address, or none while no master is known).
func (s *Server) Discovery(context.Context, *pb.DiscoveryRequest) (*pb.DiscoveryResponse, error) {
	m := s.Mastership()
	if m.IsMaster {
		s.mu.Lock()
		addr := s.address
		s.mu.Unlock()
		return &pb.DiscoveryResponse{Mastership: &pb.Mastership{MasterAddress: proto.String(addr)}, IsMaster: proto.Bool(true)}, nil
	}
	return &pb.DiscoveryResponse{Mastership: wireMastership(m), IsMaster: proto.Bool(false)}, nil
}

// errNotMaster is serve's answer when the server is not the master.
var errNotMaster = errors.New("server: not the master")

// wireMastership is the mastership field of a non-master's answers: the
// master's address, absent when unknown.
func wireMastership(m Mastership) *pb.Mastership {
	if m.Master == "" {
		return &pb.Mastership{}
	}
	return &pb.Mastership{MasterAddress: proto.String(m.Master)}
}

// redirect returns the mastership field to answer with when the server is
// not the master, or nil.
func (s *Server) redirect() *pb.Mastership {
	if m := s.ms.Load(); m != nil && !m.IsMaster {
		return wireMastership(*m)
	}
	return nil
}

func (s *Server) checkID(what, id string) error {
	if id == "" {
		return fmt.Errorf("%s is empty", what)
	}
	if len(id) > s.maxID {
		return fmt.Errorf("%s is %d bytes long, longer than the limit of %d", what, len(id), s.maxID)
	}
	return nil
}

func finiteNonNegative(v float64) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0
}

// checkResources checks the resource ids of a request: each valid, no
// more than the limit. (Duplicates are looked for after admission, which
// refuses a flood sooner: see checkDuplicates.)
func (s *Server) checkResources(n int, id func(int) string) error {
	if n > s.maxRes {
		return fmt.Errorf("request names %d resources, more than the limit of %d", n, s.maxRes)
	}
	for i := 0; i < n; i++ {
		if rid := id(i); rid == "" || len(rid) > s.maxID {
			return s.checkID(fmt.Sprintf("resource[%d].resource_id", i), rid)
		}
	}
	return nil
}

// checkDuplicates refuses a request naming a resource twice.
func checkDuplicates(ds []demand) error {
	if len(ds) < 2 {
		return nil
	}
	if len(ds) == 2 {
		if ds[0].id == ds[1].id {
			return fmt.Errorf("resource[1]: resource %q appears twice", ds[1].id)
		}
		return nil
	}
	seen := make(map[string]struct{}, len(ds))
	for i := range ds {
		if _, dup := seen[ds[i].id]; dup {
			return fmt.Errorf("resource[%d]: resource %q appears twice", i, ds[i].id)
		}
		seen[ds[i].id] = struct{}{}
	}
	return nil
}

// reconstructed reports whether has, in a server's request, is the
// claims a Sluice intermediate echoed before its parent's first answer
// (marked with a refresh interval of 0, which no granted lease has)
// rather than a lease the parent granted. The original's intermediates
// send no has.
func reconstructed(has *pb.Lease) bool {
	return has != nil && has.RefreshInterval != nil && has.GetRefreshInterval() == 0
}

func checkHas(i int, id string, has *pb.Lease) error {
	if has != nil {
		if c := has.GetCapacity(); !finiteNonNegative(c) {
			return fmt.Errorf("resource[%d] (%q): has.capacity is %v, must be a finite number >= 0", i, id, c)
		}
	}
	return nil
}

// validateGetCapacity checks the whole request before any state changes.
func (s *Server) validateGetCapacity(req *pb.GetCapacityRequest) error {
	if err := s.checkID("client_id", req.GetClientId()); err != nil {
		return err
	}
	rs := req.GetResource()
	if err := s.checkResources(len(rs), func(i int) string { return rs[i].GetResourceId() }); err != nil {
		return err
	}
	for i, r := range rs {
		if w := r.GetWants(); !finiteNonNegative(w) {
			return fmt.Errorf("resource[%d] (%q): wants is %v, must be a finite number >= 0", i, r.GetResourceId(), w)
		}
		if err := checkHas(i, r.GetResourceId(), r.Has); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) invalidArgument(rpc string, err error) error {
	s.invalid.Inc(1)
	return status.Errorf(codes.InvalidArgument, "doorman server: %s: %v", rpc, err)
}

func exhausted(rpc string, err error) error {
	return status.Errorf(codes.ResourceExhausted, "doorman server: %s: %v", rpc, err)
}

// slowRefusal holds back the answer to a bulk request of n resources
// refused for a limit (err) for refusalDelay, with no lock or turn held.
// Such a request is most likely a flood, whose sender sends the next when
// it has the answer: refused at once, the flood keeps a processor busy
// decoding and refusing, as fast as it is answered.
func (s *Server) slowRefusal(ctx context.Context, n int, err error) {
	if n > bulkRequest && status.Code(err) == codes.ResourceExhausted {
		s.hold(ctx, refusalDelay)
	}
}

// hold waits d in wall time, or until ctx ends.
func hold(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// demand is one resource request, from a client or a server.
type demand struct {
	id       string
	wants    float64
	weight   float64 // subclients
	priority int64
	has      *pb.Lease
	server   bool // from GetServerCapacity
}

// decision is a lease granted for one resource.
type decision struct {
	tmpl     *Template
	capacity float64
	expiry   int64
	refresh  int64
	safe     float64
	hasSafe  bool // no template: no safe capacity
}

// wire holds the scalars of a response's leases, allocated together: the
// protobuf messages point into it, so that a response of n resources
// costs a few allocations, not a few per resource.
type wire struct {
	ids    []string
	leases []pb.Lease
	ints   []int64
	floats []float64
}

func newWire(ds []demand, out []decision) *wire {
	n := len(out)
	w := &wire{ids: make([]string, n), leases: make([]pb.Lease, n), ints: make([]int64, 2*n), floats: make([]float64, 2*n)}
	for i, d := range out {
		w.ids[i] = ds[i].id
		w.ints[2*i], w.ints[2*i+1] = d.expiry, d.refresh
		w.floats[2*i], w.floats[2*i+1] = d.capacity, d.safe
		l := &w.leases[i]
		l.ExpiryTime, l.RefreshInterval, l.Capacity = &w.ints[2*i], &w.ints[2*i+1], &w.floats[2*i]
	}
	return w
}

// safe returns the safe capacity of resource i, or nil.
func (w *wire) safe(out []decision, i int) *float64 {
	if !out[i].hasSafe {
		return nil
	}
	return &w.floats[2*i+1]
}

// GetCapacity grants or renews leases for the resources in req. Every
// resource of a valid request gets an entry in the response. A request
// that would add resources, clients or leases beyond the server's limits
// is refused as a whole with codes.ResourceExhausted.
//
// A server that is not the master answers every request with only the
// mastership field (see Discovery).
func (s *Server) GetCapacity(ctx context.Context, req *pb.GetCapacityRequest) (*pb.GetCapacityResponse, error) {
	if m := s.redirect(); m != nil {
		return &pb.GetCapacityResponse{Mastership: m}, nil
	}
	if err := s.validateGetCapacity(req); err != nil {
		return nil, s.invalidArgument("GetCapacity", err)
	}
	rs := req.GetResource()
	ds := make([]demand, len(rs))
	for i, r := range rs {
		ds[i] = demand{id: r.GetResourceId(), wants: r.GetWants(), weight: 1, priority: r.GetPriority(), has: r.Has}
	}
	out, err := s.serve(ctx, "GetCapacity", req.GetClientId(), sourceOf(ctx), ds)
	if err != nil {
		s.slowRefusal(ctx, len(ds), err)
	}
	if err == errNotMaster {
		return &pb.GetCapacityResponse{Mastership: wireMastership(s.Mastership())}, nil
	}
	if err != nil {
		return nil, err
	}
	w := newWire(ds, out)
	msgs := make([]pb.ResourceResponse, len(out))
	resp := &pb.GetCapacityResponse{Response: make([]*pb.ResourceResponse, len(out))}
	for i := range out {
		r := &msgs[i]
		r.ResourceId, r.Gets, r.SafeCapacity = &w.ids[i], &w.leases[i], w.safe(out, i)
		resp.Response[i] = r
	}
	return resp, nil
}

// serve runs the admission and the decisions for one client's demands.
//
// A bulk request (more than bulkRequest resources) may take milliseconds
// where a renewal takes microseconds. So that renewals do not wait behind
// bulk requests for a processor, bulk requests run at most GOMAXPROCS-1
// at a time (one when GOMAXPROCS is 1), yield the processor every
// yieldEvery resources, and pause as long as they ran every bulkSlice of
// wall time: the processor they leave is also the machine's, shared with
// other processes, and a flood's sender sends as fast as it is answered.
// For the same reason a bulk request refused for a limit is answered
// refusalDelay late (see slowRefusal). A pause keeps the request's hold
// on the state (epochMu), so a change of mastership waits for the request
// as before, at most about twice as long; a request whose context ends
// stops pausing.
func (s *Server) serve(ctx context.Context, rpc, client string, src netip.Addr, ds []demand) ([]decision, error) {
	if len(ds) > bulkRequest {
		select {
		case s.bulk <- struct{}{}:
			defer func() { <-s.bulk }()
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	s.epochMu.RLock()
	defer s.epochMu.RUnlock()
	if m := s.ms.Load(); m != nil && !m.IsMaster {
		return nil, errNotMaster
	}
	now := s.clock.Now()
	s.reap(now, reapPerRequest, false)
	ids := make([]string, len(ds))
	for i := range ds {
		ids[i] = ds[i].id
	}
	g, err := s.admit(client, src, ids, now)
	if err != nil {
		return nil, exhausted(rpc, err)
	}
	defer s.settle(&g)
	if err := checkDuplicates(ds); err != nil {
		return nil, s.invalidArgument(rpc, err)
	}
	s.requests.Inc(1)
	out := make([]decision, len(ds))
	created := false
	bulk := len(ds) > bulkRequest
	var slice time.Time // when the bulk request last paused
	for i := range ds {
		if i > 0 && i%yieldEvery == 0 {
			runtime.Gosched()
			if bulk {
				// Run at most about half the time, in wall time: the
				// processor a bulk request leaves to renewals is also the
				// machine's, shared with other processes (a flood's client
				// among them); yielding alone leaves renewals waiting for
				// the operating system's scheduler.
				if now := s.wall(); slice.IsZero() {
					slice = now
				} else if now.Sub(slice) >= bulkSlice {
					s.hold(ctx, bulkSlice)
					slice = s.wall()
				}
			}
		}
		for {
			r, c := s.resourceFor(ds[i].id, now, &g)
			created = created || c
			if s.decide(r, client, src, &ds[i], now, &g, &out[i]) {
				break
			}
		}
	}
	if created {
		// An intermediate asks its parent for a new resource at once, but
		// only now that the request's lease is recorded: woken earlier, the
		// refresh loop could find the resource without clients, ask for
		// nothing and idle until its next round.
		s.pokeParent()
	}
	return out, nil
}

// decide runs the cleanup, insertion, capacity and response steps for one
// resource request from client, of source src. It returns false when r
// was reaped meanwhile and must be looked up again.
func (s *Server) decide(r *resource, client string, src netip.Addr, d *demand, now time.Time, g *grant, out *decision) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.deleted {
		return false
	}
	sec := now.Unix()
	learning := now.Before(r.learningUntil)
	if !learning {
		s.clean(r, sec)
	}
	t := &r.tab
	i, known := r.leases[client]
	var prevWeight float64
	if known {
		prevWeight = t.slots[i].weight
	}
	if !known {
		i = t.alloc(client)
		r.leases[client] = i
		sl := &t.slots[i]
		sl.wants, sl.weight = d.wants, d.weight
		t.insert(i)
		r.sharesValid = false
		sl.ent = s.addLease(client, src, d.server, r, now, g)
	} else if sl := &t.slots[i]; sl.wants != d.wants || sl.weight != d.weight {
		t.setDemand(i, d.wants, d.weight)
		r.sharesValid = false
	}
	sl := &t.slots[i]
	sl.priority = d.priority
	sl.lastRequest = now.UnixNano()
	sl.ent.last.Store(sl.lastRequest) // the client table's eviction order

	tmpl := r.tmpl
	leaseLength, refresh := leaseParams(tmpl)
	var capacity float64
	lastExpiry := int64(math.MaxInt64)
	if tmpl != nil {
		capacity = tmpl.Capacity
		if s.parent != nil {
			capacity, leaseLength, refresh, lastExpiry = r.fromParent(sec)
		}
	}
	prevHas, prevExpiry := sl.has, sl.expiry
	var gets float64
	switch {
	case tmpl == nil:
		s.unmatched.Inc(1)
		gets = d.wants
	case learning:
		if d.has != nil {
			// Echo what the client says it has, but never more than the
			// capacity left (or a nonsense value): one client claiming 1e308
			// would otherwise starve every other until its lease expires.
			// An intermediate its parent has not answered yet knows no
			// capacity to cap claims at: it echoes them, and its first
			// request to the parent says it has their sum, which the parent
			// counts (see parentRequest).
			gets = d.has.GetCapacity()
			if k := tmpl.Algorithm.Kind; (k == ProportionalShare || k == FairShare) && !(s.parent != nil && r.parentExpiry == 0) {
				_, _, held := t.totals()
				gets = math.Min(gets, math.Max(0, capacity-(held-sl.has)))
			}
		}
	default:
		if !r.sharesValid || r.sharesCapacity != capacity {
			r.shares = t.computeShares(tmpl.Algorithm.Kind, capacity)
			r.sharesValid, r.sharesCapacity = true, capacity
		}
		gets = r.shares.target(d.wants, d.weight)
		if k := tmpl.Algorithm.Kind; k == ProportionalShare || k == FairShare {
			_, _, held := t.totals()
			gets = math.Max(0, math.Min(gets, capacity-(held-sl.has)))
		}
		if d.server && known && reconstructed(d.has) && prevExpiry > sec {
			// The server has lost track of our grant: it restarted (or a
			// new master took over its node) and knows only the clients
			// that have come back to it so far; its wants, subclients
			// and has are theirs. Its other clients keep the leases of
			// our last grant until that grant ends: until then grant and
			// count it at least what we counted for it, and its
			// subclients as before (see parentRequest), so that neither
			// it nor we hand that part out twice. (A server that merely
			// lost an answer repeats a lease we granted, and the claim
			// rule below covers it.)
			t.raiseFloor(i, floor{prevHas, prevWeight, prevExpiry}, sec)
		}
		if f, ok := t.floor(i, sec); ok {
			_, _, held := t.totals()
			gets = math.Max(gets, math.Min(f.amount, capacity-(held-sl.has)))
		}
	}
	held := gets
	if d.server && known && d.has != nil && tmpl != nil {
		// A server's clients keep the leases of its old grant until they
		// renew: what it says it has handed out (never more than it was
		// granted) stays counted until it says less.
		held = math.Max(gets, math.Min(d.has.GetCapacity(), prevHas))
	}
	f, floored := t.floor(i, sec)
	if floored {
		held = math.Max(held, f.amount)
	}
	t.setHas(i, held)
	sl = &t.slots[i]
	// An intermediate never leases beyond its own lease: its clients'
	// leases end with it.
	expiry, length := sec+leaseLength, leaseLength
	if reconstructed(d.has) && floored && f.until < lastExpiry {
		// The first answer to a restarted server ends with our last
		// grant to it before: its clients' leases from before the restart
		// end by then, and it ends its learning mode with this lease
		// (see applyParent) instead of a whole lease length after it
		// started.
		lastExpiry = f.until
	}
	if lastExpiry <= expiry {
		// Cut at the intermediate's own lease's expiry: such leases share
		// one list, in order since that expiry does not go back (each
		// remaining length in a list of its own would make the lists
		// many, and finding one costly).
		expiry, length = lastExpiry, cutLength
	}
	if !known || sl.expiry != expiry || sl.length != int32(length) {
		t.unlink(i)
		t.link(i, expiry, length)
	}
	r.updateGauges()

	*out = decision{tmpl: tmpl, capacity: gets, expiry: expiry, refresh: refresh}
	if tmpl != nil {
		out.hasSafe = true
		if tmpl.SafeCapacity != nil {
			out.safe = *tmpl.SafeCapacity
		} else {
			_, weight, _ := t.totals()
			out.safe = capacity / weight
		}
	}
	return true
}

// ReleaseCapacity forgets the caller's leases on the named resources, so
// that their capacity is at once available to other clients. Empty
// resource ids are ignored: the original client's Close sends one before
// the real ones (it builds the list with make([]string, n) and appends).
func (s *Server) ReleaseCapacity(_ context.Context, req *pb.ReleaseCapacityRequest) (*pb.ReleaseCapacityResponse, error) {
	if m := s.redirect(); m != nil {
		return &pb.ReleaseCapacityResponse{Mastership: m}, nil
	}
	client := req.GetClientId()
	if err := s.checkID("client_id", client); err != nil {
		return nil, s.invalidArgument("ReleaseCapacity", err)
	}
	ids := req.GetResourceId()
	if n := len(ids); n > s.maxRes {
		return nil, s.invalidArgument("ReleaseCapacity", fmt.Errorf("request names %d resources, more than the limit of %d", n, s.maxRes))
	}
	for i, id := range ids {
		if len(id) > s.maxID {
			return nil, s.invalidArgument("ReleaseCapacity", fmt.Errorf("resource_id[%d] is %d bytes long, longer than the limit of %d", i, len(id), s.maxID))
		}
	}
	s.epochMu.RLock()
	defer s.epochMu.RUnlock()
	if m := s.redirect(); m != nil {
		return &pb.ReleaseCapacityResponse{Mastership: m}, nil
	}
	s.reap(s.clock.Now(), reapPerRequest, false)
	for _, id := range ids {
		if id == "" {
			continue
		}
		r := s.lookup(id)
		if r == nil {
			continue
		}
		r.mu.Lock()
		if i, ok := r.leases[client]; ok && !r.deleted {
			s.removeLease(r, i)
			r.updateGauges()
		}
		r.mu.Unlock()
	}
	return &pb.ReleaseCapacityResponse{}, nil
}

// GetServerCapacity grants or renews leases to a server lower in the tree
// on behalf of its clients. Each resource's priority bands are
// aggregated: the server counts as the sum of their num_clients
// subclients wanting the sum of their wants (priorities are ignored, as
// the built-in algorithms ignore them), and gets the algorithm's share for
// them. The response carries, per resource, the lease, the template's
// algorithm (so that the server hands out leases the same way) and the
// safe capacity per client.
//
// A server's own claim in has is taken as what it has handed out to its
// clients: while it claims more than its new grant (its clients still
// hold leases from the old one), the difference stays counted as held,
// so that the capacity is not granted to another server before the first
// has taken it back from its clients (the design's shortfall; see the
// package doc). The claim never counts for more than was granted before.
func (s *Server) GetServerCapacity(ctx context.Context, req *pb.GetServerCapacityRequest) (*pb.GetServerCapacityResponse, error) {
	if m := s.redirect(); m != nil {
		return &pb.GetServerCapacityResponse{Mastership: m}, nil
	}
	ds, err := s.validateGetServerCapacity(req)
	if err != nil {
		return nil, s.invalidArgument("GetServerCapacity", err)
	}
	out, err := s.serve(ctx, "GetServerCapacity", req.GetServerId(), sourceOf(ctx), ds)
	if err != nil {
		s.slowRefusal(ctx, len(ds), err)
	}
	if err == errNotMaster {
		return &pb.GetServerCapacityResponse{Mastership: wireMastership(s.Mastership())}, nil
	}
	if err != nil {
		return nil, err
	}
	w := newWire(ds, out)
	resp := &pb.GetServerCapacityResponse{Response: make([]*pb.ServerCapacityResourceResponse, len(out))}
	for i, d := range out {
		resp.Response[i] = &pb.ServerCapacityResourceResponse{
			ResourceId:   &w.ids[i],
			Gets:         &w.leases[i],
			Algorithm:    wireAlgorithm(d.tmpl),
			SafeCapacity: w.safe(out, i),
		}
	}
	return resp, nil
}

func (s *Server) validateGetServerCapacity(req *pb.GetServerCapacityRequest) ([]demand, error) {
	if err := s.checkID("server_id", req.GetServerId()); err != nil {
		return nil, err
	}
	rs := req.GetResource()
	if err := s.checkResources(len(rs), func(i int) string { return rs[i].GetResourceId() }); err != nil {
		return nil, err
	}
	ds := make([]demand, len(rs))
	for i, r := range rs {
		id := r.GetResourceId()
		if err := checkHas(i, id, r.Has); err != nil {
			return nil, err
		}
		d := demand{id: id, has: r.Has, server: true}
		var subclients int64
		for j, b := range r.GetWants() {
			if w := b.GetWants(); !finiteNonNegative(w) {
				return nil, fmt.Errorf("resource[%d] (%q): wants[%d].wants is %v, must be a finite number >= 0", i, id, j, w)
			}
			n := b.GetNumClients()
			if n < 1 || n > MaxSubclients {
				return nil, fmt.Errorf("resource[%d] (%q): wants[%d].num_clients is %d, must be >= 1 and <= %d", i, id, j, n, MaxSubclients)
			}
			subclients += n
			if subclients > MaxSubclients {
				return nil, fmt.Errorf("resource[%d] (%q): the bands' num_clients add up to more than %d", i, id, MaxSubclients)
			}
			d.wants += b.GetWants()
			if j == 0 || b.GetPriority() > d.priority {
				d.priority = b.GetPriority()
			}
		}
		if math.IsInf(d.wants, 0) {
			return nil, fmt.Errorf("resource[%d] (%q): the bands' wants add up to more than a float64 holds", i, id)
		}
		// A server with no bands has no clients yet: it counts as one
		// wanting nothing (the original's intermediate asks so).
		d.weight = float64(max(subclients, 1))
		ds[i] = d
	}
	return ds, nil
}

// wireAlgorithm returns the algorithm of tmpl as sent on the wire; for
// resources no template matches, NO_ALGORITHM with the default lease.
func wireAlgorithm(tmpl *Template) *pb.Algorithm {
	if tmpl == nil {
		return &pb.Algorithm{
			Kind:            pb.Algorithm_NO_ALGORITHM.Enum(),
			LeaseLength:     proto.Int64(unmatchedLeaseLength),
			RefreshInterval: proto.Int64(unmatchedRefreshInterval),
		}
	}
	a := tmpl.Algorithm
	w := &pb.Algorithm{
		Kind:            pb.Algorithm_Kind(a.Kind).Enum(),
		LeaseLength:     proto.Int64(a.LeaseLength),
		RefreshInterval: proto.Int64(a.RefreshInterval),
	}
	if a.LearningModeDuration != nil {
		w.LearningModeDuration = proto.Int64(*a.LearningModeDuration)
	}
	for _, p := range a.Parameters {
		w.Parameters = append(w.Parameters, &pb.NamedParameter{Name: proto.String(p.Name), Value: proto.String(p.Value)})
	}
	return w
}
