package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-rpc/sluice/backoff"
	"github.com/sluice-rpc/sluice/internal/serverhook"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
	"github.com/sluice-rpc/sluice/leasing/internal/master"
	"github.com/sluice-rpc/sluice/leasing/internal/wirenum"
)

// Intermediate servers: a server with a parent is a client of its parent
// node through GetServerCapacity.
const (
	// DefaultParentRPCTimeout bounds one RPC to the parent.
	DefaultParentRPCTimeout = 5 * time.Second
	// parentIdle is how long the refresh loop waits when it has nothing to
	// ask for (it is woken when a resource appears or mastership changes).
	parentIdle = 10 * time.Second
	// parentMinBackoff is the ceiling of the wait after a first failed
	// refresh, doubled per further failure up to parentMaxBackoff (see
	// parentBackoff). It is short because the
	// intermediate's clients' leases end with its own (see applyParent):
	// a failure is most often the parent node's mastership moving (the
	// attempt lands before the new master knows it won, and Discovery
	// sends it back to the old one), and waiting a whole second to retry
	// would leave clients renewing meanwhile with leases ending before
	// their next renewal.
	parentMinBackoff = 100 * time.Millisecond
	// parentMaxBackoff caps the ceiling of the wait after failed
	// refreshes.
	parentMaxBackoff = 8 * time.Second
	// parentMaxRedirects bounds the redirects one refresh follows.
	parentMaxRedirects = 3
)

// parentBackoff is the wait after failed refreshes: parentMinBackoff
// doubled per failure, at most parentMaxBackoff, each wait drawn from the
// upper half of that (equal jitter). The intermediates of one parent node
// all fail when it does; without jitter they would retry it in lockstep
// when it comes back, every round a burst, which is the storm jitter
// prevents. The upper half keeps a retry from coming sooner than half the
// ceiling.
var parentBackoff = backoff.Exponential{Initial: parentMinBackoff, Max: parentMaxBackoff, Multiplier: 2,
	Jitter: backoff.EqualJitter}

// parentLink is an intermediate server's side of its parent.
type parentLink struct {
	id   string
	wake chan struct{}
	// changes counts what wakes the loop (pokeParent), each counted after
	// it took effect and before its wake-up is sent; covered is the count
	// a round read before it looked at the resources, so everything up to
	// it was in that round. A wake-up when changes is still covered is
	// one the last round answered (see woken).
	changes, covered atomic.Uint64
	// manual is set by driveParent (before Start, under Server.mu): the
	// caller ticks the link, and Start runs no loop for it.
	manual bool

	// tickMu serialises tickParent; it guards the fields below it up to
	// mu.
	tickMu sync.Mutex
	finder master.Finder
	// failing is whether the last round failed.
	failing bool
	// failures counts failed rounds in a row; retryAt is when the backoff
	// after them ends. stopped is set by Stop (manual refresh).
	failures int
	retryAt  time.Time
	stopped  bool

	mu     sync.Mutex
	status parentState
}

