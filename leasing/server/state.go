package server

import (
	"container/heap"
	"fmt"
	"hash/maphash"
	"math"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uber-go/tally/v4"

	"github.com/sluice-rpc/sluice/stats"
)

// numShards is the number of independently locked parts of the resource
// and client maps: requests for different resources rarely wait on each
// other, and no lock is held across the whole server.
const numShards = 64

// Work bounds, so that no request pays for the server's housekeeping with
// more than a fraction of a millisecond.
const (
	// reapPerRequest is how many due resources a request checks for
	// expired leases on its way (when any are due).
	reapPerRequest = 8
	// maxReapAtLimit is how many due resources a request that would
	// exceed a limit checks before it is refused.
	maxReapAtLimit = 2048
	// cleanPerVisit bounds the expired leases removed from one resource
	// at a time; the rest stay counted (a conservative error: capacity they
	// held is not handed out again) until the next visit.
	cleanPerVisit = 1024
	// bulkRequest is the size above which a request is bulk: it waits for
	// one of GOMAXPROCS-1 turns, so that a processor stays free for
	// renewals.
	bulkRequest = 64
	// refusalDelay is how long the answer to a bulk request refused for a
	// limit is held back (in wall time).
	refusalDelay = 2 * time.Millisecond
	// bulkSlice is how long a bulk request runs (in wall time) before it
	// pauses as long, so that it takes at most about half a processor.
	bulkSlice = time.Millisecond
	// yieldEvery is how many resources a request handles between yields
	// of its processor.
	yieldEvery = 32
)

// resource is the server's state for one resource.
type resource struct {
	mu             sync.Mutex
	id             string
	tmpl           *Template // nil when no template matched
	learningUntil  time.Time
	leases         map[string]int32 // client id -> slot in tab
	tab            table
	shares         shares
	sharesValid    bool
	sharesCapacity float64 // the capacity shares was computed for
	deleted        bool    // reaped: users must look the resource up again
	// configured: named exactly by a template when it was created; it
	// belongs to no source and is created even in a full table (see
	// sources.go).
	configured bool
	// last is when a client last asked for it (unix ns).
	last atomic.Int64
	// Guarded by Server.srcMu: the source it belongs to (nil when
	// configured, or once forgotten), whether it is taken out of its
	// list to be evicted, and its place in the list.
	src      *source
	evicting bool
	lru      lruLinks[*resource]

	// An intermediate's lease from its parent: the capacity is tmpl's.
	parentExpiry  int64 // unix seconds; 0 until the parent has answered
	parentRefresh int64 // seconds

	capacityGauge, wantsGauge, clientsGauge tally.Gauge
}

type resourceShard struct {
	mu sync.RWMutex
	m  map[string]*resource
	_  [40]byte // keep shards on separate cache lines
}

type clientShard struct {
	mu sync.Mutex
	m  map[string]*clientEntry // clients holding leases, by id
	_  [48]byte
}

// limit is a bound on a count of live things (resources, clients or
// leases). n counts the live ones plus the reservations of requests in
// flight, so that a request is admitted only if all it may create fits.
type limit struct {
	n    atomic.Int64
	max  int64
	what string // "resources", "clients", "leases"
	name string // the Config field and the flag naming the limit
}

func (r *resource) links() *lruLinks[*resource] { return &r.lru }
func (r *resource) lastUsed() int64             { return r.last.Load() }

// reserve takes k units if they fit under the limit. Nothing always
// fits, even while the count is over the limit (which racing creations
// and a client evicted for another can make it for a moment).
func (l *limit) reserve(k int64) bool {
	if k == 0 {
		return true
	}
	for {
		cur := l.n.Load()
		if cur+k > l.max {
			return false
		}
		if l.n.CompareAndSwap(cur, cur+k) {
			return true
		}
	}
}

// grant is what a request reserved: the resources, clients and leases it
// may create. Creations beyond the grant (possible only when state changed
// between admission and the request's work, such as a lease expiring in
// between) are counted without a limit check: the limits can be exceeded
// by at most the creations of requests in flight that raced so.
type grant struct {
	resources, clients, leases int64
}

