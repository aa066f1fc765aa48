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
//     expired.
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
//     infinite wants, which poison every share of the resource).
//   - Limits on resources, distinct clients and leases (Config.MaxResources,
//     MaxClients, MaxLeases) bound the server's memory; a request that
//     would exceed one is refused with ResourceExhausted naming it. The
//     original has none.
//   - GetServerCapacity's safe_capacity, when the template sets none, is
//     the dynamic value per client (capacity / subclients), as in
//     GetCapacity's answers; the original sends 0, which a lower server
//     would hand its clients as "block".
//   - A resource no template matches gets what it asks for with a 60 s
//     lease renewed every 16 s (the design's defaults); the original
//     requires a "*" template, so it never meets one.
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
// expiry order (one per lease length, so that a renewal is an O(1) move to
// a tail, even after a configuration change shortens leases). State is locked per resource; resources whose leases
// have all expired are forgotten by the requests that follow, a few at a
// time, from a heap ordered by when each is next due, never waiting on a
// busy resource: no request waits on a server-wide sweep. See
// BenchmarkDecide, BenchmarkGetCapacityLoopback and BenchmarkLeaseMemory,
// and the figures in benchmarks/README.md.
package server