func newParentLink(cfg Config) *parentLink {
	opts := cfg.ParentDialOptions
	if opts == nil {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	timeout := cfg.ParentRPCTimeout
	if timeout == 0 {
		timeout = DefaultParentRPCTimeout
	}
	return &parentLink{
		id:   cfg.ID,
		wake: make(chan struct{}, 1),
		finder: master.Finder{Addr: cfg.Parent, DialOptions: opts, RPCTimeout: timeout,
			MaxRedirects: parentMaxRedirects, Prefix: "doorman server: parent"},
		status: parentState{Parent: cfg.Parent},
	}
}

// parentState is what an intermediate server knows of its parent, for
// status pages.
type parentState struct {
	// Parent is the configured parent address; Master the parent node's
	// master it talks to now (empty before the first answer).
	Parent, Master string
	// LastRefresh is when the parent last answered; LastError the last
	// refresh's error, nil when it succeeded (a refresh sends one request
	// per DefaultMaxResourcesPerRequest resources: the error names each
	// failed batch, the others having been applied).
	LastRefresh time.Time
	LastError   error
	// Resources is how many resources the last answer leased.
	Resources int
}

// Parent returns what the server knows of its parent, and false for a
// root server.
func (s *Server) parentStatus() (parentState, bool) {
	if s.parent == nil {
		return parentState{}, false
	}
	s.parent.mu.Lock()
	defer s.parent.mu.Unlock()
	return s.parent.status, true
}

// parentLease returns an intermediate's lease from its parent on resource
// id: its capacity and expiry, false when it holds none (a root server,
// an unknown resource, or no answer yet).
func (s *Server) parentLease(id string) (capacity float64, expiry time.Time, ok bool) {
	if s.parent == nil {
		return 0, time.Time{}, false
	}
	r := s.lookup(id)
	if r == nil {
		return 0, time.Time{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	capacity, expiry, _, ok = s.parentLeaseLocked(r)
	return capacity, expiry, ok
}

// parentLeaseLocked returns the lease an intermediate holds from its
// parent for r (r.mu held): capacity, expiry and refresh interval, false
// for a root or before the parent's first answer. For the status page.
func (s *Server) parentLeaseLocked(r *resource) (capacity float64, expiry time.Time, refresh int64, ok bool) {
	if s.parent == nil || r.parentExpiry == 0 || r.tmpl == nil {
		return 0, time.Time{}, 0, false
	}
	return r.tmpl.Capacity, time.Unix(r.parentExpiry, 0), r.parentRefresh, true
}

func (s *Server) pokeParent() {
	if s.parent == nil {
		return
	}
	s.parent.changes.Add(1)
	select {
	case s.parent.wake <- struct{}{}:
	default:
	}
}

// woken reports whether something happened that no round has asked the
// parent about yet; the loop takes a wake-up only then.
func (p *parentLink) woken() bool { return p.changes.Load() != p.covered.Load() }

// placeholder is an intermediate's template for a resource its parent
// has not leased yet: no capacity, the local template's algorithm (or
// FAIR_SHARE with the design's default lease) until the parent sends its
// own.
func placeholder(local *Template) *Template {
	t := Template{IdentifierGlob: "*", Algorithm: Algorithm{Kind: FairShare,
		LeaseLength: unmatchedLeaseLength, RefreshInterval: unmatchedRefreshInterval}}
	if local != nil {
		t = *local
	}
	t.Capacity = 0
	return &t
}

// fromParent returns an intermediate's capacity for r at sec, the lease
// length and refresh interval it hands out, and the latest expiry it may
// grant (r.mu held).
//
// While its lease from the parent holds, the capacity is that lease's
// and no lease outlives it. The refresh interval is half the parent's
// (the design's decay factor of 0.5 per level). Before the parent's first
// answer the capacity is 0 (the design: a server with no capacity
// behaves as if it had none; in learning mode decide echoes claims
// instead), with 1 s leases to be renewed in 1 s. After its lease expired (the parent is
// unreachable), the server is in safe mode: its capacity is the safe
// capacity the parent last sent, per subclient (negative: what the
// clients want), and it hands out leases that outlast the client's next
// renewal (see safeLeaseLength), asked back at the same refresh interval,
// so that clients return soon after the parent does.
func (r *resource) fromParent(sec int64) (capacity float64, leaseLength, refresh, lastExpiry int64) {
	t := r.tmpl
	leaseLength, refresh = t.Algorithm.LeaseLength, t.Algorithm.RefreshInterval
	if r.parentRefresh > 0 {
		refresh = r.parentRefresh
	}
	refresh = max(refresh/2, 1)
	switch {
	case r.parentExpiry > sec:
		return t.Capacity, leaseLength, refresh, r.parentExpiry
	case r.parentExpiry == 0:
		// Nothing yet: a short lease, and come back in a second, by when
		// the parent (asked at once) has most likely answered.
		return 0, 1, 1, math.MaxInt64
	}
	wants, weight, _ := r.tab.totals()
	switch safe := t.SafeCapacity; {
	case safe == nil:
		capacity = 0
	case *safe < 0:
		capacity = wants
	default:
		capacity = *safe * weight
	}
	return math.Min(capacity, MaxCapacity), safeLeaseLength(refresh), refresh, math.MaxInt64
}

// safeLeaseLength is the length of the leases an intermediate in safe
// mode hands out with refresh interval refresh: one refresh interval
// beyond the client's next renewal, and a second more, since an expiry is
// a whole second (now rounded down, plus the length). A lease of one
// refresh interval would end before the renewal it asks for, by up to a
// second, leaving the client nothing meanwhile on every cycle; this one
// outlasts a renewal that comes up to a refresh interval late.
func safeLeaseLength(refresh int64) int64 { return 2*refresh + 1 }

// runParent refreshes the server's leases from its parent until ctx
// ends: at half the shortest refresh interval the parent gave, at once
// when a resource appears, and with a capped exponential backoff after
// failures. Only a master asks its parent.
func (s *Server) runParent(ctx context.Context) {
	p := s.parent
	defer func() {
		p.tickMu.Lock()
		p.finder.Forget()
		p.tickMu.Unlock()
	}()
	for {
		next := s.tickParent(ctx)
		t := s.clock.NewTimerAt(next)
	wait:
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-p.wake:
			if !p.woken() {
				goto wait // a change the last round already asked about
			}
			t.Stop()
		case <-t.C():
		}
	}
}

// tickParent does at the clock's now what an intermediate's refresh loop
// does when it runs: unless the backoff after failed rounds is still
// running, it sends one round of GetServerCapacity for all its resources
// and applies the answers. It returns when the loop runs next: half the
// shortest refresh interval the parent gave, the end of a backoff after
// a failure, or later when there is nothing to ask for (a new resource or
// a change of mastership wakes the loop). A root server returns the zero
// Time at once.
//
// Start runs the loop, unless a simulator drives the link (driveParent):
// it then calls tickParent itself, which after Stop sends nothing.
func (s *Server) tickParent(ctx context.Context) time.Time {
	p := s.parent
	if p == nil {
		return time.Time{}
	}
	p.tickMu.Lock()
	defer p.tickMu.Unlock()
	if p.stopped {
		return s.clock.Now().Add(parentIdle)
	}
	if now := s.clock.Now(); now.Before(p.retryAt) {
		// Woken during a backoff: do not hammer a parent that is down.
		return p.retryAt
	}
	// This round asks for every resource there is now, so a wake-up
	// already pending (a resource created, or a mastership change, before
	// the round started) is answered by it: left pending, it would start
	// a second round at once, asking again what was just answered. So is
	// one whose wake-up comes during the round but whose change was
	// counted before the count below, so took effect before the round's
	// snapshot (see changes and woken); a change counted after may have
	// missed the snapshot, and its wake-up starts another round.
	select {
	case <-p.wake:
	default:
	}
	p.covered.Store(p.changes.Load())
	wait := s.refreshParent(ctx, &p.failures)
	now := s.clock.Now()
	p.retryAt = time.Time{}
	if p.failures > 0 {
		// wait is already the shorter of the backoff and the healthy
		// batches' renewal: nothing earlier, wake-ups included.
		p.retryAt = now.Add(wait)
	}
	return now.Add(wait)
}

// stopParent ends a manually driven intermediate's parent link (Stop):
// tickParent sends nothing more and the connection is closed.
func (s *Server) stopParent() {
	p := s.parent
	p.tickMu.Lock()
	defer p.tickMu.Unlock()
	p.stopped = true
	p.finder.Forget()
}

// The simulators' way in to the parent link: the one thing this package
// sets outside itself, and only a variable of an internal package.
func init() {
	serverhook.DriveParent = func(srv any, dial func(addr string) (pb.Conn, error)) (serverhook.Parent, error) {
		s, ok := srv.(*Server)
		if !ok {
			return nil, fmt.Errorf("serverhook: DriveParent of a %T, want a *server.Server", srv)
		}
		return s.driveParent(dial)
	}
	serverhook.Capacity = func(srv any) (pb.CapacityServer, error) {
		s, ok := srv.(*Server)
		if !ok {
			return nil, fmt.Errorf("serverhook: Capacity of a %T, want a *server.Server", srv)
		}
		return capacityServer{s: s}, nil
	}
}

// driveParent hands the parent link to its caller (see
// serverhook.DriveParent): Start will run no refresh loop for it, and
// dial, if not nil, replaces gRPC.
func (s *Server) driveParent(dial func(addr string) (pb.Conn, error)) (parentDriver, error) {
	if s.parent == nil {
		return parentDriver{}, errors.New("server: a root server has no parent link to drive")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.bgStop != nil {
		return parentDriver{}, errors.New("server: the parent link can be driven only before Start")
	}
	s.parent.manual = true
	if dial != nil {
		s.parent.tickMu.Lock()
		s.parent.finder.Dial = dial
		s.parent.tickMu.Unlock()
	}
	return parentDriver{s}, nil
}

// parentDriver is a parent link its caller ticks (serverhook.Parent).
type parentDriver struct{ s *Server }

// Tick runs one round: see tickParent.
func (d parentDriver) Tick(ctx context.Context) time.Time { return d.s.tickParent(ctx) }

// Woken reports, and forgets, whether something happened since the last
// call that should make the server ask its parent at once (a new
// resource, a change of mastership): the wake-up the loop would take.
func (d parentDriver) Woken() bool {
	select {
	case <-d.s.parent.wake:
		return d.s.parent.woken()
	default:
		return false
	}
}

// refreshParent sends one round of GetServerCapacity and applies the
// answers; it returns how long to wait before the next.
func (s *Server) refreshParent(ctx context.Context, failures *int) time.Duration {
	if !s.Mastership().IsMaster {
		return parentIdle
	}
	reqs := s.parentRequests(s.clock.Now())
	if len(reqs) == 0 {
		return parentIdle
	}
	next := time.Duration(math.MaxInt64)
	leased, answered := 0, 0
	var errs []error
	for k, req := range reqs {
		// A failed batch does not stop the round: the others' resources
		// are renewed as usual, and the failed one's retried after the
		// backoff.
		resp, err := s.askParent(ctx, req)
		if err != nil {
			if ctx.Err() != nil {
				return parentIdle
			}
			rs := req.GetResource()
			errs = append(errs, fmt.Errorf("batch %d of %d (%d resources, %q to %q): %w",
				k+1, len(reqs), len(rs), rs[0].GetResourceId(), rs[len(rs)-1].GetResourceId(), err))
			continue
		}
		answered++
		n, interval := s.applyParent(resp)
		leased += n
		next = min(next, interval)
	}
	err := errors.Join(errs...)
	p := s.parent
	p.mu.Lock()
	if answered > 0 {
		p.status.LastRefresh = s.clock.Now()
		p.status.Master = p.finder.Target()
		p.status.Resources = leased
	}
	p.status.LastError = err
	p.mu.Unlock()
	if err != nil {
		*failures++
		next = min(next, parentBackoff.Delay(*failures, s.rand()))
	} else {
		*failures = 0
	}
	// Tell the first failure after a success (or at start), and the first
	// success after failures: once per change, not per retry.
	if failing := err != nil; failing != p.failing {
		p.failing = failing
		if err != nil {
			s.parentLog.Warn("doorman server: refreshing leases from the parent failed, retrying", slog.String("parent", p.finder.Addr), slog.Any("error", err))
		} else {
			s.parentLog.Log(slog.LevelInfo, "doorman server: refreshing leases from the parent works again", slog.String("parent", p.finder.Addr))
		}
	}
	if next == time.Duration(math.MaxInt64) {
		return parentIdle
	}
	return next
}

// parentRequests condenses the server's state into GetServerCapacity
// requests of at most DefaultMaxResourcesPerRequest resources: per
// resource with clients, its clients' wants summed per priority band
// (num_clients counting each client's subclients), and as has the
// server's lease from the parent, whose capacity is raised to what it
// has handed out when that is more (see GetServerCapacity).
func (s *Server) parentRequests(now time.Time) []*pb.GetServerCapacityRequest {
	s.epochMu.RLock()
	rs := s.snapshot()
	s.epochMu.RUnlock()
	sort.Slice(rs, func(i, j int) bool { return rs[i].id < rs[j].id })
	var reqs []*pb.GetServerCapacityRequest
	var req *pb.GetServerCapacityRequest
	for _, r := range rs {
		rr := r.parentRequest(now)
		if rr == nil {
			continue
		}
		if req == nil || len(req.Resource) == DefaultMaxResourcesPerRequest {
			req = &pb.GetServerCapacityRequest{ServerId: proto.String(s.parent.id)}
			reqs = append(reqs, req)
		}
		req.Resource = append(req.Resource, rr)
	}
	return reqs
}

func (r *resource) parentRequest(now time.Time) *pb.ServerCapacityResourceRequest {
	sec := now.Unix()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.deleted || len(r.leases) == 0 {
		return nil
	}
	type band struct {
		clients int64
		wants   float64
	}
	bands := make(map[int64]*band)
	// Sum in slot order, not in the leases map's random order: the same
	// requests give the same sums to the last bit (simulations replay).
	for i := 1; i < len(r.tab.slots); i++ {
		sl := &r.tab.slots[i]
		if sl.client == "" { // free
			continue
		}
		b := bands[sl.priority]
		if b == nil {
			b = &band{}
			bands[sl.priority] = b
		}
		wants, weight := sl.wants, sl.weight
		if f, ok := r.tab.floor(int32(i), sec); ok {
			// A restarted subserver knows only its clients that are
			// back; the others still hold their part of its old grant,
			// which it keeps till then (see decide). Ask for them too,
			// or our parent cuts what we may hand out below what our
			// clients hold, and our other subservers pay for it.
			wants, weight = math.Max(wants, f.amount), math.Max(weight, f.weight)
		}
		b.clients += max(int64(math.Round(weight)), 1)
		b.wants += wants
	}
	prios := make([]int64, 0, len(bands))
	for p := range bands {
		prios = append(prios, p)
	}
	sort.Slice(prios, func(i, j int) bool { return prios[i] < prios[j] })
	rr := &pb.ServerCapacityResourceRequest{ResourceId: proto.String(r.id)}
	for _, p := range prios {
		b := bands[p]
		rr.Wants = append(rr.Wants, &pb.PriorityBandAggregate{
			Priority: proto.Int64(p), NumClients: proto.Int64(min(b.clients, MaxSubclients)), Wants: proto.Float64(b.wants)})
	}
	_, _, handedOut := r.tab.totals()
	switch {
	case r.parentExpiry > sec:
		rr.Has = &pb.Lease{
			ExpiryTime:      proto.Int64(r.parentExpiry),
			RefreshInterval: proto.Int64(r.parentRefresh),
			Capacity:        proto.Float64(math.Max(r.tmpl.Capacity, handedOut)),
		}
	case r.parentExpiry == 0:
		// Before the parent's first answer, in learning mode, the server
		// echoed its clients' claims (leases a previous master, or this
		// server before a restart, handed out): it says it has them, so
		// that the parent counts them as held, and says with a refresh
		// interval of 0 that this is no lease the parent granted: it has
		// lost track of its grant, if it had one, and knows only the
		// clients back so far (a Sluice parent then keeps the old grant
		// for it until that ends; see reconstructed). It says so even
		// with nothing to claim: the first client back may hold nothing.
		rr.Has = &pb.Lease{
			ExpiryTime:      proto.Int64(max(r.tab.latest(), sec)),
			RefreshInterval: proto.Int64(0),
			Capacity:        proto.Float64(handedOut),
		}
	}
	return rr
}

// askParent sends req to the parent node's master, discovering it and
// following redirects.
func (s *Server) askParent(ctx context.Context, req *pb.GetServerCapacityRequest) (*pb.GetServerCapacityResponse, error) {
	var resp *pb.GetServerCapacityResponse
	err := s.parent.finder.Call(ctx, "GetServerCapacity", func(ctx context.Context, conn pb.Conn) (*pb.Mastership, error) {
		var err error
		resp, err = conn.GetServerCapacity(ctx, req)
		if err != nil || len(resp.GetResponse()) > 0 {
			return nil, err
		}
		return resp.GetMastership(), nil
	})
	return resp, err
}

// applyParent records the parent's leases and returns how many resources
// it leased and when to ask again: half the shortest refresh interval.
func (s *Server) applyParent(resp *pb.GetServerCapacityResponse) (int, time.Duration) {
	s.epochMu.RLock()
	defer s.epochMu.RUnlock()
	if !s.Mastership().IsMaster {
		return 0, parentIdle // lost mastership meanwhile: the state is gone
	}
	// The parent's answer is laid over the current configuration's
	// template (SetRepository leaves an intermediate's resources alone):
	// what the parent does not send comes from the configuration now, not
	// from the one the resource was first matched against. Holding cfgMu
	// orders this with SetRepository: an answer applied after it returns
	// uses its templates.
	s.cfgMu.RLock()
	defer s.cfgMu.RUnlock()
	repo := s.repo
	sec := s.clock.Now().Unix()
	next := time.Duration(math.MaxInt64)
	n := 0
	for _, rr := range resp.GetResponse() {
		r := s.lookup(rr.GetResourceId())
		if r == nil {
			continue
		}
		gets := rr.GetGets()
		if gets == nil {
			continue
		}
		expiry := parentExpiry(gets.GetExpiryTime(), sec)
		r.mu.Lock()
		if !r.deleted {
			r.tmpl = fromWire(placeholder(repo.Match(r.id)), rr)
			// The parent's learning duration may end learning mode sooner
			// (before its answer the resource learns for the local
			// template's, or the default lease length).
			if until := s.masterSince.Add(r.tmpl.LearningDuration()); until.Before(r.learningUntil) {
				r.learningUntil = until
			}
			if r.parentExpiry == 0 {
				// The first lease since the server started (or became
				// master) ends no sooner than every lease of the grant
				// before: a Sluice parent ends it with that grant when
				// this server had one (see decide), which is when the
				// leases handed out of it have all ended. Learning mode
				// need not outlast it, nor the short leases of a safe
				// mode before the restart.
				end := time.Unix(expiry, 0)
				if safe := s.masterSince.Add(time.Duration(safeLeaseLength(max(r.tmpl.Algorithm.RefreshInterval, 1))) * time.Second); end.Before(safe) {
					end = safe
				}
				if end.Before(r.learningUntil) {
					r.learningUntil = end
				}
			}
			r.parentExpiry = expiry
			r.parentRefresh = wirenum.ClampSeconds(gets.GetRefreshInterval(), 1)
			r.sharesValid = false
			n++
			// Exactly half the interval, not rounded up to a whole
			// second: the clients' leases are cut at this lease's expiry
			// (a whole second) and they renew every max(interval/2, 1) s,
			// so with a parent's 1 s interval renewing only every second
			// leaves no margin: one failed refresh and a client renewing
			// meanwhile is handed a lease ending before its next renewal.
			next = min(next, wirenum.Seconds(r.parentRefresh, 1)/2)
		}
		r.mu.Unlock()
	}
	return n, next
}

// parentExpiry returns the expiry of a parent's lease, expiry on the
// wire, received at sec: within [sec, sec+wirenum.MaxSeconds], so that a
// parent's answer neither leases for longer than any lease lasts nor
// looks like no answer at all (0).
func parentExpiry(expiry, sec int64) int64 {
	return min(max(expiry, sec), sec+wirenum.MaxSeconds)
}

// fromWire returns the template for an intermediate's resource after its
// parent's answer: the leased capacity, and the parent's safe capacity
// and algorithm when it sends them (and they are valid), else old's (the
// local template's, or the placeholder's).
func fromWire(old *Template, rr *pb.ServerCapacityResourceResponse) *Template {
	t := *old
	// Quantities are bounded as clients' wants are (see MaxCapacity).
	t.Capacity = clampWants(rr.GetGets().GetCapacity())
	if rr.SafeCapacity != nil {
		if v := rr.GetSafeCapacity(); !math.IsNaN(v) {
			v = math.Min(v, MaxCapacity) // negative: unlimited
			t.SafeCapacity = &v
		}
	}
	if a := rr.GetAlgorithm(); a != nil {
		nt := t
		nt.Algorithm = Algorithm{Kind: Kind(a.GetKind()), LeaseLength: a.GetLeaseLength(), RefreshInterval: a.GetRefreshInterval()}
		if a.LearningModeDuration != nil {
			d := a.GetLearningModeDuration()
			nt.Algorithm.LearningModeDuration = &d
		}
		for _, p := range a.GetParameters() {
			nt.Algorithm.Parameters = append(nt.Algorithm.Parameters, Parameter{Name: p.GetName(), Value: p.GetValue()})
		}
		if nt.Validate() == nil {
			t = nt
		}
	}
	return &t
}
