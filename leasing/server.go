package leasing

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"time"

	"github.com/uber-go/tally/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-rpc/sluice/clock"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
	"github.com/sluice-rpc/sluice/stats"
)

// Server defaults.
const (
	// DefaultMinRefreshInterval is how soon a client may ask again for the
	// same resource and be answered.
	DefaultMinRefreshInterval = 5 * time.Second
	// DefaultMaxResourcesPerRequest bounds the resources in one request.
	DefaultMaxResourcesPerRequest = 1000
	// DefaultMaxIDLength bounds client and resource identifiers, in bytes.
	DefaultMaxIDLength = 512
	// unmatchedLeaseLength and unmatchedRefreshInterval are the lease given
	// for resources no template matches (the original's documented
	// defaults).
	unmatchedLeaseLength     = 60
	unmatchedRefreshInterval = 16
)

// ServerConfig configures a Server.
type ServerConfig struct {
	// Config is the resource repository. Required.
	Config *Config
	// Clock is the time source; nil means the wall clock.
	Clock clock.Clock
	// Scope receives the server's metrics; nil means tally.NoopScope.
	Scope tally.Scope
	// Address is the address the server advertises as master in Discovery
	// and mastership answers. Empty means the address Serve listens on.
	Address string
	// MinRefreshInterval is how soon the same client may ask for the same
	// resource again and get an answer (0 means
	// DefaultMinRefreshInterval; negative is invalid).
	MinRefreshInterval time.Duration
	// MaxResourcesPerRequest bounds the resources in one GetCapacity or
	// ReleaseCapacity request (0 means DefaultMaxResourcesPerRequest).
	MaxResourcesPerRequest int
	// MaxIDLength bounds client and resource identifiers in bytes (0 means
	// DefaultMaxIDLength).
	MaxIDLength int
}

// Validate reports the first thing wrong with c.
func (c *ServerConfig) Validate() error {
	if c.Config == nil {
		return errors.New("leasing: server Config is nil, a resource repository is required")
	}
	if err := c.Config.Validate(); err != nil {
		return err
	}
	if c.MinRefreshInterval < 0 {
		return fmt.Errorf("leasing: MinRefreshInterval is %v, must be >= 0", c.MinRefreshInterval)
	}
	if c.MaxResourcesPerRequest < 0 {
		return fmt.Errorf("leasing: MaxResourcesPerRequest is %d, must be >= 0", c.MaxResourcesPerRequest)
	}
	if c.MaxIDLength < 0 {
		return fmt.Errorf("leasing: MaxIDLength is %d, must be >= 0", c.MaxIDLength)
	}
	return checkLeaseLengths(c.Config, c.MinRefreshInterval)
}

// checkLeaseLengths rejects templates whose leases would lapse between the
// renewals the minimum refresh interval allows (0 means the default).
func checkLeaseLengths(cfg *Config, minRefresh time.Duration) error {
	if minRefresh == 0 {
		minRefresh = DefaultMinRefreshInterval
	}
	for i, t := range cfg.Resources {
		if l := time.Duration(t.Algorithm.LeaseLength) * time.Second; l <= minRefresh {
			return fmt.Errorf("leasing: template %d (%q): lease_length is %d, must be longer than the minimum refresh interval (%v), or leases lapse between renewals",
				i, t.IdentifierGlob, t.Algorithm.LeaseLength, minRefresh)
		}
	}
	return nil
}

