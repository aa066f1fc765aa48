package stats

import "time"

// Metric names of a Doorman server's gRPC service (package leasing/server:
// Server.UnaryInterceptor, which Serve installs, and its configuration
// watchers), beside the lease.* names above.
const (
	// LeaseTagRPC is the tag naming the Doorman RPC: Discovery,
	// GetCapacity, GetServerCapacity or ReleaseCapacity.
	LeaseTagRPC = "rpc"
	// LeaseTagOutcome is the tag naming how an RPC or a configuration
	// reload ended (see the Lease*Outcome values).
	LeaseTagOutcome = "outcome"

	// LeaseServerRequests is a counter tagged rpc and outcome: requests the
	// server answered.
	LeaseServerRequests = "lease.server_requests"
	// LeaseServerLatency is a histogram tagged rpc, with
	// LeaseServerLatencyBuckets: the time from a request's arrival to its
	// answer, failed ones included.
	LeaseServerLatency = "lease.server_latency"
	// LeaseServerResources, LeaseServerClients and LeaseServerLeases are
	// gauges: the resources, distinct clients and leases the server holds
	// (after the last request it answered).
	LeaseServerResources = "lease.server_resources"
	LeaseServerClients   = "lease.server_clients"
	LeaseServerLeases    = "lease.server_leases"
	// LeaseConfigReloads is a counter tagged outcome (applied or refused):
	// new configurations the server's watcher read.
	LeaseConfigReloads = "lease.config_reloads"
)

// The values of LeaseTagOutcome.
const (
	// LeaseOutcomeOK: answered with leases (or, for Discovery, as master).
	LeaseOutcomeOK = "ok"
	// LeaseOutcomeInvalid: refused with InvalidArgument.
	LeaseOutcomeInvalid = "invalid"
	// LeaseOutcomeExhausted: refused with ResourceExhausted, beyond a limit.
	LeaseOutcomeExhausted = "exhausted"
	// LeaseOutcomeNotMaster: answered by a server that is not the master,
	// with only the master's address.
	LeaseOutcomeNotMaster = "not_master"
	// LeaseOutcomeFailed: any other error (cancelled, deadline exceeded,
	// internal).
	LeaseOutcomeFailed = "failed"
	// LeaseOutcomeApplied: a new configuration is in force.
	LeaseOutcomeApplied = "applied"
	// LeaseOutcomeRefused: a new configuration was invalid and the one in
	// force stays.
	LeaseOutcomeRefused = "refused"
)

// LeaseServerLatencyBuckets are the upper bounds of LeaseServerLatency's
// buckets: 1-2-5 steps from 10µs to 1s (a renewal takes tens of
// microseconds, a request of a thousand resources milliseconds), and a
// last, unbounded bucket. Prometheus sees le="1e-05" ... "1", "+Inf".
var LeaseServerLatencyBuckets = steps125(10*time.Microsecond, time.Second)
