package channel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/internal/connlimit"
	"github.com/sluice-rpc/sluice/internal/tchconn"
	"github.com/sluice-rpc/sluice/internal/tframe"
	"github.com/sluice-rpc/sluice/stats"
	"github.com/uber-go/tally/v4"
	"github.com/uber/tchannel-go"
	"golang.org/x/time/rate"
)

// PeerLimits bounds what the Channel's remote peers can make it hold:
// connections, time, and bytes of requests in flight. The zero value means
// the defaults, which suit a server on the open network; a negative value
// turns a limit off (except HandshakeTimeout, which must be positive).
//
// Whatever the limits, every frame a peer sends, to the Channel's server
// side or in answer to its calls, is checked before tchannel-go reads it: a
// frame that breaks the protocol closes its connection (and only it),
// counted in stats.FramesInvalid and logged naming the peer.
//
// The limits bound the memory peers can make the Channel hold while they
// hold it; the Channel never runs or tunes the garbage collector. What a
// peer the limits stopped held is garbage once it is gone, and the Go
// runtime returns it to the system at its own pace, after its next
// collections: with no traffic at all, within a few minutes. An
// application that wants it back early, after an attack, can call
// runtime/debug.FreeOSMemory itself.
type PeerLimits struct {
	// MaxConns bounds the inbound connections held, those still in their
	// handshake included. At the cap a new connection closes one that is
	// still in its handshake, else one that never made a call, else one
	// that made calls, the longest idle first, never one with a call in
	// flight; if every one has a call in flight the new one is closed. A
	// Sluice client's connection is not closed but asked to close itself
	// (as at IdleTimeout), and leaves the count at once; up to
	// MaxConns/16 (at least 8) such connections may be draining beyond the
	// cap, each for at most 2 seconds without a call in flight.
	// 0 means half the process's descriptor limit. A connection that
	// holds no call costs about 26 KB (tchannel-go's state, its two
	// goroutines, the collector's headroom: 257 MiB for 10,000), so where
	// the descriptor limit is large, size the cap to memory too.
	MaxConns int
	// IdleTimeout closes an inbound connection with no call in flight and
	// none for this long; pings do not count. A Sluice client is asked to
	// close it itself, once the calls it may be sending at that moment are
	// answered, and reconnects when it next calls: no call is lost. A plain
	// TChannel client cannot be asked, so the connection is closed under
	// it, and a call it sends at that very moment fails NETWORK, as with
	// an HTTP keep-alive timeout (the server had not read it: a retry
	// policy naming NETWORK covers it). 0 means 5 minutes.
	IdleTimeout time.Duration
	// HandshakeTimeout bounds the wait for an inbound connection's init
	// request, and with WithServerTLS its TLS handshake before it: until
	// both are done, tchannel-go does not see the connection. 0 means 5
	// seconds (tchannel-go's own handshake timeout).
	HandshakeTimeout time.Duration
	// WriteTimeout closes an inbound connection whose peer has read
	// nothing of what the Channel writes to it for this long: answers it
	// does not read pile up. It closes too one whose writes have waited
	// for its peer throughout this long while the peer took fewer than
	// MinReadRate bytes a second: reading a little now and then keeps
	// each write moving, but not the connection open. 0 means 30 seconds.
	WriteTimeout time.Duration
	// MinReadRate, in bytes a second, is the least pace at which a peer
	// with answers waiting for it throughout WriteTimeout must take them
	// (see WriteTimeout). A peer that reads as fast as answers come is
	// never measured. 0 means 128 KiB a second (1 Mbit/s); a negative
	// value asks no pace, only that some write ends within WriteTimeout.
	MinReadRate int64
	// StallTimeout drops a request whose next fragment has not come for
	// this long, whatever time to live it claims (its caller gets TIMEOUT,
	// its handler a cancelled context), and closes a connection whose frame
	// has not been whole for this long since its first byte. 0 means 10
	// seconds.
	StallTimeout time.Duration
	// MaxUnfinishedBytesPerConn bounds the frame bytes of a connection's
	// requests that are still arriving (sent in several fragments, the
	// last one not yet come). A request over it is answered BUSY: before
	// any handler sees it if its first fragment is over, otherwise by
	// dropping it (its handler gets a cancelled context). 0 means four
	// times the maximum request size (WithMaxRequestSize), at least 1 MiB:
	// 16 MiB by default. It must be at least the maximum request size.
	MaxUnfinishedBytesPerConn int64
	// MaxUnfinishedBytes bounds the same over every connection. When it is
	// reached, a connection holding less than its share (the bound over
	// the connections holding unfinished requests) still gets its request
	// in: the largest request of the connection holding the most is
	// dropped to make room. 0 means 32 times the maximum request size, at
	// least 8 times MaxUnfinishedBytesPerConn: 128 MiB by default.
	MaxUnfinishedBytes int64
	// MaxCallsPerConn bounds the calls a connection has in flight in the
	// Channel's handlers; the next is answered BUSY before its handler
	// runs. A peer that does not read its answers stops at this many.
	// 0 means 1,024.
	MaxCallsPerConn int
	// MaxAnswerBytes bounds, over every connection, the bytes of calls
	// whose answers are not yet written to their peer: from a call's first
	// frame until its answer's last frame goes to the socket, each is
	// charged its request's frame bytes plus 64 KiB for its answer (the
	// frame buffer tchannel-go builds it in). A call over the bound is
	// answered BUSY before any handler runs, unless its connection holds
	// less than its share (the bound over the connections owed answers):
	// those are admitted up to an eighth over it, and beyond that the
	// connection owed the most, if over its share, is closed to make room
	// (server.conns_closed{reason=answers_unread}); so peers that do not
	// read cannot lock out one that does. A call that ends without an
	// answer (cancelled, timed out) is released within seconds once its
	// connection's writer is idle. 0 means 128 MiB: with what tchannel-go
	// and handlers hold beside it, and the collector's headroom, peers
	// that never read keep a server within about 500 MB. Raise it for a
	// server whose many calls in flight are legitimately slow (about
	// 1,600 small calls at once fit the default).
	MaxAnswerBytes int64
}

