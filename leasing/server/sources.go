package server

import (
	"container/heap"
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc/peer"
)

// The tables shared between sources.
//
// A source is where a request comes from: the remote IP address of its
// connection (for IPv6, the address's /64 prefix, what one host or
// subscriber is usually given), or "local" for a request with no peer
// address (an in-process transport). Each client (or server lower in the
// tree) holding leases belongs to the source of the request that made it
// a client, until it holds none; its leases count for that source. Each
// resource belongs to the source of the request that created it, until
// it is forgotten; but a resource named exactly by a template (a
// configured resource) belongs to no source and is created even when the
// resource table is full (it counts, and may take the count beyond the
// limit): there are at most as many as templates, and a flood must not
// keep clients from them.
//
// The three tables (clients, resources, leases) are shared in the same
// way. While a table has room, sources do not matter. When it is full
// (Config.MaxClients, MaxResources, MaxLeases), a request from a source
// holding less than its share of it, the table's size over the number S
// of sources holding any of it (the requesting source counted), makes
// room by taking from the source holding the most: for the client table
// that source's client that has gone longest without a request (plain
// clients before servers, which stand for many clients); for the
// resource table its resource that has gone longest without a request,
// every lease of which is released; for the lease table, as for clients,
// its client that has gone longest without a request, all of whose
// leases are released. Released leases are released as expiry releases
// them. A request from a source holding its share or more is refused
// with ResourceExhausted, as before. So a flood from one source can fill
// the tables, but cannot keep a client of another source out of them;
// and since a source is an address, a flood from many addresses dilutes
// only its own share.
//
// Each request stores its time in its client's entry and its resources
// (one atomic store each, no lock); eviction finds the least recently
// used client or resource from a list kept in the order they were
// linked, relinking those used since at their new time, so each use
// costs at most one relinking later. Sources sit in a heap per table by
// what they hold. Adding and dropping a client, a lease or a resource and
// eviction take srcMu, the innermost lock (after a resource's and a
// client shard's).

// metricClientsEvicted is a counter, on Config.Scope: clients whose
// leases were released to make room in a full client table for a client
// of a source holding less than its share.
const metricClientsEvicted = "lease.server_clients_evicted"

// metricResourcesEvicted is a counter, on Config.Scope: resources
// forgotten, their leases released, to make room in a full resource
// table for a resource of a source holding less than its share.
const metricResourcesEvicted = "lease.server_resources_evicted"

// sourceOf returns the source of the request ctx carries: its peer's IP
// address (an IPv6 address's /64 prefix), or the zero Addr, "local", for
// a request without one.
func sourceOf(ctx context.Context) netip.Addr {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return netip.Addr{}
	}
	var ip netip.Addr
	if t, ok := p.Addr.(*net.TCPAddr); ok {
		ip, _ = netip.AddrFromSlice(t.IP)
	} else if ap, err := netip.ParseAddrPort(p.Addr.String()); err == nil {
		ip = ap.Addr()
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		pfx, _ := ip.Prefix(64)
		ip = pfx.Addr()
	}
	return ip
}

// sourceName is how a source is shown.
func sourceName(a netip.Addr) string {
	switch {
	case !a.IsValid():
		return "local"
	case a.Is6():
		return a.String() + "/64"
	}
	return a.String()
}

// clientEntry is a client (or a server lower in the tree) holding
// leases.
type clientEntry struct {
	id     string
	server bool // it asked through GetServerCapacity
	// last is when the client last asked (unix ns) for any of its leases.
	last atomic.Int64

	// Guarded by the client shard's lock.
	leases int32
	one    *resource              // a resource it holds a lease of
	more   map[*resource]struct{} // the others, for a client of several

	// Guarded by Server.srcMu.
	src      *source // nil once it holds no lease
	evicting bool    // taken out of src's list to be evicted
	lru      lruLinks[*clientEntry]
}

func (e *clientEntry) links() *lruLinks[*clientEntry] { return &e.lru }
func (e *clientEntry) lastUsed() int64                { return e.last.Load() }

func (e *clientEntry) addResource(r *resource) {
	if e.one == nil {
		e.one = r
		return
	}
	if e.more == nil {
		e.more = make(map[*resource]struct{})
	}
	e.more[r] = struct{}{}
}

func (e *clientEntry) removeResource(r *resource) {
	if e.one == r {
		e.one = nil
		return
	}
	delete(e.more, r)
}

