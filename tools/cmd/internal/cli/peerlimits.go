package cli

import "github.com/sluice-rpc/sluice/channel"

// peerLimitFlags registers a server's flags for channel.PeerLimits and
// returns where they land (zero: the Channel's defaults).
func peerLimitFlags(fs *FlagSet) *channel.PeerLimits {
	var l channel.PeerLimits
	fs.IntVar(&l.MaxConns, "max-conns", 0, "the most inbound connections held, `N` (0: half the descriptor limit; at the cap the longest idle go first)")
	fs.DurationVar(&l.IdleTimeout, "idle-timeout", 0, "close an inbound connection with no call for `D` (0: 5m; pings do not count)")
	fs.DurationVar(&l.HandshakeTimeout, "handshake-timeout", 0, "a new connection's init request must come within `D` (0: 5s)")
	fs.DurationVar(&l.WriteTimeout, "write-timeout", 0, "close a connection that has read nothing of the answers for `D` (0: 30s)")
	fs.DurationVar(&l.StallTimeout, "stall-timeout", 0, "drop a request whose next fragment has not come for `D` (0: 10s)")
	fs.Int64Var(&l.MaxUnfinishedBytesPerConn, "max-unfinished-per-conn", 0, "the most `BYTES` of requests still arriving per connection (0: 4x the request size limit)")
	fs.Int64Var(&l.MaxUnfinishedBytes, "max-unfinished", 0, "the most `BYTES` of requests still arriving in all (0: 32x the request size limit)")
	fs.IntVar(&l.MaxCallsPerConn, "max-calls-per-conn", 0, "the most calls a connection has in flight, `N` (0: 1024)")
	fs.Int64Var(&l.MaxAnswerBytes, "max-answer-bytes", 0, "the most `BYTES` of calls whose answers are not yet written, over all connections (0: 128 MiB; negative: no bound); calls over it get BUSY")
	fs.Int64Var(&l.MinReadRate, "min-read-rate", 0, "close a connection whose answers waited for it throughout --write-timeout while it read fewer than `BYTES` a second (0: 131072; negative: only one that read nothing)")
	return &l
}

// peerLimitsHelp is the paragraph of a server's help about its limits.
const peerLimitsHelp = `Every frame a peer sends is checked before it is read: one that breaks
the TChannel protocol closes its connection and nothing else. The limits
flags bound what peers can make the server hold (connections, time, bytes
of requests in flight, bytes of answers not yet written); each peer the server closes a connection of,
refuses or drops a request of is named on stderr, at most 10 lines a
second.`