// WithPeerLimits sets the limits on what remote peers can make the
// Channel hold. Default: the zero PeerLimits.
func WithPeerLimits(l PeerLimits) Option { return func(o *options) { o.peerLimits = l } }

// validate reports the first field that breaks its rule, given the
// Channel's maximum request size.
func (l PeerLimits) validate(maxRequest int64) error {
	g := l.guardLimits(maxRequest)
	switch {
	case l.HandshakeTimeout < 0:
		return fmt.Errorf("channel: PeerLimits.HandshakeTimeout is %v, must be > 0 (0: 5s)", l.HandshakeTimeout)
	case l.MaxUnfinishedBytes > 0 && l.MaxUnfinishedBytes < maxRequest:
		return fmt.Errorf("channel: PeerLimits.MaxUnfinishedBytes is %d, below the maximum request size %d: requests of that size could never arrive; raise it or lower WithMaxRequestSize", l.MaxUnfinishedBytes, maxRequest)
	case g.MaxUnfinishedPerConn > 0 && g.MaxUnfinishedPerConn < maxRequest:
		return fmt.Errorf("channel: PeerLimits.MaxUnfinishedBytesPerConn is %d, below the maximum request size %d: requests of that size could never arrive; raise it or lower WithMaxRequestSize", g.MaxUnfinishedPerConn, maxRequest)
	case l.MaxAnswerBytes > 0 && l.MaxAnswerBytes < tchconn.MinMaxAnswerBytes:
		return fmt.Errorf("channel: PeerLimits.MaxAnswerBytes is %d, below %d (a request frame and its answer's): no call could be admitted; raise it, or make it negative to turn the bound off", l.MaxAnswerBytes, tchconn.MinMaxAnswerBytes)
	case g.MaxUnfinished > 0 && g.MaxUnfinishedPerConn > g.MaxUnfinished:
		return fmt.Errorf("channel: PeerLimits.MaxUnfinishedBytes is %d, below MaxUnfinishedBytesPerConn (%d); raise it", g.MaxUnfinished, g.MaxUnfinishedPerConn)
	}
	return nil
}

// guardLimits returns the limits of the Channel's tchconn.Guard.
func (l PeerLimits) guardLimits(maxRequest int64) tchconn.Limits {
	perConn, total := l.MaxUnfinishedBytesPerConn, l.MaxUnfinishedBytes
	if perConn == 0 {
		// At least 1 MiB: a budget must hold several frames of 64 KiB.
		perConn = max(4*maxRequest, 1<<20)
		if total > 0 {
			perConn = min(perConn, total) // the total set alone bounds it
		}
	}
	if total == 0 {
		total = max(32*maxRequest, 8*perConn)
	}
	return tchconn.Limits{StallTimeout: l.StallTimeout, MaxUnfinishedPerConn: perConn,
		MaxUnfinished: total, MaxCallsPerConn: l.MaxCallsPerConn, MaxAnswerBytes: l.MaxAnswerBytes}
}

