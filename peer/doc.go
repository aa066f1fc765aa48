// Package peer holds what a user of a Channel sees of its peers: a
// peer's connection State, its Counts, a Member as a resolver or SetPeers
// gives it, the check of a host:port (ValidateHostPort), and the errors
// of a call that found no peer to take it.
//
// The machinery lives elsewhere, so that each part reads alone: the
// connections (a connector per host:port that dials, handshakes, checks
// health and reconnects with backoff within a budget of connects) are the
// Channel's connection pool, configured by channel.ConnectConfig; the
// peer list that keeps each peer's limiter, pending calls and latency
// estimate and applies the choice rules is the Channel's own; and the
// choice rules themselves (slow start, weights, slow peers and probes,
// outlier ejection, shard keys) are package balance's.
//
// # States
//
// A peer's State follows gRPC's connectivity states: Connecting from the
// moment the peer is added, Ready, TransientFailure after a refused,
// reset, failed or timed-out connect (or a connection that died: dropped
// within a second of its handshake, or unanswered by three pings in a
// row), and Shutdown. A connection the remote closes or resets after
// serving is reconnected at once; one closed by this process's idle sweep
// leaves the peer Idle, not failed, until a call looks at it. Only a Ready
// peer is sent attempts; calls never dial.
//
// # When no peer takes a call
//
// Nothing is sent, and the error says why: ErrThrottled (every Ready
// peer's busy limiter refused), ErrUnavailable (every peer is in
// TransientFailure; its error wraps the latest connection failure, such
// as ErrPeerLeaving for a server that said it is shutting down),
// ErrNoPeers. A Channel returns these very values (channel.ErrThrottled
// and its siblings), so errors.Is finds them.
package peer
