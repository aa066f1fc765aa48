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

// The client table shared between sources.
//
// A source is where a request comes from: the remote IP address of its
// connection (for IPv6, the address's /64 prefix, what one host or
// subscriber is usually given), or "local" for a request with no peer
// address (an in-process transport). Each client (or server lower in the
// tree) holding leases belongs to the source of the request that made it
// a client, until it holds none.
//
// While the table has room, sources do not matter. When it is full
// (Config.MaxClients), a new client from a source holding fewer than
// MaxClients / S clients, S being the number of sources holding clients
// with the new client's counted, takes the place of one client of the
// source holding the most: that source's client that has gone longest
// without a request, plain clients before servers (a server stands for
// many clients). Its leases are released as expiry would release them.
// A new client from a source holding its share or more is refused with
// ResourceExhausted, as before. So a flood from one source can fill the
// table, but cannot keep a client of another source out of it; and since
// a source is an address, a flood from many addresses dilutes only its
// own share.
//
// Each request stores its time in its client's entry (one atomic store
// per resource, no lock); eviction finds the least recently renewed
// client from a list kept in the order clients were linked, relinking
// those renewed since at their new time, so each renewal costs at most one
// relinking later. Sources sit in a heap by clients held. Adding and
// dropping a client and eviction take srcMu, the innermost lock (after a
// resource's and a client shard's).

// metricClientsEvicted is a counter, on Config.Scope: clients whose
// leases were released to make room in a full client table for a client
// of a source holding less than its share.
const metricClientsEvicted = "lease.server_clients_evicted"

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
	src        *source // nil once it holds no lease
	evicting   bool    // taken out of src's list to be evicted
	linked     int64   // last, when it took its place in src's list
	prev, next *clientEntry
}

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

// source is the clients of one source, in two lists (plain clients and
// servers) ordered by linked, oldest first.
type source struct {
	addr           netip.Addr
	clients        int // in the lists, and being evicted
	idx            int // in Server.srcHeap
	plain, servers clientList
}

func (src *source) list(server bool) *clientList {
	if server {
		return &src.servers
	}
	return &src.plain
}

type clientList struct {
	head, tail *clientEntry
	n          int
}

func (l *clientList) remove(e *clientEntry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		l.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		l.tail = e.prev
	}
	e.prev, e.next = nil, nil
	l.n--
}

// insert puts e in order of linked: at the tail, or walking back from it
// for an entry relinked at an older time than the latest.
func (l *clientList) insert(e *clientEntry) {
	after := l.tail
	for after != nil && after.linked > e.linked {
		after = after.prev
	}
	e.prev = after
	if after == nil {
		e.next = l.head
		l.head = e
	} else {
		e.next = after.next
		after.next = e
	}
	if e.next != nil {
		e.next.prev = e
	} else {
		l.tail = e
	}
	l.n++
}

// oldest returns the entry of l that has gone longest without a request,
// or nil if l is empty. Entries renewed since they were linked are
// relinked at their last request on the way: l is in order of linked,
// and linked <= last, so the first entry not renewed since it was linked
// has the oldest last request of all.
func (l *clientList) oldest() *clientEntry {
	for range l.n {
		e := l.head
		last := e.last.Load()
		if last <= e.linked {
			return e
		}
		l.remove(e)
		e.linked = last
		l.insert(e)
	}
	return l.head // every one renewed meanwhile: the head is as old as any
}

// sourceHeap orders sources by clients held, the most on top.
type sourceHeap []*source

func (h sourceHeap) Len() int           { return len(h) }
func (h sourceHeap) Less(i, j int) bool { return h[i].clients > h[j].clients }
func (h sourceHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *sourceHeap) Push(x any) {
	src := x.(*source)
	src.idx = len(*h)
	*h = append(*h, src)
}
func (h *sourceHeap) Pop() any {
	old := *h
	src := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	src.idx = -1
	return src
}

// linkClient records a new client e from addr, asking at now (unix ns).
func (s *Server) linkClient(e *clientEntry, addr netip.Addr, now int64) {
	e.last.Store(now)
	s.srcMu.Lock()
	src := s.sources[addr]
	if src == nil {
		src = &source{addr: addr}
		s.sources[addr] = src
		heap.Push(&s.srcHeap, src)
	}
	e.src, e.linked = src, now
	src.list(e.server).insert(e)
	src.clients++
	heap.Fix(&s.srcHeap, src.idx)
	s.srcMu.Unlock()
}

// unlinkClient records that e holds no lease any more.
func (s *Server) unlinkClient(e *clientEntry) {
	s.srcMu.Lock()
	defer s.srcMu.Unlock()
	src := e.src
	if src == nil {
		return
	}
	if !e.evicting {
		src.list(e.server).remove(e)
	}
	e.src, e.evicting = nil, false
	src.clients--
	if src.clients == 0 {
		heap.Remove(&s.srcHeap, src.idx)
		delete(s.sources, src.addr)
		return
	}
	heap.Fix(&s.srcHeap, src.idx)
}

// victim chooses the client to evict for a new client from addr, and
// takes it out of its source's list (srcMu held); or it returns nil and
// why not.
func (s *Server) victim(addr netip.Addr) (*clientEntry, error) {
	have, n := 0, len(s.sources)
	if src := s.sources[addr]; src != nil {
		have = src.clients
	} else {
		n++
	}
	if int64(have)*int64(n) >= s.nClients.max {
		return nil, fmt.Errorf("source %s holds %d clients, its share of the table (%d among %d sources) or more",
			sourceName(addr), have, s.nClients.max/int64(n), n)
	}
	var top *source
	if len(s.srcHeap) > 0 {
		top = s.srcHeap[0]
	}
	if top == nil || top.clients <= have+1 {
		// Only while evictions are under way (a full table's sources
		// cannot all be below their share).
		return nil, fmt.Errorf("no source holds two clients more than source %s's %d", sourceName(addr), have)
	}
	l := &top.plain
	if l.n == 0 {
		l = &top.servers
	}
	e := l.oldest()
	if e == nil {
		return nil, fmt.Errorf("source %s's clients are all being evicted", sourceName(top.addr))
	}
	l.remove(e)
	e.evicting = true
	return e, nil
}

// makeRoom evicts a client for a new one from addr if addr holds less
// than its share of the full table, and then holds a place in the table
// for the new client (in nClients, to be used or given back through a
// grant). It reports why it did not.
func (s *Server) makeRoom(addr netip.Addr) error {
	for range 3 {
		s.srcMu.Lock()
		v, err := s.victim(addr)
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
	v.linked = v.last.Load()
	v.src.list(v.server).insert(v)
	return false
}

// topSources returns the n sources holding the most clients, the most
// first (then by name), and the number of sources.
func (s *Server) topSources(n int) ([]StatusSource, int) {
	s.srcMu.Lock()
	all := make([]StatusSource, 0, len(s.sources))
	for a, src := range s.sources {
		all = append(all, StatusSource{Source: sourceName(a), Clients: src.clients})
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