// Server is a single-node Doorman server speaking the original's gRPC
// protocol (service doorman.Capacity). A single server is its own master.
//
// For every resource it keeps each client's wants and unexpired lease. It
// never hands a client more than the capacity left after the other
// clients' unexpired leases (for ProportionalShare and FairShare; Static
// and NoAlgorithm do not bound the total, as in the original). For a
// learning period after it starts it hands clients back what they report
// they have, since it cannot know the leases a previous master gave out.
//
// A Server is safe for concurrent use.
type Server struct {
	pb.UnimplementedCapacityServer

	clock     clock.Clock
	scope     tally.Scope
	started   time.Time
	minRenew  time.Duration
	maxRes    int
	maxID     int
	unmatched tally.Counter
	requests  tally.Counter
	invalid   tally.Counter

	mu        sync.RWMutex
	cfg       *Config
	startCfg  *Config // the configuration at start, which bounds learning mode
	address   string
	resources map[string]*resourceState
	lastSweep int64
	grpc      *grpc.Server
	stopped   bool
}

// resourceState is the server's state for one resource.
type resourceState struct {
	mu            sync.Mutex
	id            string
	tmpl          *Template // nil when no template matched
	learningUntil time.Time
	clients       map[string]*clientLease
	sumHas        float64
	sumWants      float64
	dirty         bool
	shares        shares
	scratch       []float64
	wantsBuf      []float64
	lastCleanup   int64
	deleted       bool // swept away; users must look the resource up again

	capacityGauge, wantsGauge, clientsGauge tally.Gauge
}

// clientLease is what the server knows about one client of one resource.
type clientLease struct {
	wants       float64
	has         float64
	priority    int64
	expiry      time.Time
	lastRequest time.Time
}

// NewServer returns a server for cfg. Its learning period starts now.
func NewServer(cfg ServerConfig) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{
		clock:     cfg.Clock,
		scope:     cfg.Scope,
		minRenew:  cfg.MinRefreshInterval,
		maxRes:    cfg.MaxResourcesPerRequest,
		maxID:     cfg.MaxIDLength,
		cfg:       cfg.Config,
		startCfg:  cfg.Config,
		address:   cfg.Address,
		resources: make(map[string]*resourceState),
	}
	if s.clock == nil {
		s.clock = clock.Real
	}
	if s.scope == nil {
		s.scope = tally.NoopScope
	}
	if s.minRenew == 0 {
		s.minRenew = DefaultMinRefreshInterval
	}
	if s.maxRes == 0 {
		s.maxRes = DefaultMaxResourcesPerRequest
	}
	if s.maxID == 0 {
		s.maxID = DefaultMaxIDLength
	}
	s.unmatched = s.scope.Counter(stats.LeaseUnmatchedTemplate)
	s.requests = s.scope.Counter(stats.LeaseRequests)
	s.invalid = s.scope.Counter(stats.LeaseInvalidRequests)
	s.started = s.clock.Now()
	return s, nil
}

// Register registers s as the doorman.Capacity service of g.
func (s *Server) Register(g grpc.ServiceRegistrar) { pb.RegisterCapacityServer(g, s) }

// Serve answers gRPC requests on lis until Stop is called. If the server
// has no advertised Address it advertises lis's address.
func (s *Server) Serve(lis net.Listener) error {
	g := grpc.NewServer()
	s.Register(g)
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return errors.New("leasing: server is stopped")
	}
	if s.address == "" {
		s.address = lis.Addr().String()
	}
	s.grpc = g
	s.mu.Unlock()
	return g.Serve(lis)
}

// Stop stops a server started with Serve, closing its listener and
// connections.
func (s *Server) Stop() {
	s.mu.Lock()
	s.stopped = true
	g := s.grpc
	s.mu.Unlock()
	if g != nil {
		g.Stop()
	}
}

// SetConfig replaces the resource repository. Known resources are matched
// again against the new templates; their clients and leases are kept.
func (s *Server) SetConfig(c *Config) error {
	if c == nil {
		return errors.New("leasing: SetConfig: config is nil")
	}
	if err := c.Validate(); err != nil {
		return err
	}
	if err := checkLeaseLengths(c, s.minRenew); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg = c
	for _, r := range s.resources {
		r.mu.Lock()
		r.tmpl = c.Match(r.id)
		// A new learning duration may shorten learning mode, never restart it
		// for a resource that has left it.
		if until := s.learningUntil(r.id, r.tmpl); until.Before(r.learningUntil) {
			r.learningUntil = until
		}
		r.dirty = true
		r.mu.Unlock()
	}
	return nil
}