// resources returns the resources e holds leases of (shard lock held).
func (e *clientEntry) resources() []*resource {
	rs := make([]*resource, 0, 1+len(e.more))
	if e.one != nil {
		rs = append(rs, e.one)
	}
	for r := range e.more {
		rs = append(rs, r)
	}
	return rs
}

// table names one of the tables shared between sources.
type tableID int

const (
	tabClients tableID = iota
	tabResources
	tabLeases
	numTables
)

// source is what one source holds: counts per table, its clients in two
// lists (plain clients and servers) and its resources in one, each
// ordered by linked, oldest first.
type source struct {
	addr netip.Addr
	// held counts per table: clients (in the lists, and being evicted),
	// resources (the same), leases of its clients.
	held           [numTables]int
	idx            [numTables]int // in Server.srcHeaps
	plain, servers clientList
	res            resourceList
}

func (src *source) list(server bool) *clientList {
	if server {
		return &src.servers
	}
	return &src.plain
}

// lruLinks are an entry's links in an lruList.
type lruLinks[T any] struct {
	prev, next T
	linked     int64 // lastUsed, when it took its place in the list
}

// lruItem is what an lruList holds: a pointer with links and the time
// (unix ns) it was last used.
type lruItem[T any] interface {
	comparable
	links() *lruLinks[T]
	lastUsed() int64
}

// lruList is a list of entries in order of linked, oldest first.
type lruList[T lruItem[T]] struct {
	head, tail T
	n          int
}

type clientList = lruList[*clientEntry]
type resourceList = lruList[*resource]

func (l *lruList[T]) remove(e T) {
	var none T
	le := e.links()
	if le.prev != none {
		le.prev.links().next = le.next
	} else {
		l.head = le.next
	}
	if le.next != none {
		le.next.links().prev = le.prev
	} else {
		l.tail = le.prev
	}
	le.prev, le.next = none, none
	l.n--
}

// insert puts e in order of linked: at the tail, or walking back from it
// for an entry relinked at an older time than the latest.
func (l *lruList[T]) insert(e T) {
	var none T
	le := e.links()
	after := l.tail
	for after != none && after.links().linked > le.linked {
		after = after.links().prev
	}
	le.prev = after
	if after == none {
		le.next = l.head
		l.head = e
	} else {
		le.next = after.links().next
		after.links().next = e
	}
	if le.next != none {
		le.next.links().prev = e
	} else {
		l.tail = e
	}
	l.n++
}

// oldest returns the entry of l that has gone longest without use, or
// nil if l is empty. Entries used since they were linked are relinked at
// their last use on the way: l is in order of linked, and linked <=
// last, so the first entry not used since it was linked has the oldest
// last use of all.
func (l *lruList[T]) oldest() T {
	for range l.n {
		e := l.head
		last := e.lastUsed()
		if last <= e.links().linked {
			return e
		}
		l.remove(e)
		e.links().linked = last
		l.insert(e)
	}
	return l.head // every one used meanwhile: the head is as old as any
}

// sourceHeap orders sources by what they hold of one table, the most on
// top.
type sourceHeap struct {
	srcs []*source
	t    tableID
}

func (h *sourceHeap) Len() int           { return len(h.srcs) }
func (h *sourceHeap) Less(i, j int) bool { return h.srcs[i].held[h.t] > h.srcs[j].held[h.t] }
func (h *sourceHeap) Swap(i, j int) {
	h.srcs[i], h.srcs[j] = h.srcs[j], h.srcs[i]
	h.srcs[i].idx[h.t], h.srcs[j].idx[h.t] = i, j
}
func (h *sourceHeap) Push(x any) {
	src := x.(*source)
	src.idx[h.t] = len(h.srcs)
	h.srcs = append(h.srcs, src)
}
func (h *sourceHeap) Pop() any {
	old := h.srcs
	src := old[len(old)-1]
	old[len(old)-1] = nil
	h.srcs = old[:len(old)-1]
	src.idx[h.t] = -1
	return src
}

// resetSourcesLocked forgets every source (srcMu held, or before the
// server is shared).
func (s *Server) resetSourcesLocked() {
	s.sources = make(map[netip.Addr]*source)
	for t := range s.srcHeaps {
		s.srcHeaps[t] = sourceHeap{t: tableID(t)}
		s.srcHolding[t] = 0
	}
}

// sourceLocked returns addr's source, made if it holds nothing yet
// (srcMu held).
func (s *Server) sourceLocked(addr netip.Addr) *source {
	src := s.sources[addr]
	if src == nil {
		src = &source{addr: addr}
		s.sources[addr] = src
		for t := range s.srcHeaps {
			heap.Push(&s.srcHeaps[t], src)
		}
	}
	return src
}

