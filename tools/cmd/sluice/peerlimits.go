package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/uber/tchannel-go"
)

// peerLimitFlags registers a server's flags for channel.PeerLimits and
// returns where they land (zero: the Channel's defaults).
func peerLimitFlags(fs *flagSet) *channel.PeerLimits {
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

// warnLogger is a tchannel-go logger that writes Sluice's warnings about
// peers to w, one line each with their fields, and drops the rest of what
// tchannel-go logs (a flood of bad peers would flood it). It keeps only
// the fields of those warnings: tchannel-go adds fields for every
// connection, which a logger keeping them all holds for as long as the
// connection lives (about 2.7 KB each).
type warnLogger struct {
	tchannel.Logger // the null logger, for every other level
	mu              *sync.Mutex
	w               io.Writer
	fields          tchannel.LogFields // a warning's, or none
}

func newWarnLogger(w io.Writer) tchannel.Logger {
	return &warnLogger{Logger: tchannel.NullLogger, mu: &sync.Mutex{}, w: w}
}

func (l *warnLogger) WithFields(fields ...tchannel.LogField) tchannel.Logger {
	if len(fields) == 0 || fields[0].Key != "remotePeer" {
		return l // tchannel-go's own fields: never printed
	}
	return &warnLogger{Logger: l.Logger, mu: l.mu, w: l.w, fields: fields}
}

func (l *warnLogger) Fields() tchannel.LogFields { return l.fields }

func (l *warnLogger) Warn(msg string) {
	if !strings.HasPrefix(msg, "sluice:") {
		return
	}
	var b strings.Builder
	b.WriteString(time.Now().UTC().Format("2006-01-02T15:04:05.000Z"))
	b.WriteString(" ")
	b.WriteString(msg)
	for _, f := range l.fields {
		fmt.Fprintf(&b, " %s=%v", f.Key, f.Value)
	}
	b.WriteString("\n")
	l.mu.Lock()
	io.WriteString(l.w, b.String())
	l.mu.Unlock()
}

// Fatal logs and exits, as tchannel-go's loggers do (it calls Fatal on an
// accept error it cannot recover from).
func (l *warnLogger) Fatal(msg string) {
	fmt.Fprintf(l.w, "sluice: fatal: %s\n", msg)
	os.Exit(1)
}