func (s *Server) take(l *limit, reserved *int64) {
	if *reserved > 0 {
		*reserved--
		return
	}
	l.n.Add(1)
}

// settle gives back what a request reserved and did not use.
func (s *Server) settle(g *grant) {
	if g.resources != 0 {
		s.nResources.n.Add(-g.resources)
	}
	if g.clients != 0 {
		s.nClients.n.Add(-g.clients)
	}
	if g.leases != 0 {
		s.nLeases.n.Add(-g.leases)
	}
	*g = grant{}
}

func (s *Server) shard(id string) int {
	return int(maphash.String(s.seed, id) % numShards)
}

// lookup returns the live resource named id, or nil.
func (s *Server) lookup(id string) *resource {
	sh := &s.resources[s.shard(id)]
	sh.mu.RLock()
	r := sh.m[id]
	sh.mu.RUnlock()
	return r
}

// resourceFor returns the resource named id, creating it (from g's
// reservation) for source src on first use; created reports that it did.
func (s *Server) resourceFor(id string, src netip.Addr, now time.Time, g *grant) (r *resource, created bool) {
	if r := s.lookup(id); r != nil {
		return r, false
	}
	s.cfgMu.RLock()
	sh := &s.resources[s.shard(id)]
	sh.mu.Lock()
	if r := sh.m[id]; r != nil {
		sh.mu.Unlock()
		s.cfgMu.RUnlock()
		return r, false
	}
	tmpl := s.repo.Match(id)
	gauges := tmpl != nil && tmpl.IdentifierGlob == id
	if s.parent != nil {
		tmpl = placeholder(tmpl) // the parent is asked once the request is recorded (serve)
	}
	// Per-resource gauges only for resources named exactly by a template:
	// ids come from clients, and tally keeps every tagged scope for good,
	// so tagging by any id would let clients grow the server's memory
	// without bound. Resources matched by a glob (or none) report no gauges.
	r = &resource{
		id:            id,
		tmpl:          tmpl,
		learningUntil: s.learningUntil(id, tmpl, s.repo),
		configured:    gauges,
		leases:        make(map[string]int32),
		tab:           newTable(),
		capacityGauge: nopGauge{}, wantsGauge: nopGauge{}, clientsGauge: nopGauge{},
	}
	if gauges {
		scope := s.scope.Tagged(map[string]string{stats.LeaseTagResource: id})
		r.capacityGauge = scope.Gauge(stats.LeaseCapacity)
		r.wantsGauge = scope.Gauge(stats.LeaseWants)
		r.clientsGauge = scope.Gauge(stats.LeaseClients)
	}
	sh.m[id] = r
	s.take(&s.nResources, &g.resources)
	s.linkResource(r, src, now.UnixNano())
	sh.mu.Unlock()
	s.cfgMu.RUnlock()
	// The first check: when the first lease would have expired.
	ll, _ := leaseParams(tmpl)
	due := now.Unix() + ll
	if lu := r.learningUntil.Unix(); lu > due {
		due = lu
	}
	s.schedule(r, due)
	return r, true
}

// nopGauge is the gauge of resources that report none.
type nopGauge struct{}

func (nopGauge) Update(float64) {}

// leaseParams returns the lease length and refresh interval for resources
// of tmpl (the original's defaults when no template matched).
func leaseParams(tmpl *Template) (leaseLength, refresh int64) {
	if tmpl == nil {
		return unmatchedLeaseLength, unmatchedRefreshInterval
	}
	return tmpl.Algorithm.LeaseLength, tmpl.Algorithm.RefreshInterval
}

