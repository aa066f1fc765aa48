// Package server is Sluice's Doorman server: it divides each resource's
// configured capacity between the clients asking for it and hands each a
// lease, speaking the original Doorman's gRPC protocol (service
// doorman.Capacity, package leasing/doormanpb), so that it can replace the
// original's server under the original's clients and servers, and serve
// Sluice's (package leasing).
//
// A Server matches each resource id against a Repository of templates in
// the original's YAML format (see ParseRepository) and divides the
// template's capacity with its algorithm: NoAlgorithm, Static,
// ProportionalShare or FairShare. A lease is a capacity valid until an
// expiry time (now + lease_length), to be renewed every refresh_interval.
// The server never grants more than the capacity left after the other
// clients' unexpired leases (for the sharing algorithms), and for a
// learning period after it starts it hands clients back what they report
// they have.
//
// GetServerCapacity serves servers lower in a tree: a server's priority
// bands are aggregated, and it counts as the sum of their num_clients
// subclients wanting the sum of their wants, each subclient entitled to an
// equal share, as in the original. The response carries the template's
// algorithm, so that the lower server hands out leases the same way.
//
// # Master election
//
// Several servers form one node by sharing an Election (Config.Election;
// package etcdelection campaigns on an etcd v3 key). Only the master
// serves: the others answer GetCapacity, GetServerCapacity and
// ReleaseCapacity with the mastership field alone (the master's address,
// or none while no master is known), which clients follow, and Discovery
// says who the master is. A server that wins starts empty, in learning
// mode for each template's learning duration, as at start; one that loses
// drops all its state at once (requests hold a read lock on the state, a
// change of mastership the write lock, so no request sees half of
// either). The Election interface only reports outcomes and has no clock,
// so a simulation can drive a Server with its own. A server with no
// Election is its own master, as before. How long a master cut off from
// the others may keep serving is the Election's bound: for etcdelection,
// its session TTL (3 s by default), counted from the last renewal etcd
// acknowledged, so that it stops before another can win.
//
// # Server tree
//
// A server with a Parent is an intermediate: it is a client of the parent
// node through GetServerCapacity. Every resource its clients ask for goes
// into one request (up to DefaultMaxResourcesPerRequest resources each),
// with its clients' wants summed per priority band and their number
// (subclients counted for servers below it), and its lease as has. The
// parent's master is found with Discovery and its redirects followed, as
// the leasing client does (package leasing/internal/master, shared). For
// each resource the intermediate hands out at most the capacity it was
// leased, with the parent's algorithm and safe capacity, never beyond its
// own lease's expiry, and with half the parent's refresh interval (the
// design's decay factor of 0.5 per level); it refreshes at half the
// parent's refresh interval too, at once when a new resource appears, and
// with a capped, jittered backoff when the parent is unreachable, so that
// the intermediates of a parent that went down do not come back to it in
// lockstep (one failed batch of resources does not stop the others;
// Config.Logger gets a line when refreshes start failing and when they
// work again). Before the
// parent's first answer for a resource it has nothing to hand out (the
// design: a server without capacity behaves as if it had none) and asks
// clients back within a second; but in learning mode (after it starts or
// wins mastership) it echoes what its clients say they have, as a root
// does, and its first request tells the parent it has their sum, so that
// clients keep their leases through a restart or a change of master. The
// parent's answer is laid over the current configuration's template, so
// a reload counts from the parent's next answer. When its lease is lost
// it is in safe mode: it hands out the safe capacity the parent last
// sent, per client (negative: what they want), asked back every refresh
// interval in leases of two refresh intervals and a second: an expiry is
// a whole second, and a lease must last past the client's next renewal,
// even a late one.
//
// Shortfall. When the root cuts an intermediate's lease, the
// intermediate's clients keep their leases until they renew: in the
// design, the capacity the root takes back may meanwhile be granted to
// another server, and the clients' total overshoots the capacity (as the
// design's own simulation shows). A Sluice intermediate says in has what
// it has handed out, when that is more than its lease, and a Sluice root
// keeps counting that claim (never more than it granted the intermediate
// before) as held until the intermediate says less. The capacity taken
// back is granted elsewhere only once the first intermediate's clients
// have renewed, at the cost of up to one more client and intermediate
// refresh before the new split. An original intermediate sends no has and
// is served as the design says.
//
// # Compatibility with the original
//
// Replayed side by side, the server answers the original's clients as the
// original's server does: every request is answered, however soon after
// the last (the 5 s minimum between refreshes is the original client's
// rule); empty resource ids in ReleaseCapacity are ignored (the original
// client's Close sends one before each real one); a master's answers carry
// no mastership field (which the original client would take for a
// redirect); configurations load as the original's do (see
// ParseRepository for the few it refuses, and why). Where Sluice differs,
// on purpose:
//
//   - Learning mode: a client's claim of what it has is echoed back but
//     capped at the capacity the other clients leave (for
//     PROPORTIONAL_SHARE and FAIR_SHARE). The original echoes any claim,
//     so one client claiming 1e308 (or a negative amount) would starve
//     every other, or hand out more than the capacity, until its lease
//     expired. (An intermediate its parent has not answered yet has no
//     capacity to cap claims at: it echoes them, and says in its first
//     request to the parent that it has their sum, which the parent caps.)
//   - FAIR_SHARE is exact max-min fairness (water-filling), for any number
//     of clients: clients wanting less than the level get what they want,
//     the others the level (times their subclients), and the whole
//     capacity is handed out. The original runs two rounds of
//     redistribution and stops, which can leave capacity unassigned or
//     split it unevenly when wants are spread wide.
//   - Requests are checked as a whole before anything changes: NaN,
//     infinite or negative wants or has, empty or over-long ids, a
//     resource named twice, num_clients below 1 are refused with
//     InvalidArgument naming the field (the original accepts NaN and
//     infinite wants, which poison every share of the resource). Wants
//     and claims above MaxCapacity are taken as MaxCapacity, and a
//     template's capacity above it is refused: with every quantity
//     bounded, no sum or share can overflow (in the original two clients
//     wanting 1e308 overflow the total of wants, and every share of the
//     resource becomes NaN).
//   - Limits on resources, distinct clients and leases (Config.MaxResources,
//     MaxClients, MaxLeases) bound the server's memory; a request that
//     would exceed one is refused with ResourceExhausted naming it, but
//     for a full client table's new client from a source below its
//     share (see Hostile clients). The original has none, and no bound
//     on connections.
//   - GetServerCapacity's safe_capacity, when the template sets none, is
//     the dynamic value per client (capacity / subclients), as in
//     GetCapacity's answers; the original sends 0, which a lower server
//     would hand its clients as "block".
//   - A resource no template matches gets what it asks for with a 60 s
//     lease renewed every 16 s (the design's defaults); the original
//     requires a "*" template, so it never meets one.
//   - A restarted intermediate (or an intermediate node's new master)
//     marks the claims it reports before its parent's first answer with
//     a refresh interval of 0. A parent seeing the mark grants and counts
//     it at least its old grant until that grant ends, asks its own
//     parent for it meanwhile, and ends its first lease with the old
//     grant; the restarted server ends learning mode with that first
//     lease. The original hands the part held by the clients still away
//     to other servers at once, and the clients' total overshoots
//     capacity (see sluice-lab sim doorman and tools/benchmarks/README.md);
//     its servers ignore the mark (they read has.capacity only).
//   - Server tree: a Sluice intermediate hands its clients half its
//     parent's refresh interval and refreshes at half of it, as the design
//     says (the original's intermediate passes the parent's interval on
//     and refreshes at it, no more often than every 5 s); it sends its
//     lease as has (the original's sends none) and, as root, counts an
//     intermediate's has as held (see Shortfall above). Both directions
//     were checked against the original's request and answer shapes,
//     emulated from its code (its binaries predate Go modules): an
//     original intermediate's GetServerCapacity (server_id, one band of
//     priority 1 with num_clients and wants, no has, and its "*" probe)
//     under a Sluice root, and a Sluice intermediate under a parent answering
//     as the original root does (gets, algorithm, safe_capacity, no
//     mastership; Discovery and mastership redirects from a non-master).
//   - A non-master's answers carry the mastership field with the master's
//     address, or an empty one while it knows none, as the original's.
//
// # Hostile clients
//
// Serve bounds what a client can hold, with defaults a zero Config
// means (each a Config field; an option passed to Serve overrides the
// gRPC setting it names):
//
//   - connections: at most MaxConns at once (default half the process's
//     descriptor limit). At the cap a new connection closes the least
//     useful one: one that never made a call, then one that did, the
//     longest idle first, never one with a call in flight (a call counts
//     from its decoded request to its handler's return). A connection
//     with no call for MaxConnectionIdle (5 min) is closed gracefully;
//     one that has not finished its TLS and HTTP/2 handshakes after
//     ConnectionTimeout (10 s; gRPC's default is 120 s) is dropped; one
//     carries at most MaxConcurrentStreams calls at once (100); a client
//     pinging more often than KeepaliveMinTime (10 s) is sent GOAWAY,
//     and pings with no call in flight are allowed, as a Doorman
//     client is idle between refreshes; a connection whose writes have
//     made no progress for 30 s (its client stopped reading) is closed.
//     The listener's closes (at the cap, for stalled writes, and for
//     idleness gRPC's graceful close missed) are counted in
//     lease.server_conns_closed, tagged reason.
//   - the client table (MaxClients) is shared between sources, a source
//     being the request's remote IP address (an IPv6 /64; "local" for
//     requests without one, over an in-process transport). When it is
//     full, a new client from a source holding fewer than MaxClients / S
//     clients (S sources holding clients, the new one's counted) takes
//     the place of the client of the source holding the most that has
//     gone longest without a request, plain clients before servers
//     lower in the tree; that client's leases are released as expiry
//     releases them (lease.server_clients_evicted counts it), and it
//     comes back as a new client. A source at or above its share is
//     refused with ResourceExhausted, as any client was before. A flood
//     of client ids from one address fills at most the room others leave.
//   - the resource and lease tables (MaxResources, MaxLeases) are shared
//     the same way. A resource belongs to the source whose request
//     created it; a full resource table makes room for a source holding
//     fewer than MaxResources / S resources by forgetting the resource
//     of the source holding the most that has gone longest without a
//     request, its leases released (lease.server_resources_evicted). A
//     lease counts for its client's source; a full lease table makes
//     room for a source holding fewer than MaxLeases / S leases by
//     releasing every lease of the client of the source holding the most
//     that has gone longest without a request. A configured resource
//     (one a template names exactly) belongs to no source and is created
//     even in a full resource table (it counts, and may take the count
//     beyond MaxResources by the number of such templates): a flood of
//     resource ids cannot keep clients from the resources the
//     configuration names.
//
// # Cost
//
// A request costs O(log n) in the number of clients of its resource,
// with the exact shares: each resource keeps its clients in a treap
// ordered by wants per subclient, every subtree carrying the sums of its
// wants, subclients and grants, so that a change of wants moves one node
// and the FAIR_SHARE level or the PROPORTIONAL_SHARE split is one descent
// (a renewal with unchanged wants and grant touches no tree at all).
// Expired leases are found in O(1) at the heads of per-resource lists in
// expiry order (one per lease length, and one for an intermediate's
// leases cut at its own lease's expiry, so that a renewal is an O(1) move
// to a tail, even after a configuration change shortens leases). State is locked per resource; resources whose leases
// have all expired are forgotten by the requests that follow, a few at a
// time, from a heap ordered by when each is next due, never waiting on a
// busy resource: no request waits on a server-wide sweep. See
// BenchmarkDecide, BenchmarkGetCapacityLoopback and BenchmarkLeaseMemory,
// and the figures in tools/benchmarks/README.md.
package server
