// Package dns finds a service's peers in DNS: A and AAAA records of a name
// with a port, or the SRV records of a name without one, looked up again on
// a period and, rate-limited, whenever the Channel asks (a peer failed, or
// none is ready).
//
// It uses the standard library's resolver (net.Resolver) and no DNS
// library, so it follows the system's configuration (/etc/resolv.conf,
// /etc/hosts) unless the target names a DNS server of its own.
//
// # Targets
//
// Targets have gRPC's form:
//
//	dns:///kv.example:4040              A/AAAA of kv.example, each address with port 4040
//	dns://10.0.0.2:53/kv.example:4040   the same, asking the DNS server at 10.0.0.2:53
//	dns:///_kv._tcp.example.            SRV of _kv._tcp.example. (no port: the records give them)
//
// A DNS server written without a port is on port 53. An IPv6 address is
// written in brackets, in the server ([::1]:53) as in the name
// ([2001:db8::1]:4040).
//
// # What a lookup reports
//
// Each lookup reports its whole result to the discovery.Updates, sorted by
// host:port so that equal answers give equal sets:
//
//   - A/AAAA: one peer per address, ip:port (IPv6 as [ip]:port), Weight 0.
//   - SRV: the records of the lowest priority only (RFC 2782: the others
//     are backups, used when no record of a lower priority is listed; a
//     weighted chooser would send them a share of the calls otherwise).
//     Each record's target is looked up too (up to 8 at once), and each of
//     its addresses becomes a peer ip:port with the record's port and
//     weight: each instance is one peer, one connection, known by its
//     address however many names point at it (a Kubernetes headless
//     service gives one target per pod). Metadata holds the record's
//     target name under "target". A weight of 0 stays 0, which the
//     Client counts as 1: a record of weight 0 among records of weight 10
//     gets a tenth of their share, not RFC 2782's "very small chance". A
//     target of "." (RFC 2782: the service is not available) is left out.
//     An address that two records give is listed twice, the higher weight
//     first, and the Client keeps that one.
//   - An answer that makes more peers than Config.MaxPeers (10,000 by
//     default) is a failure wrapping ErrOverCap and naming the cap,
//     found while the set is built: an SRV answer with more records fails
//     before any target is looked up, and the target lookups stop (those
//     in flight cancelled) once their addresses, each counted once per
//     record naming its target, pass the cap. No set is built or
//     reported, so the Channel's Client keeps the last good one.
//   - A DNS failure (SERVFAIL, no answer within Config.Timeout, a name that
//     does not exist) is reported with Updates.Error, naming the target
//     and the cause; the Channel's Client keeps the last good set.
//
// Go's resolver reports a name that does not exist (NXDOMAIN) and a name
// without records of the type asked (NOERROR with an empty answer) as the
// same error, net.DNSError with IsNotFound, so both are reported as an
// error, not as an empty set: the Client keeps the last good set either
// way, and its State names the cause instead of reporting zero peers as
// OK. An empty set (Update(nil)) is reported when every SRV record has the
// target ".".
//
// An SRV target whose name does not exist is left out of the set, and the
// lookup reports the set and then an error naming the target; any other
// failure to look up a target fails the whole lookup, so that a DNS server
// in trouble does not shrink the set.
//
// # When it looks up
//
// At once when Resolve starts; then Config.Period after the last lookup
// ended; and when Updates.ResolveNow asks, at once if the last lookup
// ended at least Config.MinInterval ago, otherwise as soon as it has.
// Requests made while one waits count as one; none is dropped.
package dns