// addLease records that client, asking from src at now, holds one more
// lease, of r (r.mu held), and returns its entry.
func (s *Server) addLease(client string, src netip.Addr, server bool, r *resource, now time.Time, g *grant) *clientEntry {
	s.take(&s.nLeases, &g.leases)
	sh := &s.clients[s.shard(client)]
	sh.mu.Lock()
	e := sh.m[client]
	fresh := e == nil
	if fresh {
		e = &clientEntry{id: client, server: server}
		sh.m[client] = e
		s.take(&s.nClients, &g.clients)
	}
	e.leases++
	e.addResource(r)
	// Under the shard's lock, so that a client's entry in the map always
	// has its source.
	s.srcMu.Lock()
	if fresh {
		s.linkClientLocked(e, src, now.UnixNano())
	}
	s.addHeld(e.src, tabLeases, 1)
	s.srcMu.Unlock()
	sh.mu.Unlock()
	return e
}

// dropLease records that e holds one lease less: none of r (r.mu held).
func (s *Server) dropLease(e *clientEntry, r *resource) {
	s.nLeases.n.Add(-1)
	sh := &s.clients[s.shard(e.id)]
	sh.mu.Lock()
	e.leases--
	e.removeResource(r)
	gone := e.leases == 0
	if gone {
		delete(sh.m, e.id)
		s.nClients.n.Add(-1)
	}
	s.srcMu.Lock()
	if e.src != nil {
		s.addHeld(e.src, tabLeases, -1)
	}
	if gone {
		s.unlinkClientLocked(e)
	}
	s.srcMu.Unlock()
	sh.mu.Unlock()
}

func (s *Server) clientKnown(client string) bool {
	sh := &s.clients[s.shard(client)]
	sh.mu.Lock()
	_, ok := sh.m[client]
	sh.mu.Unlock()
	return ok
}

// admit reserves what a request from client, of source src, for
// resources ids may create, or says which limit it would exceed. A
// request that creates nothing (renewals of existing leases) is always
// admitted, and so is a configured resource (see sources.go). A request
// refused for a full table makes room in it by evicting another source's
// client or resource if its source holds less than its share of that
// table (see makeRoom).
func (s *Server) admit(client string, src netip.Addr, ids []string, now time.Time) (grant, error) {
	k := int64(len(ids))
	// Fast path, far from the limits: reserve as if every lease and
	// resource were new; unused reservations are given back by settle.
	if s.nResources.reserve(k) {
		if s.nLeases.reserve(k) {
			if s.nClients.reserve(1) {
				return grant{resources: k, clients: 1, leases: k}, nil
			}
			s.nLeases.n.Add(-k)
		}
		s.nResources.n.Add(-k)
	}
	// Near a limit: count what the request would really create, and stop
	// as soon as it cannot fit, so that a flood is refused after a lookup
	// or two.
	var g grant
	var why error // why no room was made
	for attempt := 0; ; attempt++ {
		need, over := s.count(client, ids, &g, false)
		if over == nil {
			if over = s.tryReserve(&need, &g); over == nil {
				return g, nil
			}
		}
		if attempt == 1 {
			// Expired leases did not make room: take another source's
			// place in each full table where the request's source holds
			// less than its share, if then everything fits.
			if why = s.makeRoomFor(client, src, ids, &g); why == nil {
				continue
			}
		}
		if attempt >= 1 {
			s.settle(&g)
			err := fmt.Errorf("the server's limit of %d %s (%s) is reached: %d held, and this request would add at least %d",
				over.max, over.what, over.name, over.n.Load(), needOf(&need, over, s))
			if why != nil {
				err = fmt.Errorf("%w; %v", err, why)
			}
			return grant{}, err
		}
		// Expired leases may free what is needed: look for them first.
		s.reap(now, maxReapAtLimit, true)
	}
}