// addHeld changes what src holds of table t by k (srcMu held), and
// forgets src once it holds no client and no resource.
func (s *Server) addHeld(src *source, t tableID, k int) {
	before := src.held[t]
	src.held[t] += k
	switch {
	case before == 0 && src.held[t] > 0:
		s.srcHolding[t]++
	case before > 0 && src.held[t] == 0:
		s.srcHolding[t]--
	}
	if src.held[tabClients] == 0 && src.held[tabResources] == 0 {
		for t := range s.srcHeaps {
			heap.Remove(&s.srcHeaps[t], src.idx[t])
		}
		delete(s.sources, src.addr)
		return
	}
	heap.Fix(&s.srcHeaps[t], src.idx[t])
}

// linkClientLocked records a new client e from addr, asking at now
// (unix ns), with its first lease (its shard's lock and srcMu held).
func (s *Server) linkClientLocked(e *clientEntry, addr netip.Addr, now int64) {
	e.last.Store(now)
	src := s.sourceLocked(addr)
	e.src, e.lru.linked = src, now
	src.list(e.server).insert(e)
	s.addHeld(src, tabClients, 1)
}

// unlinkClientLocked records that e holds no lease any more (srcMu
// held).
func (s *Server) unlinkClientLocked(e *clientEntry) {
	src := e.src
	if src == nil {
		return
	}
	if !e.evicting {
		src.list(e.server).remove(e)
	}
	e.src, e.evicting = nil, false
	s.addHeld(src, tabClients, -1)
}

// linkResource records that r, new, was created by a request from addr
// at now (unix ns); a configured resource belongs to no source.
func (s *Server) linkResource(r *resource, addr netip.Addr, now int64) {
	r.last.Store(now)
	if r.configured {
		return
	}
	s.srcMu.Lock()
	src := s.sourceLocked(addr)
	r.src, r.lru.linked = src, now
	src.res.insert(r)
	s.addHeld(src, tabResources, 1)
	s.srcMu.Unlock()
}

// unlinkResource records that r is forgotten.
func (s *Server) unlinkResource(r *resource) {
	s.srcMu.Lock()
	defer s.srcMu.Unlock()
	src := r.src
	if src == nil {
		return
	}
	if !r.evicting {
		src.res.remove(r)
	}
	r.src, r.evicting = nil, false
	s.addHeld(src, tabResources, -1)
}

// shareLocked checks that addr, holding have of table t, may take k
// more from another source: have+k-1 is less than its share of the
// table's size max among the sources holding some of it, addr counted
// (srcMu held). It returns the source holding the most, or why not.
func (s *Server) shareLocked(addr netip.Addr, t tableID, k, max int64, what string) (*source, error) {
	var have int64
	n := int64(s.srcHolding[t])
	if src := s.sources[addr]; src != nil && src.held[t] > 0 {
		have = int64(src.held[t])
	} else {
		n++
	}
	if (have+k-1)*n >= max {
		return nil, fmt.Errorf("source %s holds %d %s, and %d more would take its share of the table (%d among %d sources) or more",
			sourceName(addr), have, what, k, max/n, n)
	}
	h := &s.srcHeaps[t]
	if len(h.srcs) == 0 || int64(h.srcs[0].held[t]) <= have+1 {
		// Only while evictions are under way (a full table's sources
		// cannot all be below their share).
		return nil, fmt.Errorf("no source holds two %s more than source %s's %d", what, sourceName(addr), have)
	}
	return h.srcs[0], nil
}

// victim chooses the client to evict for a new client (t is
// tabClients) or for k new leases (tabLeases) from addr, and takes it out
// of its source's list (srcMu held); or it returns nil and why not.
func (s *Server) victim(addr netip.Addr, t tableID, k int64) (*clientEntry, error) {
	l := &s.nClients
	if t == tabLeases {
		l = &s.nLeases
	}
	top, err := s.shareLocked(addr, t, k, l.max, l.what)
	if err != nil {
		return nil, err
	}
	cl := &top.plain
	if cl.n == 0 {
		cl = &top.servers
	}
	e := cl.oldest()
	if e == nil {
		return nil, fmt.Errorf("source %s's clients are all being evicted", sourceName(top.addr))
	}
	cl.remove(e)
	e.evicting = true
	return e, nil
}

