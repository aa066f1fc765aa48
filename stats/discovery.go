package stats

// Discovery metrics. A Channel's resolver for a service (channel.WithResolver)
// reports the first four, tagged service; a registrar (discovery/etcd)
// reports the rest, untagged, to the scope in its configuration.
const (
	// DiscoveryUpdates is a counter: peer sets from the resolver that were
	// applied to the service's peer list.
	DiscoveryUpdates = "discovery.updates"
	// DiscoveryErrors is a counter: the resolver's failures (a lookup
	// error, an empty answer after a non-empty one, an invalid entry). The
	// last good set stays in force through each.
	DiscoveryErrors = "discovery.errors"
	// DiscoveryPeers is a gauge: the peers in the set in force.
	DiscoveryPeers = "discovery.peers"
	// DiscoveryFailing is a gauge: 1 while the resolver's last report was
	// a failure (the last good set is kept), else 0.
	DiscoveryFailing = "discovery.failing"

	// RegistrationRegistered is a gauge: how many of the registrar's
	// addresses the registry holds now (1 while a server's one is
	// registered, 0 once it is lost or withdrawn).
	RegistrationRegistered = "registration.registered"
	// RegistrationWrites is a counter: the times the address was written
	// to the registry (more than one: the registry lost it and it was
	// written again).
	RegistrationWrites = "registration.writes"
	// RegistrationErrors is a counter: failures to register or renew.
	RegistrationErrors = "registration.errors"
)
