package server

import (
	"context"
	"log/slog"
	"math"
	"net/netip"
	"runtime"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
)

// getCapacity grants or renews leases for the resources in req. Every
// resource of a valid request gets an entry in the response. A request
// that would add resources, clients or leases beyond the server's limits
// is refused as a whole with codes.ResourceExhausted.
//
// A server that is not the master answers every request with only the
// mastership field (see Discovery).
func (s *Server) getCapacity(ctx context.Context, req *pb.GetCapacityRequest) (*pb.GetCapacityResponse, error) {
	if m := s.redirect(); m != nil {
		return &pb.GetCapacityResponse{Mastership: m}, nil
	}
	if err := s.validateGetCapacity(req); err != nil {
		return nil, s.invalidArgument("GetCapacity", err)
	}
	rs := req.GetResource()
	ds := make([]demand, len(rs))
	for i, r := range rs {
		ds[i] = demand{id: r.GetResourceId(), wants: clampWants(r.GetWants()), weight: 1, priority: r.GetPriority(), has: r.Has,
			claim: clampWants(r.GetHas().GetCapacity())}
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

// demand is one resource request, from a client or a server.
type demand struct {
	id       string
	wants    float64
	weight   float64 // subclients
	priority int64
	has      *pb.Lease
	// claim is has's capacity as the server takes it: within [0,
	// MaxCapacity] (0 without has), as wants is.
	claim  float64
	server bool // from GetServerCapacity
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
		s.clientLog.Warn("doorman server: refused a request for a limit", slog.String("rpc", rpc), slog.String("source", src.String()), slog.Any("error", err))
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
			r, c := s.resourceFor(ds[i].id, src, now, &g)
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

// decide runs the cleanup, insertion, capacity and response steps for one
// resource request from client, of source src. It returns false when r
// was reaped meanwhile and must be looked up again.
func (s *Server) decide(r *resource, client string, src netip.Addr, d *demand, now time.Time, g *grant, out *decision) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.deleted {
		return false
	}
	r.last.Store(now.UnixNano()) // for the choice of a resource to evict (see sources.go)
	sec := now.Unix()
	learning := now.Before(r.learningUntil)
	if !learning {
		s.clean(r, sec)
	}
	i, prev := s.record(r, client, src, d, now, g)
	tm := s.leaseTerms(r, sec)
	var gets float64
	switch {
	case tm.tmpl == nil:
		s.unmatched.Inc(1)
		gets = d.wants
	case learning:
		gets = s.echo(r, i, d, tm)
	default:
		gets = s.share(r, i, d, prev, tm, sec)
	}
	f, floored := r.setHeld(i, d, prev, tm, gets, sec)
	expiry, length := leaseEnd(d, tm, f, floored, sec)
	if sl := &r.tab.slots[i]; !prev.known || sl.expiry != expiry || sl.length != int32(length) {
		r.tab.unlink(i)
		r.tab.link(i, expiry, length)
	}
	r.updateGauges()
	*out = r.decision(tm, gets, expiry)
	return true
}

// before is what a resource counted for a client's lease when its
// request came.
type before struct {
	known  bool    // the client held a lease of the resource
	weight float64 // its subclients (0 when not known)
	has    float64 // what it held
	expiry int64   // when its lease ends
}

// record enters d in r's table (r.mu held) as client's demand: a new
// lease, or new wants or subclients for its lease. It returns the
// client's slot and what the table counted for it before.
func (s *Server) record(r *resource, client string, src netip.Addr, d *demand, now time.Time, g *grant) (int32, before) {
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
	return i, before{known: known, weight: prevWeight, has: sl.has, expiry: sl.expiry}
}

// terms are what one resource's leases are made of at one moment.
type terms struct {
	tmpl     *Template // nil: no template matched
	capacity float64   // to divide between the clients
	// leaseLength and refresh are the lease length and refresh interval
	// handed out, in seconds.
	leaseLength, refresh int64
	// lastExpiry is the latest expiry a lease may have: an
	// intermediate's own lease's (math.MaxInt64 for a root).
	lastExpiry int64
}

// leaseTerms returns r's lease terms at sec (r.mu held): its template's,
// or for an intermediate what its parent leased it (see fromParent).
func (s *Server) leaseTerms(r *resource, sec int64) terms {
	tm := terms{tmpl: r.tmpl, lastExpiry: math.MaxInt64}
	tm.leaseLength, tm.refresh = leaseParams(tm.tmpl)
	if tm.tmpl != nil {
		tm.capacity = tm.tmpl.Capacity
		if s.parent != nil {
			tm.capacity, tm.leaseLength, tm.refresh, tm.lastExpiry = r.fromParent(sec)
		}
	}
	return tm
}

// echo returns what slot i of r gets in learning mode (r.mu held): what
// the client says it has, or nothing when it says nothing.
func (s *Server) echo(r *resource, i int32, d *demand, tm terms) float64 {
	if d.has == nil {
		return 0
	}
	// Echo what the client says it has, but never more than the capacity
	// left (or a nonsense value): one client claiming 1e308 would
	// otherwise starve every other until its lease expires. An
	// intermediate its parent has not answered yet knows no capacity to
	// cap claims at: it echoes them, and its first request to the parent
	// says it has their sum, which the parent counts (see parentRequest).
	gets := d.claim
	if s.parent != nil && r.parentExpiry == 0 {
		return gets
	}
	switch tm.tmpl.Algorithm.Kind {
	case ProportionalShare, FairShare:
		_, _, held := r.tab.totals()
		gets = math.Min(gets, math.Max(0, tm.capacity-(held-r.tab.slots[i].has)))
	case Static:
		gets = math.Min(gets, tm.capacity) // the capacity is per client
	}
	return gets
}

// share returns what slot i of r gets from the algorithm (r.mu held):
// its share of the capacity, within what the other clients' leases leave
// for ProportionalShare and FairShare, and at least its floor while it
// has one. A server asking again after losing track of our grant to it
// gets a floor here.
func (s *Server) share(r *resource, i int32, d *demand, prev before, tm terms, sec int64) float64 {
	t := &r.tab
	if !r.sharesValid || r.sharesCapacity != tm.capacity {
		r.shares = t.computeShares(tm.tmpl.Algorithm.Kind, tm.capacity)
		r.sharesValid, r.sharesCapacity = true, tm.capacity
	}
	gets := r.shares.target(d.wants, d.weight)
	if k := tm.tmpl.Algorithm.Kind; k == ProportionalShare || k == FairShare {
		_, _, held := t.totals()
		gets = math.Max(0, math.Min(gets, tm.capacity-(held-t.slots[i].has)))
	}
	if d.server && prev.known && reconstructed(d.has) && prev.expiry > sec {
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
		t.raiseFloor(i, floor{prev.has, prev.weight, prev.expiry}, sec)
	}
	if f, ok := t.floor(i, sec); ok {
		_, _, held := t.totals()
		gets = math.Max(gets, math.Min(f.amount, tm.capacity-(held-t.slots[i].has)))
	}
	return gets
}

// setHeld records what slot i of r, granted gets, counts as held (r.mu
// held), and returns its floor, if it has one.
func (r *resource) setHeld(i int32, d *demand, prev before, tm terms, gets float64, sec int64) (floor, bool) {
	t := &r.tab
	held := gets
	if d.server && prev.known && d.has != nil && tm.tmpl != nil {
		// A server's clients keep the leases of its old grant until they
		// renew: what it says it has handed out (never more than it was
		// granted) stays counted until it says less.
		held = math.Max(gets, math.Min(d.claim, prev.has))
	}
	f, floored := t.floor(i, sec)
	if floored {
		held = math.Max(held, f.amount)
	}
	t.setHas(i, held)
	return f, floored
}

// leaseEnd returns the expiry of the lease granted for d at sec, and the
// length of the expiry list it goes in. An intermediate never leases
// beyond its own lease: its clients' leases end with it.
func leaseEnd(d *demand, tm terms, f floor, floored bool, sec int64) (expiry, length int64) {
	expiry, length = sec+tm.leaseLength, tm.leaseLength
	lastExpiry := tm.lastExpiry
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
	return expiry, length
}

// decision returns the lease granted: gets until expiry, with the
// resource's safe capacity (its template's, or the capacity per
// subclient), none when no template matched (r.mu held).
func (r *resource) decision(tm terms, gets float64, expiry int64) decision {
	out := decision{tmpl: tm.tmpl, capacity: gets, expiry: expiry, refresh: tm.refresh}
	if tm.tmpl != nil {
		out.hasSafe = true
		if tm.tmpl.SafeCapacity != nil {
			out.safe = *tm.tmpl.SafeCapacity
		} else {
			_, weight, _ := r.tab.totals()
			out.safe = tm.capacity / weight
		}
	}
	return out
}

// reconstructed reports whether has, in a server's request, is the
// claims a Sluice intermediate echoed before its parent's first answer
// (marked with a refresh interval of 0, which no granted lease has)
// rather than a lease the parent granted. The original's intermediates
// send no has.
func reconstructed(has *pb.Lease) bool {
	return has != nil && has.RefreshInterval != nil && has.GetRefreshInterval() == 0
}
