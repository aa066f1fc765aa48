package discovery

import (
	"context"
	"time"
)

// Address is one peer a resolver found.
type Address struct {
	// HostPort is the peer's address, host:port.
	HostPort string
	// Weight is the peer's share relative to its service's other peers
	// (SRV weights, Metadata.weight in etcd, "weight" in a file entry), in
	// [balance.MinWeight, MaxWeight], or 0, which means unset, which counts as 1. The chooser
	// shares calls in proportion to it (see package balance), and places
	// the peer on the shard-key ring by it.
	Weight float64
	// Metadata is what the registry holds beside the address (etcd's
	// Metadata), for the caller's own use; nil if none.
	Metadata map[string]any
}

// Resolver follows the peers of one target. Each package's constructor
// returns one; channel.WithResolver ties it to a service.
type Resolver interface {
	// Resolve finds the target's peers and follows them until ctx ends:
	// it reports the whole current set to u each time it may have
	// changed, and each failure to find it. It returns when ctx ends. A
	// resolver calls u from one goroutine at a time.
	Resolve(ctx context.Context, u Updates)
	// String names the target, as the resolver's package parses it
	// ("dns:///kv.example:4040", "etcd://127.0.0.1:2379/services/kv").
	String() string
}

// Updates is what a Resolver reports to. a Channel's Client gives the one that counts;
// tests and tools may write their own.
type Updates interface {
	// Update reports the whole current set of peers.
	Update(addrs []Address)
	// Error reports a failure to find the set: the last good set stays.
	Error(err error)
	// ResolveNow returns a channel that receives a value when the set's
	// user asks for a fresh lookup: a peer's connection failed, or no peer
	// is ready. A resolver that polls (DNS) looks up again, no more often
	// than its own minimum interval; one that is told of every change
	// (etcd, a watched file) may ignore it.
	ResolveNow() <-chan struct{}
}

// Registrar announces servers' addresses in a registry.
// channel.WithRegistrar ties one to a Channel, which registers its address
// once it listens and deregisters it first when it shuts down.
type Registrar interface {
	// Register starts announcing hostPort and keeps it announced (renewing
	// it, and registering it again after the registry lost it) until the
	// Registration's Deregister. It returns at once: a registry that is
	// down does not keep a server from serving; State says when the
	// registration took.
	Register(hostPort string) (Registration, error)
	// String names the registry and where in it servers register.
	String() string
}

// Registration is one address announced by a Registrar.
type Registration interface {
	// Deregister withdraws the address and stops renewing it. It returns
	// once the registry has removed it, or with an error when ctx ends
	// first (the registry then drops it when its lease expires). Calling
	// it again after it succeeded does nothing; after a failure, it tries
	// again.
	Deregister(ctx context.Context) error
	// State is the registration's state now.
	State() RegistrationState
}

// RegistrationState is what a Registration knows of itself.
type RegistrationState struct {
	// Registry names the registrar (its String).
	Registry string
	// HostPort is the address announced.
	HostPort string
	// Registered reports whether the registry holds the address now, as
	// far as the registration knows (it learns of a lost lease at its next
	// renewal).
	Registered bool
	// Lease names the registry's lease that keeps the address, "" when
	// none is held (etcd: the lease ID in hexadecimal).
	Lease string
	// Registrations counts the times the address was written to the
	// registry: more than one means the registry lost it and it was
	// registered again.
	Registrations uint64
	// Deregistered reports whether Deregister was called, whether or not
	// it succeeded (see Registered and LastError).
	Deregistered bool
	// LastError is the last failure to register or renew, "" if none;
	// LastErrorTime is when it happened.
	LastError     string
	LastErrorTime time.Time
}

// DefaultMaxPeers bounds the peer sets a Channel Client takes from its
// resolver, and the sets the registries' resolvers build when their own
// MaxPeers is zero: a bound against a registry gone wrong (a poisoned
// prefix, a runaway autoscaler), each peer costing a connection, not a
// fleet size to plan for.
const DefaultMaxPeers = 10000
