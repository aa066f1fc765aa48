// Package pool keeps a Channel's connections to its peers.
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
// Calls never dial. The Pool's Dialer, installed in the tchannel.Channel,
// refuses at once a dial to a managed host:port that does not come from its
// connector, so a call that finds no connection fails before sending
// instead of waiting on tchannel-go's connect path, whose lock ignores
// deadlines, or on a handshake that never completes.
//
// Choosing among the peers is not the pool's business: a peer list
// (package peerlist) holds a Conn per peer (Acquire, Release), reads its
// State, and is told of its changes as a Watcher. Users configure the
// pool through channel.ConnectConfig, which ConnectConfig mirrors.
package pool