func (s *Server) learningUntil(id string, t *Template) time.Time {
	if t == nil {
		return s.started
	}
	until := s.started.Add(t.LearningDuration())
	// Learning mode protects leases granted before this server started; a
	// configuration pushed later cannot make it outlast what the
	// configuration at start said (those leases have expired by then).
	if s.startCfg != nil && s.startCfg != s.cfg {
		first := s.started // no template at start: nothing to learn
		if st := s.startCfg.Match(id); st != nil {
			first = s.started.Add(st.LearningDuration())
		}
		if first.Before(until) {
			until = first
		}
	}
	return until
}

func (s *Server) mastership() *pb.Mastership {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return &pb.Mastership{MasterAddress: proto.String(s.address)}
}

// Discovery tells the caller that this server is the master.
func (s *Server) Discovery(context.Context, *pb.DiscoveryRequest) (*pb.DiscoveryResponse, error) {
	return &pb.DiscoveryResponse{Mastership: s.mastership(), IsMaster: proto.Bool(true)}, nil
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

// validateGetCapacity checks the whole request before any state changes.
func (s *Server) validateGetCapacity(req *pb.GetCapacityRequest) error {
	if err := s.checkID("client_id", req.GetClientId()); err != nil {
		return err
	}
	rs := req.GetResource()
	if len(rs) > s.maxRes {
		return fmt.Errorf("request names %d resources, more than the limit of %d", len(rs), s.maxRes)
	}
	var seen map[string]struct{}
	if len(rs) > 1 {
		seen = make(map[string]struct{}, len(rs))
	}
	for i, r := range rs {
		id := r.GetResourceId()
		if id == "" || len(id) > s.maxID {
			return s.checkID(fmt.Sprintf("resource[%d].resource_id", i), id)
		}
		if seen != nil {
			if _, dup := seen[id]; dup {
				return fmt.Errorf("resource[%d]: resource %q appears twice", i, id)
			}
			seen[id] = struct{}{}
		}
		if w := r.GetWants(); !finiteNonNegative(w) {
			return fmt.Errorf("resource[%d] (%q): wants is %v, must be a finite number >= 0", i, id, w)
		}
		if r.Has != nil {
			if c := r.Has.GetCapacity(); !finiteNonNegative(c) {
				return fmt.Errorf("resource[%d] (%q): has.capacity is %v, must be a finite number >= 0", i, id, c)
			}
		}
	}
	return nil
}

func (s *Server) invalidArgument(rpc string, err error) error {
	s.invalid.Inc(1)
	return status.Errorf(codes.InvalidArgument, "leasing: %s: %v", rpc, err)
}

// resource returns the state for id, creating it on first use.
func (s *Server) resource(id string) *resourceState {
	s.mu.RLock()
	r := s.resources[id]
	s.mu.RUnlock()
	if r != nil {
		return r
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r = s.resources[id]; r != nil {
		return r
	}
	tmpl := s.cfg.Match(id)
	// Per-resource gauges only for resources named exactly by a template:
	// ids come from clients, and tally keeps every tagged scope for good,
	// so tagging by any id would let clients grow the server's memory
	// without bound. Resources matched by a glob (or none) report no gauges.
	scope := tally.NoopScope
	if tmpl != nil && tmpl.IdentifierGlob == id {
		scope = s.scope.Tagged(map[string]string{stats.LeaseTagResource: id})
	}
	r = &resourceState{
		id:            id,
		tmpl:          tmpl,
		learningUntil: s.learningUntil(id, tmpl),
		clients:       make(map[string]*clientLease),
		dirty:         true,
		capacityGauge: scope.Gauge(stats.LeaseCapacity),
		wantsGauge:    scope.Gauge(stats.LeaseWants),
		clientsGauge:  scope.Gauge(stats.LeaseClients),
	}
	s.resources[id] = r
	return r
}

// GetCapacity grants or renews leases for the resources in req. A resource
// the same client asked for less than the minimum refresh interval ago gets
// no entry in the response.
func (s *Server) GetCapacity(_ context.Context, req *pb.GetCapacityRequest) (*pb.GetCapacityResponse, error) {
	if err := s.validateGetCapacity(req); err != nil {
		return nil, s.invalidArgument("GetCapacity", err)
	}
	s.requests.Inc(1)
	now := s.clock.Now()
	resp := &pb.GetCapacityResponse{Response: make([]*pb.ResourceResponse, 0, len(req.GetResource()))}
	s.sweep(now)
	for _, rr := range req.GetResource() {
		for {
			r := s.resource(rr.GetResourceId())
			out, ok := s.decide(r, req.GetClientId(), rr, now)
			if !ok {
				continue // swept away meanwhile
			}
			if out != nil {
				resp.Response = append(resp.Response, out)
			}
			break
		}
	}
	return resp, nil
}

// sweep forgets, at most once per second, resources left without clients,
// so that the server's memory follows the resources in use.
func (s *Server) sweep(now time.Time) {
	sec := now.Unix()
	s.mu.RLock()
	due := sec != s.lastSweep
	s.mu.RUnlock()
	if !due {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sec == s.lastSweep {
		return
	}
	s.lastSweep = sec
	for id, r := range s.resources {
		r.mu.Lock()
		if !now.Before(r.learningUntil) {
			r.cleanup(now)
		}
		if len(r.clients) == 0 {
			r.deleted = true
			delete(s.resources, id)
		}
		r.mu.Unlock()
	}
}

// decide runs the cleanup, insertion, capacity and response steps for one
// resource request; it returns nil when the request came too soon, and
// ok=false when r was swept away and must be looked up again.
func (s *Server) decide(r *resourceState, client string, rr *pb.ResourceRequest, now time.Time) (out *pb.ResourceResponse, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.deleted {
		return nil, false
	}
	learning := now.Before(r.learningUntil)
	if !learning {
		r.cleanup(now)
	}
	c := r.clients[client]
	if c != nil && now.Sub(c.lastRequest) < s.minRenew {
		return nil, true
	}
	if c == nil {
		c = &clientLease{}
		r.clients[client] = c
		r.dirty = true
	}
	wants := rr.GetWants()
	if wants != c.wants {
		r.sumWants += wants - c.wants
		c.wants = wants
		r.dirty = true
	}
	c.priority = rr.GetPriority()
	c.lastRequest = now

	tmpl := r.tmpl
	leaseLength, refresh := int64(unmatchedLeaseLength), int64(unmatchedRefreshInterval)
	var gets float64
	switch {
	case tmpl == nil:
		s.unmatched.Inc(1)
		gets = wants
	case learning:
		leaseLength, refresh = tmpl.Algorithm.LeaseLength, tmpl.Algorithm.RefreshInterval
		if rr.Has != nil {
			// Echo what the client says it has, but never more than the
			// capacity (or a nonsense value): one client claiming 1e308
			// would otherwise starve every other until its lease expires.
			gets = rr.Has.GetCapacity()
			if !(gets >= 0) {
				gets = 0
			}
			if k := tmpl.Algorithm.Kind; k == ProportionalShare || k == FairShare {
				gets = math.Min(gets, math.Max(0, tmpl.Capacity-(r.sumHas-c.has)))
			}
		}
	default:
		leaseLength, refresh = tmpl.Algorithm.LeaseLength, tmpl.Algorithm.RefreshInterval
		if r.dirty {
			r.recompute()
		}
		gets = r.shares.target(wants)
		if k := tmpl.Algorithm.Kind; k == ProportionalShare || k == FairShare {
			available := tmpl.Capacity - (r.sumHas - c.has)
			gets = math.Max(0, math.Min(gets, available))
		}
	}
	r.sumHas += gets - c.has
	c.has = gets
	expiry := now.Unix() + leaseLength
	c.expiry = time.Unix(expiry, 0)

	r.capacityGauge.Update(r.sumHas)
	r.wantsGauge.Update(r.sumWants)
	r.clientsGauge.Update(float64(len(r.clients)))

	out = &pb.ResourceResponse{
		ResourceId: proto.String(r.id),
		Gets: &pb.Lease{
			ExpiryTime:      proto.Int64(expiry),
			RefreshInterval: proto.Int64(refresh),
			Capacity:        proto.Float64(gets),
		},
	}
	if tmpl != nil {
		safe := tmpl.Capacity / float64(len(r.clients))
		if tmpl.SafeCapacity != nil {
			safe = *tmpl.SafeCapacity
		}
		out.SafeCapacity = proto.Float64(safe)
	}
	return out, true
}

// recompute reruns the resource's algorithm over its clients' wants.
func (r *resourceState) recompute() {
	r.dirty = false
	if r.tmpl == nil {
		return
	}
	r.wantsBuf = r.wantsBuf[:0]
	for _, c := range r.clients {
		r.wantsBuf = append(r.wantsBuf, c.wants)
	}
	r.shares, r.scratch = computeShares(r.tmpl.Algorithm.Kind, r.tmpl.Capacity, r.wantsBuf, r.scratch)
}

// cleanup forgets clients whose leases have expired; it runs at most once
// per second and also recomputes the running sums exactly.
func (r *resourceState) cleanup(now time.Time) {
	sec := now.Unix()
	if sec == r.lastCleanup {
		return
	}
	r.lastCleanup = sec
	var has, wants float64
	for id, c := range r.clients {
		if !now.Before(c.expiry) {
			delete(r.clients, id)
			r.dirty = true
			continue
		}
		has += c.has
		wants += c.wants
	}
	r.sumHas, r.sumWants = has, wants
}

// ReleaseCapacity forgets the caller's leases on the named resources, so
// that their capacity is at once available to other clients.
func (s *Server) ReleaseCapacity(_ context.Context, req *pb.ReleaseCapacityRequest) (*pb.ReleaseCapacityResponse, error) {
	if err := s.checkID("client_id", req.GetClientId()); err != nil {
		return nil, s.invalidArgument("ReleaseCapacity", err)
	}
	if n := len(req.GetResourceId()); n > s.maxRes {
		return nil, s.invalidArgument("ReleaseCapacity", fmt.Errorf("request names %d resources, more than the limit of %d", n, s.maxRes))
	}
	for i, id := range req.GetResourceId() {
		if err := s.checkID(fmt.Sprintf("resource_id[%d]", i), id); err != nil {
			return nil, s.invalidArgument("ReleaseCapacity", err)
		}
	}
	for _, id := range req.GetResourceId() {
		s.mu.RLock()
		r := s.resources[id]
		s.mu.RUnlock()
		if r == nil {
			continue
		}
		r.mu.Lock()
		if c := r.clients[req.GetClientId()]; c != nil {
			r.sumHas -= c.has
			r.sumWants -= c.wants
			delete(r.clients, req.GetClientId())
			r.dirty = true
			r.capacityGauge.Update(r.sumHas)
			r.wantsGauge.Update(r.sumWants)
			r.clientsGauge.Update(float64(len(r.clients)))
		}
		r.mu.Unlock()
	}
	return &pb.ReleaseCapacityResponse{}, nil
}

// GetServerCapacity is not implemented yet: the server tree is future
// work. It answers codes.Unimplemented.
func (s *Server) GetServerCapacity(context.Context, *pb.GetServerCapacityRequest) (*pb.GetServerCapacityResponse, error) {
	return nil, status.Error(codes.Unimplemented, "leasing: GetServerCapacity is not implemented: this server is a single-node root")
}
