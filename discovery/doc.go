// Package discovery tells a Channel who its peers are, and tells the world
// where a server is: resolvers follow a registry and hand over the whole
// current set of peers each time it changes; registrars announce a
// server's address until it leaves.
//
// A Resolver reports to an Updates; a Channel's Client gives it one
// (channel.WithResolver), which holds the one rule every registry shares:
// a registry that fails never empties the peer list. An error, a timeout,
// or an empty answer after a non-empty one keeps the last good set, as
// Envoy keeps a healthy host that discovery no longer lists until
// discovery is back; the failure shows in Channel.Debug (the service's
// resolver state) and in the discovery metrics.
//
// This package has the static resolver and imports no registry client. The
// others are packages of their own, so that a program pays only for the
// registries it uses: discovery/file (a file of peers, re-read when it
// changes), discovery/dns (A, AAAA and SRV records, re-resolved on a
// period and when a peer fails) and discovery/etcd (etcd v3 keys in the
// layout of etcd's naming/endpoints, watched; and registration under an
// etcd lease).
package discovery