// listenerConfig returns the configuration of the Channel's listener.
func (l PeerLimits) listenerConfig() connlimit.Config {
	maxConns := l.MaxConns
	if maxConns < 0 {
		maxConns = math.MaxInt
	}
	return connlimit.Config{MaxConns: maxConns, IdleTimeout: l.IdleTimeout, WriteTimeout: l.WriteTimeout,
		MinReadRate: l.MinReadRate, GateTimeout: l.HandshakeTimeout}
}

// peerGuard is the Channel's side of its connections' guard: the
// tchconn.Guard, the listener once it serves, and the metrics and log
// lines of what they do.
type peerGuard struct {
	g     *tchconn.Guard
	rec   *stats.Recorder
	conns tally.Gauge
	// logger is the channel's tchannel-go logger, read once it is final:
	// tchannel-go's Serve replaces it unguarded, and the listener's
	// goroutines must not read it meanwhile.
	logger atomic.Pointer[tchannel.Logger]

	// acceptTLS, when not nil, runs the TLS handshake of every
	// connection the listener accepts (tlsServer.accept), before the
	// guard reads its init frame.
	acceptTLS func(net.Conn) (net.Conn, error)
	// plaintext is stats.ServerConnsPlaintext, when acceptTLS is set.
	plaintext tally.Counter

	mu       sync.Mutex
	listener *connlimit.Listener

	logs       *rate.Limiter // log lines are limited: a flood of bad peers must not flood the log
	suppressed int
	counters   map[[2]string]tally.Counter // by name and tag value
}

func newPeerGuard(o *options, rec *stats.Recorder) (*peerGuard, error) {
	pg := &peerGuard{rec: rec, conns: rec.Scope().Gauge(stats.ServerConns),
		logs: rate.NewLimiter(10, 10), counters: map[[2]string]tally.Counter{}}
	if o.serverTLS != nil {
		accept, err := o.serverTLS(o.peerLimits)
		if err != nil {
			return nil, err
		}
		pg.acceptTLS = accept
		pg.plaintext = pg.rec.Scope().Counter(stats.ServerConnsPlaintext)
	}
	// Stalls are timed on the wall clock, as sockets are, whatever clock
	// WithClock gives the Channel's algorithms.
	g, err := tchconn.New(tchconn.Config{Limits: o.peerLimits.guardLimits(o.maxRequest), OnEvent: pg.event})
	if err != nil {
		return nil, fmt.Errorf("channel: WithPeerLimits: %w", err)
	}
	pg.g = g
	return pg, nil
}

// dialer wraps the connections next dials (a net.Dialer when nil).
func (pg *peerGuard) dialer(next func(ctx context.Context, network, hostPort string) (net.Conn, error)) func(ctx context.Context, network, hostPort string) (net.Conn, error) {
	if next == nil {
		var d net.Dialer
		next = d.DialContext
	}
	return func(ctx context.Context, network, hostPort string) (net.Conn, error) {
		nc, err := next(ctx, network, hostPort)
		if err != nil {
			return nil, err
		}
		return pg.g.Client(nc), nil
	}
}

// listen wraps inner in the Channel's connection limits and frame checks.
func (pg *peerGuard) listen(inner net.Listener, l PeerLimits) (*connlimit.Listener, error) {
	cfg := l.listenerConfig()
	cfg.Gate = func(c *connlimit.Conn) (net.Conn, error) {
		var nc net.Conn = c
		if pg.acceptTLS != nil {
			var err error
			if nc, err = pg.acceptTLS(c); err != nil {
				pg.updateConns()
				return nil, err
			}
		}
		tc, err := pg.g.Gate(nc, c)
		if err == nil {
			// A Sluice client is asked to close an idle or evicted
			// connection itself, so that no call it sends meanwhile is
			// lost (internal/tchconn's signal carrier).
			c.SetDrain(tc.AskToDrain)
		}
		if _, plain := nc.(*prefixConn); plain && err == nil {
			// A plaintext TChannel client on a TLSMixed port, counted
			// once the guard has accepted its init: not the other bytes
			// a mixed port gets (HTTP health probes), which the guard
			// refuses.
			pg.plaintext.Inc(1)
		}
		pg.updateConns()
		return tc, err
	}
	cfg.OnClose = pg.closed
	cl, err := connlimit.Listen(inner, cfg)
	if err != nil {
		return nil, err
	}
	pg.mu.Lock()
	pg.listener = cl
	pg.mu.Unlock()
	return cl, nil
}

// serving reports whether the Channel serves on a listener already.
func (pg *peerGuard) serving() bool {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	return pg.listener != nil
}