// makeRoom evicts a client for a new one from addr if addr holds less
// than its share of the full client table, and then holds a place in the
// table for the new client (in nClients, to be used or given back
// through a grant). It reports why it did not.
func (s *Server) makeRoom(addr netip.Addr) error {
	for range 3 {
		s.srcMu.Lock()
		v, err := s.victim(addr, tabClients, 1)
		s.srcMu.Unlock()
		if v == nil {
			return err
		}
		// Hold the place first: the victim's, once free, must not go to
		// another new client.
		s.nClients.n.Add(1)
		if s.evict(v) {
			s.clientsEvicted.Inc(1)
			return nil
		}
		s.nClients.n.Add(-1)
	}
	return fmt.Errorf("the clients chosen to make room for it kept renewing")
}

// makeRoomForLeases evicts clients of the source holding the most leases
// until k leases are free, if addr holds less than its share of the full
// lease table, and holds them (in nLeases and g). It reports why it did
// not.
func (s *Server) makeRoomForLeases(addr netip.Addr, k int64, g *grant) error {
	for range k + 3 {
		if s.nLeases.reserve(k) {
			g.leases += k
			return nil
		}
		s.srcMu.Lock()
		v, err := s.victim(addr, tabLeases, k)
		s.srcMu.Unlock()
		if v == nil {
			return err
		}
		if s.evict(v) {
			s.clientsEvicted.Inc(1)
		}
	}
	return fmt.Errorf("the clients chosen to make room for its leases kept renewing")
}

// makeRoomForResources forgets resources of the source holding the most
// until k resources are free, if addr holds less than its share of the
// full resource table, and holds them (in nResources and g). It reports
// why it did not.
func (s *Server) makeRoomForResources(addr netip.Addr, k int64, g *grant) error {
	for range 2*k + 3 {
		if s.nResources.reserve(k) {
			g.resources += k
			return nil
		}
		s.srcMu.Lock()
		top, err := s.shareLocked(addr, tabResources, k, s.nResources.max, s.nResources.what)
		var r *resource
		if err == nil {
			if r = top.res.oldest(); r != nil {
				top.res.remove(r)
				r.evicting = true
			}
		}
		s.srcMu.Unlock()
		if err != nil {
			return err
		}
		if r == nil {
			return fmt.Errorf("source %s's resources are all being evicted", sourceName(top.addr))
		}
		s.forget(r)
		s.resourcesEvicted.Inc(1)
	}
	return fmt.Errorf("the resources freed to make room for it were taken by other requests")
}

// forget releases every lease of r, as expiry does, and forgets r.
func (s *Server) forget(r *resource) {
	r.mu.Lock()
	if r.deleted {
		r.mu.Unlock()
		return
	}
	for _, i := range r.leases {
		s.removeLease(r, i)
	}
	s.deleteLocked(r)
	r.mu.Unlock()
}

// evict releases every lease of v, as expiry does. It reports false if v
// still holds a lease afterwards: a request of its own, under way, took
// a new one; v is then put back in its source's list.
func (s *Server) evict(v *clientEntry) bool {
	sh := &s.clients[s.shard(v.id)]
	sh.mu.Lock()
	rs := v.resources()
	sh.mu.Unlock()
	for _, r := range rs {
		r.mu.Lock()
		if i, ok := r.leases[v.id]; ok && !r.deleted && r.tab.slots[i].ent == v {
			s.removeLease(r, i)
			r.updateGauges()
		}
		r.mu.Unlock()
	}
	s.srcMu.Lock()
	defer s.srcMu.Unlock()
	if v.src == nil {
		return true
	}
	v.evicting = false
	v.lru.linked = v.last.Load()
	v.src.list(v.server).insert(v)
	return false
}

// topSources returns the n sources holding the most clients, the most
// first (then by name), and the number of sources.
func (s *Server) topSources(n int) ([]StatusSource, int) {
	s.srcMu.Lock()
	all := make([]StatusSource, 0, len(s.sources))
	for a, src := range s.sources {
		all = append(all, StatusSource{Source: sourceName(a), Clients: src.held[tabClients],
			Resources: src.held[tabResources], Leases: src.held[tabLeases]})
	}
	s.srcMu.Unlock()
	slices.SortFunc(all, func(a, b StatusSource) int {
		if a.Clients != b.Clients {
			return b.Clients - a.Clients
		}
		return strings.Compare(a.Source, b.Source)
	})
	return all[:min(n, len(all))], len(all)
}
