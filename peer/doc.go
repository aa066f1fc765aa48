// Package peer keeps the peers of one service and chooses one for each
// attempt of a call.
//
// Every Peer has its own busy.Limiter. List.Choose skips peers the caller
// excludes (those an earlier attempt of the same call used) and peers whose
// limiter refuses, and among the rest prefers the one with the fewest pending
// calls, then a clearly (2x) lower latency estimate, breaking ties at random. Small lists are scanned whole;
// larger ones use the power of two random choices, which is nearly as good
// and costs the same at any size.
//
// A request a peer's limiter refuses is offered to the next-best peer. When
// every peer that would allow it was excluded, Choose reuses an excluded
// peer, as gRPC's retry design allows; when every peer refuses, it returns
// ErrThrottled, and nothing may be sent.
package peer
