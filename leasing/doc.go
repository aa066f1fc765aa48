// Package leasing is the client side of Sluice's Doorman: cooperative,
// globally coordinated client-side rate limiting through leases on
// capacity.
//
// A Doorman server (Sluice's, in package leasing/server, or the original,
// github.com/youtube/doorman: both speak the gRPC protocol of package
// doormanpb, service doorman.Capacity) divides each resource's capacity
// between the clients asking for it and hands each client a lease: a
// capacity valid until an expiry time, to be renewed every refresh
// interval.
//
// A Client holds leases for the resources of one process. It refreshes all
// of them with one bulk request at the server's refresh interval (never
// one resource more often than every 5 s, the original client's rule),
// follows mastership redirects, backs off while the server is unreachable
// (capped exponential backoff, each wait drawn from the upper half of its
// bound so that clients cut off together do not return together) and,
// when a lease expires unrenewed, falls back per resource to its Mode:
// Optimistic (use what it wants), Pessimistic (use nothing) or Safe (use
// the server's safe capacity).
//
// A RateLimiter turns a resource's capacity into a local rate of calls per
// second, spread evenly over the second; a Gauge turns it into a bound on
// concurrent holders. Both follow capacity changes at once.
//
// A program that embeds only the client (as a channel does) links neither
// the server nor its dependencies: this package does not import
// leasing/server.
//
// Time comes from an injected clock (package clock), so tests and
// simulations drive the same code production runs. Metrics go to a
// tally.Scope under the names in package stats.
package leasing