// makeRoomFor makes room, for a request from client of source src for
// ids, in each table the request does not fit (see sources.go), adding
// what it holds for the request to g; or it reports why it did not.
// Every table is checked before anything is evicted.
func (s *Server) makeRoomFor(client string, src netip.Addr, ids []string, g *grant) error {
	need, _ := s.count(client, ids, g, true)
	short := func(l *limit, k int64) int64 { return k - (l.max - l.n.Load()) }
	type want struct {
		t tableID
		l *limit
		k int64
	}
	var wants []want
	for _, w := range []want{{tabClients, &s.nClients, need.clients}, {tabResources, &s.nResources, need.resources}, {tabLeases, &s.nLeases, need.leases}} {
		if w.k > 0 && short(w.l, w.k) > 0 {
			wants = append(wants, w)
		}
	}
	if len(wants) == 0 {
		return nil // room was made meanwhile
	}
	s.srcMu.Lock()
	for _, w := range wants {
		if _, err := s.shareLocked(src, w.t, w.k, w.l.max, w.l.what); err != nil {
			s.srcMu.Unlock()
			return err
		}
	}
	s.srcMu.Unlock()
	for _, w := range wants {
		var err error
		switch w.t {
		case tabClients:
			if err = s.makeRoom(src); err == nil {
				g.clients = 1
			}
		case tabResources:
			err = s.makeRoomForResources(src, w.k, g)
		case tabLeases:
			err = s.makeRoomForLeases(src, w.k, g)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// count returns what a request from client for ids would create beyond
// what g holds already, or, unless all, as soon as that exceeds what a
// limit has left, the count so far and the limit. A configured resource
// needs no room (see sources.go).
func (s *Server) count(client string, ids []string, g *grant, all bool) (need grant, over *limit) {
	if g.clients == 0 && !s.clientKnown(client) {
		need.clients = 1
		if !all && s.nClients.n.Load()+1 > s.nClients.max {
			return need, &s.nClients
		}
	}
	freeResources := s.nResources.max - s.nResources.n.Load()
	freeLeases := s.nLeases.max - s.nLeases.n.Load()
	s.cfgMu.RLock()
	repo := s.repo
	s.cfgMu.RUnlock()
	for k, id := range ids {
		if k > 0 && k%(8*yieldEvery) == 0 {
			runtime.Gosched()
		}
		newResource, newLease := false, false
		if r := s.lookup(id); r == nil {
			newResource, newLease = true, true
		} else {
			r.mu.Lock()
			if r.deleted {
				newResource, newLease = true, true
			} else if _, ok := r.leases[client]; !ok {
				newLease = true
			}
			r.mu.Unlock()
		}
		if newResource && !repo.named(id) {
			need.resources++
			if !all && need.resources-g.resources > freeResources {
				return need, &s.nResources
			}
		}
		if newLease {
			need.leases++
		}
		if !all && newLease && need.leases-g.leases > freeLeases {
			return need, &s.nLeases
		}
	}
	need.resources = max(0, need.resources-g.resources)
	need.leases = max(0, need.leases-g.leases)
	return need, nil
}

func needOf(need *grant, l *limit, s *Server) int64 {
	switch l {
	case &s.nResources:
		return need.resources
	case &s.nClients:
		return need.clients
	}
	return need.leases
}

// tryReserve reserves need entirely, adding it to g, or nothing and
// returns the limit that refused.
func (s *Server) tryReserve(need, g *grant) *limit {
	if !s.nResources.reserve(need.resources) {
		return &s.nResources
	}
	if !s.nClients.reserve(need.clients) {
		s.nResources.n.Add(-need.resources)
		return &s.nClients
	}
	if !s.nLeases.reserve(need.leases) {
		s.nResources.n.Add(-need.resources)
		s.nClients.n.Add(-need.clients)
		return &s.nLeases
	}
	g.resources += need.resources
	g.clients += need.clients
	g.leases += need.leases
	return nil
}

// removeLease forgets lease i of r (r.mu held).
func (s *Server) removeLease(r *resource, i int32) {
	sl := &r.tab.slots[i]
	client, e := sl.client, sl.ent
	r.tab.remove(i)
	r.tab.unlink(i)
	delete(r.leases, client)
	r.tab.release(i)
	r.sharesValid = false
	s.dropLease(e, r)
}

// clean forgets up to cleanPerVisit leases of r that expired by now (r.mu
// held). It reports whether expired leases remain.
func (s *Server) clean(r *resource, now int64) (more bool) {
	for n := 0; ; n++ {
		h := r.tab.earliest()
		if h == 0 || r.tab.slots[h].expiry > now {
			return false
		}
		if n == cleanPerVisit {
			return true
		}
		s.removeLease(r, h)
	}
}

// The reaper: a heap of resources by the time they are next due for a
// check, each live resource in it exactly once. Requests do the checks on
// their way, a few at a time, so that resources whose clients went away
// are forgotten without a background goroutine and without a sweep under
// a server-wide lock.
type reapEntry struct {
	due int64 // unix seconds
	r   *resource
}

type reapHeap []reapEntry

func (h reapHeap) Len() int           { return len(h) }
func (h reapHeap) Less(i, j int) bool { return h[i].due < h[j].due }
func (h reapHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *reapHeap) Push(x any)        { *h = append(*h, x.(reapEntry)) }
func (h *reapHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = reapEntry{}
	*h = old[:len(old)-1]
	return e
}

func (s *Server) schedule(r *resource, due int64) {
	s.reapMu.Lock()
	s.pushLocked(r, due)
	s.reapMu.Unlock()
}

func (s *Server) pushLocked(r *resource, due int64) {
	heap.Push(&s.reapQ, reapEntry{due: due, r: r})
	s.nextDue.Store(s.reapQ[0].due)
}

// reap checks up to budget resources due by now: it forgets their expired
// leases and forgets resources left without any. Unless wait is set it
// does nothing while another request is reaping.
func (s *Server) reap(now time.Time, budget int, wait bool) {
	sec := now.Unix()
	if sec < s.nextDue.Load() {
		return
	}
	if wait {
		s.reapMu.Lock()
	} else if !s.reapMu.TryLock() {
		return
	}
	defer s.reapMu.Unlock()
	for n := 0; n < budget && len(s.reapQ) > 0 && s.reapQ[0].due <= sec; n++ {
		if n > 0 && n%(2*yieldEvery) == 0 {
			runtime.Gosched() // a long reap, at a limit: let renewals run
		}
		e := heap.Pop(&s.reapQ).(reapEntry)
		r := e.r
		// Never wait on a resource while holding the reaper's lock: a busy
		// resource is checked again a second later.
		if !r.mu.TryLock() {
			heap.Push(&s.reapQ, reapEntry{due: sec + 1, r: r})
			continue
		}
		if r.deleted { // evicted (see forget)
			r.mu.Unlock()
			continue
		}
		if now.Before(r.learningUntil) {
			// Leases are not cleaned in learning mode.
			heap.Push(&s.reapQ, reapEntry{due: max(r.learningUntil.Unix(), sec+1), r: r})
			r.mu.Unlock()
			continue
		}
		more := s.clean(r, sec)
		switch {
		case more:
			heap.Push(&s.reapQ, reapEntry{due: sec, r: r})
		case r.tab.n() == 0:
			s.deleteLocked(r)
		default:
			// Due again when its last lease would have expired.
			heap.Push(&s.reapQ, reapEntry{due: r.tab.latest(), r: r})
			r.updateGauges()
		}
		r.mu.Unlock()
	}
	if len(s.reapQ) > 0 {
		s.nextDue.Store(s.reapQ[0].due)
	} else {
		s.nextDue.Store(math.MaxInt64)
	}
}

// deleteLocked forgets r, which holds no lease (r.mu held): requests
// that hold it look it up again.
func (s *Server) deleteLocked(r *resource) {
	r.deleted = true
	sh := &s.resources[s.shard(r.id)]
	sh.mu.Lock()
	if sh.m[r.id] == r {
		delete(sh.m, r.id)
	}
	sh.mu.Unlock()
	s.nResources.n.Add(-1)
	r.updateGauges()
	s.unlinkResource(r)
}

func (r *resource) updateGauges() {
	wants, _, has := r.tab.totals()
	r.capacityGauge.Update(has)
	r.wantsGauge.Update(wants)
	r.clientsGauge.Update(float64(len(r.leases)))
}
