// Package peer keeps the peers of one service, their connections, and
// chooses one for each attempt of a call.
//
// # Connections
//
// A Pool keeps one connection to each host:port, off the callers' path: a
// connector per host:port dials and handshakes with its own timeout,
// watches the connection, pings it (a TChannel ping a second by default),
// and reconnects with gRPC's connection backoff (1 s, x1.6, +-20 % jitter,
// at most 120 s), counted from the start of each failed connect. Its State
// follows gRPC's connectivity states: Connecting from the moment the peer is
// added, Ready, TransientFailure after a refused, reset, failed or timed-out
// connect (or a connection that died: dropped within a second of its
// handshake, or unanswered by three pings in a row), and Shutdown. A
// connection the remote closes or resets after serving is reconnected at
// once; one closed by this process's idle sweep leaves the peer Idle, not
// failed, until a call looks at it. A budget bounds the connects across
// the Pool (ConnectBudget: 2,500 at once, then 100 a second by default),
// so that thousands of peers failing together cannot become a storm of
// dials; a connect a call waits for is never delayed.
//
// A List keeps the judgement of a peer that left (its limiter, latency
// estimate, ejection) for DepartedGrace, and takes it up again if the
// peer comes back meanwhile; after that it is dropped.
//
// Calls never dial. The Pool's Dialer, installed in the tchannel.Channel,
// refuses at once a dial to a managed host:port that does not come from its
// connector, so a call that finds no connection fails before sending
// instead of waiting on tchannel-go's connect path, whose lock ignores
// deadlines, or on a handshake that never completes.
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
// prefers the one with the fewest pending calls, then a clearly (2x) lower
// latency estimate, breaking ties at random. Small lists are scanned whole;
// larger ones use the power of two random choices, which is nearly as good
// and costs the same at any size.
//
// Package balance's rules refine the choice: peers whose effective weights
// differ (discovery's weights, or slow start after a peer became ready
// from cold) are chosen at random in proportion to weight / (pending + 1);
// a peer whose latency stands far above the others' gets only a probe
// every 2 s; a peer ejected after UNEXPECTED or NETWORK answers in a row is
// left out, within the ejection cap and panic threshold; and a call with a
// shard key goes to the key's home on a consistent-hash ring, or past it
// when the home cannot take it or has its bounded load (ChooseKeyAt).
//
// A request a peer's limiter refuses is offered to the next-best peer. When
// every Ready peer that would allow it is excluded, Choose reuses an
// excluded one, as gRPC's retry design allows. When nothing can take the
// request, nothing may be sent, and the error says why: ErrThrottled (every
// Ready peer's limiter refused), ErrConnecting (none is Ready yet, some are
// connecting: wait on List.Changed and choose again), ErrUnavailable (every
// peer is in TransientFailure), ErrNoPeers.
package peer
