package server

import (
	"context"
	"errors"
	"hash/maphash"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"time"

	"github.com/uber-go/tally/v4"
	"google.golang.org/grpc"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/ratelog"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
	"github.com/sluice-rpc/sluice/stats"
)

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

		onMastership: cfg.OnMastership,
		logger:       cfg.Logger,
		conns:        newConnConfig(&cfg),
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
	s.resetSourcesLocked()
	s.nextDue.Store(math.MaxInt64)
	s.bulk = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)-1))
	if s.clock == nil {
		s.clock = clock.Real
	}
	s.clientLog = ratelog.New(cfg.Logger, s.clock.Now)
	s.parentLog = ratelog.New(cfg.Logger, s.clock.Now)
	s.rand = rand.Float64
	if r := cfg.Rand; r != nil {
		var mu sync.Mutex
		s.rand = func() float64 {
			mu.Lock()
			defer mu.Unlock()
			return r()
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
	s.resourcesEvicted = s.scope.Counter(metricResourcesEvicted)
	s.started = s.clock.Now()
	s.masterSince = s.started
	return s, nil
}

// Register registers s as the doorman.Capacity service of g.
func (s *Server) Register(g grpc.ServiceRegistrar) {
	pb.RegisterCapacityServer(g, capacityServer{s: s})
}

// Serve answers gRPC requests on lis until Stop is called. It bounds
// the connections it accepts as Config says (MaxConns, ConnectionTimeout,
// MaxConnectionIdle, KeepaliveMinTime, MaxConcurrentStreams), records its
// RPCs on Config.Scope (UnaryInterceptor), and makes its gRPC server with
// those settings first, then opts (TLS credentials, interceptors of the
// caller's): an option in opts overrides the setting it names. The unary
// interceptors run in this order: a grpc.UnaryInterceptor in opts, the
// connection limits' own, the metrics, then those of
// grpc.ChainUnaryInterceptor in opts: a request refused by one of the
// latter is counted (as failed, unless its code is InvalidArgument or
// ResourceExhausted), one refused by the former is not. If the server has
// no advertised Address it advertises lis's address.
func (s *Server) Serve(lis net.Listener, opts ...grpc.ServerOption) error {
	limited, tracker, err := s.limitConns(lis)
	if err != nil {
		return err
	}
	own := append(s.conns.grpcOptions(tracker), grpc.ChainUnaryInterceptor(s.UnaryInterceptor()))
	g := grpc.NewServer(append(own, opts...)...)
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
	manual := s.parent != nil && s.parent.manual
	s.mu.Unlock()
	if bg != nil {
		bg()
		s.bgDone.Wait()
	}
	if manual {
		s.stopParent()
	}
	if g != nil {
		g.Stop()
	}
}

// log returns the server's logger: Config.Logger, or slog.Default().
func (s *Server) log() *slog.Logger {
	if s.logger == nil {
		return slog.Default()
	}
	return s.logger
}