func (pg *peerGuard) updateConns() {
	pg.mu.Lock()
	l := pg.listener
	pg.mu.Unlock()
	if l != nil {
		pg.conns.Update(float64(l.Len()))
	}
}

// closed counts and logs a connection the listener closed.
func (pg *peerGuard) closed(c *connlimit.Conn, why connlimit.Reason, err error) {
	reason := why.String()
	var refusal *tlsRefusal
	switch why {
	case connlimit.GateTimeout:
		reason = "handshake_timeout"
	case connlimit.GateFailed:
		reason = "handshake_failed"
		var pe *tframe.ProtocolError
		switch {
		case errors.As(err, &refusal):
			// The listener's TLS refused it: a handshake that failed,
			// a plaintext client on a TLS-only port.
			reason = refusal.reason
		case errors.As(err, &pe):
			// An invalid first frame is counted as an invalid frame.
			reason = "invalid_frame"
		}
	}
	pg.count(stats.ServerConnsClosed, stats.TagReason, reason)
	pg.updateConns()
	if why == connlimit.Idle || reason == "handshake_failed" {
		// Routine: idle peers, and sockets that connect and leave (TCP
		// health checks do) are counted, not logged.
		return
	}
	if refusal != nil {
		pg.warn(refusal.msg, c.RemoteAddr().String(), fmt.Sprintf("closed an inbound connection (%s)", reason), refusal.err)
		return
	}
	pg.log(c.RemoteAddr().String(), fmt.Sprintf("closed an inbound connection (%s)", reason), err)
}

// event counts and logs what the Guard did about a peer.
func (pg *peerGuard) event(e tchconn.Event) {
	switch e.Kind {
	case tchconn.InvalidFrame:
		dir := "outbound"
		if e.Inbound {
			dir = "inbound"
		}
		pg.count(stats.FramesInvalid, stats.TagDirection, dir)
	case tchconn.FrameStalled:
		pg.count(stats.ServerConnsClosed, stats.TagReason, "frame_stalled")
	case tchconn.RequestRefused:
		pg.count(stats.ServerRefused, stats.TagReason, "unfinished_bytes")
	case tchconn.CallRefused:
		pg.count(stats.ServerRefused, stats.TagReason, "calls_per_conn")
	case tchconn.AnswersRefused:
		pg.count(stats.ServerRefused, stats.TagReason, "answer_bytes")
	case tchconn.AnswersUnread:
		pg.count(stats.ServerConnsClosed, stats.TagReason, "answers_unread")
	case tchconn.RequestDropped:
		pg.count(stats.ServerDropped, stats.TagReason, "unfinished_bytes")
	case tchconn.RequestStalled:
		pg.count(stats.ServerDropped, stats.TagReason, "stalled")
	}
	pg.log(e.Peer, e.Kind.String(), e.Err)
}

// count increments the counter name tagged tag=value, made once.
func (pg *peerGuard) count(name, tag, value string) {
	pg.mu.Lock()
	c, ok := pg.counters[[2]string{name, value}]
	if !ok {
		c = pg.rec.Scope().Tagged(map[string]string{tag: value}).Counter(name)
		pg.counters[[2]string{name, value}] = c
	}
	pg.mu.Unlock()
	c.Inc(1)
}

// log writes a warning naming the peer through the channel's tchannel-go
// logger, at most 10 a second; the next line written counts those left out.
func (pg *peerGuard) log(peer, what string, err error) {
	pg.warn("sluice: a peer broke the protocol or a limit", peer, what, err)
}

// warn writes the warning msg about peer, with the fields event (what)
// and error, as log does.
func (pg *peerGuard) warn(msg, peer, what string, err error) {
	logger := pg.logger.Load()
	if logger == nil {
		return
	}
	pg.mu.Lock()
	if !pg.logs.Allow() {
		pg.suppressed++
		pg.mu.Unlock()
		return
	}
	suppressed := pg.suppressed
	pg.suppressed = 0
	pg.mu.Unlock()
	// remotePeer first: sluice serve's logger keeps the fields of lines
	// that start so, and no others.
	fields := tchannel.LogFields{{Key: "remotePeer", Value: peer}, {Key: "event", Value: what}}
	if err != nil {
		fields = append(fields, tchannel.ErrField(err))
	}
	if suppressed > 0 {
		fields = append(fields, tchannel.LogField{Key: "suppressedBefore", Value: suppressed})
	}
	(*logger).WithFields(fields...).Warn(msg)
}

func (pg *peerGuard) setLogger(l tchannel.Logger) { pg.logger.Store(&l) }

func (pg *peerGuard) close() {
	pg.g.Close()
}
