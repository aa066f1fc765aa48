// Package peerlist keeps the peers of one service and chooses one for
// each attempt of a call: each peer's busy limiter, pending calls,
// latency estimate, pushback rest, slow mark and ejection, and the passes
// over the peers that apply package balance's rules to them.
//
// A List takes its peers' connections from a pool.Pool (a List without
// one counts every peer Ready, for tests of the choice alone), and keeps
// the judgement of a peer that left (its limiter, latency estimate,
// ejection) for DepartedGrace, taking it up again if the peer comes back
// meanwhile; after that it is dropped.
//
// # Choice
//
// Every Peer has its own busy.Limiter. A Busy answer with no hint is told
// to it (End), as the busy-throttling design says; a Busy answer carrying
// a pushback hint (EndPushedBack) instead holds the peer, for the hinted
// time, at the calls it had pending when the answer came: the server said
// it is full. List.Choose considers Ready peers only; it skips peers the
// caller excludes (those an earlier attempt of the same call used), peers
// held at their level and peers whose limiter refuses, and among the rest
// prefers the one with the fewest pending calls, then a clearly lower
// latency estimate (under half and over 1 ms lower), breaking ties at
// random. Small lists are scanned whole;
// larger ones use the power of two random choices, which is nearly as good
// and costs the same at any size.
//
// The limiter and the rest are per criticality class (ChooseClassAt,
// EndBusy; class.go): a Busy answered to a call of one class throttles
// that class and those below, never a higher one, and a Busy naming the
// class its server refuses has the peer refuse that class and those
// below locally for a short time (RefusedError). The default class,
// Critical, uses the peer's own limiter and rest; the other classes'
// state is made only once a Busy needs it.
//
// Every rule of the choice is stated by package balance and computed by
// internal/balancing (Better, LotteryKey, Slow and ProbeInterval,
// SlowStart, Ejection, Ring and Capacity);
// this package keeps the figures they need and applies them: peers whose
// effective weights differ (discovery's weights, or slow start after a
// peer became ready from cold) are chosen at random in proportion to
// weight / (1 + pending / weight);
// a peer whose latency stands far above the others' gets only a probe
// every 2 s; a peer ejected after UNEXPECTED or NETWORK answers in a row is
// left out, within the ejection cap and panic threshold; and a call with a
// shard key goes to the key's home on a consistent-hash ring, or past it
// when the home cannot take it or has its bounded load (ChooseKeyAt).
//
// A request a peer's limiter refuses is offered to the next-best peer. When
// every Ready peer that would allow it is excluded, Choose reuses an
// excluded one, as gRPC's retry design allows. When nothing can take the
// request, nothing may be sent, and the error says why:
// peer.ErrThrottled (every Ready peer's limiter refused), ErrConnecting
// (none is Ready yet, some are connecting: wait on List.Changed and choose
// again), ErrResolving (the resolver has not answered yet),
// peer.ErrUnavailable (every peer is in TransientFailure),
// peer.ErrNoPeers.
package peerlist
