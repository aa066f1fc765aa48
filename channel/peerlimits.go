package channel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"sync"
	"time"

	"github.com/sluice-rpc/sluice/internal/config"
	"github.com/sluice-rpc/sluice/internal/connlimit"
	"github.com/sluice-rpc/sluice/internal/ratelog"
	"github.com/sluice-rpc/sluice/internal/recorder"
	"github.com/sluice-rpc/sluice/internal/tchconn"
	"github.com/sluice-rpc/sluice/internal/tframe"
	"github.com/sluice-rpc/sluice/stats"
	"github.com/uber-go/tally/v4"
)

// PeerLimits bounds what the Channel's remote peers can make it hold:
// connections, time, and bytes of requests in flight. The zero value means
// the defaults, which suit a server on the open network; every field is
// >= 0, 0 meaning its default. Off turns limits off by name.
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
// FreeOSMemory (package runtime/debug) itself.
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
	// never measured. 0 means 128 KiB a second (1 Mbit/s); Off.MinReadRate
	// asks no pace, only that some write ends within WriteTimeout.
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
	// Off turns limits off: no cap on connections, no idle or write or
	// stall timeout, no pace asked of readers (only that some write ends
	// within WriteTimeout), no bound on unfinished bytes, calls per
	// connection or answer bytes. A limit that is off must be 0 above.
	// HandshakeTimeout cannot be turned off.
	Off PeerLimitsOff
}

// PeerLimitsOff names the PeerLimits turned off, one bool per limit, named
// after the PeerLimits field it turns off. Its zero value turns none off.
type PeerLimitsOff struct {
	MaxConns, IdleTimeout, WriteTimeout, MinReadRate, StallTimeout bool
	MaxUnfinishedBytesPerConn, MaxUnfinishedBytes, MaxCallsPerConn bool
	MaxAnswerBytes                                                 bool
}

// Validate returns nil: any set of limits may be off.
func (PeerLimitsOff) Validate() error { return nil }

// WithPeerLimits sets the limits on what remote peers can make the
// Channel hold. Default: the zero PeerLimits.
func WithPeerLimits(l PeerLimits) Option { return func(o *options) { o.peerLimits = l } }

// Validate reports the first field that breaks its rule, in the order of
// the fields, as a *retry.FieldError, or nil. New also checks the limits
// against the Channel's maximum request size (WithMaxRequestSize).
func (l PeerLimits) Validate() error { return l.validateFor(0) }

// validateFor is Validate given the Channel's maximum request size (0:
// none).
func (l PeerLimits) validateFor(maxRequest int64) error {
	const pkg = "channel"
	for _, f := range []struct {
		name string
		v    int64
		off  bool
		dur  bool
	}{
		{"MaxConns", int64(l.MaxConns), l.Off.MaxConns, false},
		{"IdleTimeout", int64(l.IdleTimeout), l.Off.IdleTimeout, true},
		{"HandshakeTimeout", int64(l.HandshakeTimeout), false, true},
		{"WriteTimeout", int64(l.WriteTimeout), l.Off.WriteTimeout, true},
		{"MinReadRate", l.MinReadRate, l.Off.MinReadRate, false},
		{"StallTimeout", int64(l.StallTimeout), l.Off.StallTimeout, true},
		{"MaxUnfinishedBytesPerConn", l.MaxUnfinishedBytesPerConn, l.Off.MaxUnfinishedBytesPerConn, false},
		{"MaxUnfinishedBytes", l.MaxUnfinishedBytes, l.Off.MaxUnfinishedBytes, false},
		{"MaxCallsPerConn", int64(l.MaxCallsPerConn), l.Off.MaxCallsPerConn, false},
		{"MaxAnswerBytes", l.MaxAnswerBytes, l.Off.MaxAnswerBytes, false},
	} {
		var v any = f.v
		if f.dur {
			v = time.Duration(f.v)
		}
		switch {
		case f.v < 0 && f.name == "HandshakeTimeout":
			return config.Errorf(pkg, "PeerLimits."+f.name, v, "must be >= 0 (0 means 5s); it cannot be turned off")
		case f.v < 0:
			return config.Errorf(pkg, "PeerLimits."+f.name, v, "must be >= 0 (0 means the default; Off.%s turns it off)", f.name)
		case f.off && f.v != 0:
			return config.Errorf(pkg, "PeerLimits."+f.name, v, "must be 0 when Off.%s is set", f.name)
		}
	}
	g := l.guardLimits(maxRequest)
	switch {
	case l.MaxUnfinishedBytesPerConn > 0 && l.MaxUnfinishedBytesPerConn < maxRequest:
		return config.Errorf(pkg, "PeerLimits.MaxUnfinishedBytesPerConn", l.MaxUnfinishedBytesPerConn, "below the maximum request size %d: requests of that size could never arrive; raise it or lower WithMaxRequestSize", maxRequest)
	case l.MaxUnfinishedBytes > 0 && l.MaxUnfinishedBytes < maxRequest:
		return config.Errorf(pkg, "PeerLimits.MaxUnfinishedBytes", l.MaxUnfinishedBytes, "below the maximum request size %d: requests of that size could never arrive; raise it or lower WithMaxRequestSize", maxRequest)
	case g.MaxUnfinishedPerConn > 0 && g.MaxUnfinishedPerConn < maxRequest:
		return config.Errorf(pkg, "PeerLimits.MaxUnfinishedBytesPerConn", g.MaxUnfinishedPerConn, "by default below the maximum request size %d: requests of that size could never arrive; raise it or lower WithMaxRequestSize", maxRequest)
	case g.MaxUnfinished > 0 && g.MaxUnfinishedPerConn > g.MaxUnfinished:
		return config.Errorf(pkg, "PeerLimits.MaxUnfinishedBytes", g.MaxUnfinished, "below MaxUnfinishedBytesPerConn (%d); raise it", g.MaxUnfinishedPerConn)
	case l.MaxAnswerBytes > 0 && l.MaxAnswerBytes < tchconn.MinMaxAnswerBytes:
		return config.Errorf(pkg, "PeerLimits.MaxAnswerBytes", l.MaxAnswerBytes, "below %d (a request frame and its answer's): no call could be admitted; raise it, or turn the bound off (Off.MaxAnswerBytes)", tchconn.MinMaxAnswerBytes)
	}
	return nil
}

// internal returns l with the limits that are off set to -1, the
// convention of internal/tchconn and internal/connlimit.
func (l PeerLimits) internal() PeerLimits {
	off := func(on bool, v *int64) {
		if on {
			*v = -1
		}
	}
	offDur := func(on bool, v *time.Duration) {
		if on {
			*v = -1
		}
	}
	if l.Off.MaxConns {
		l.MaxConns = -1
	}
	if l.Off.MaxCallsPerConn {
		l.MaxCallsPerConn = -1
	}
	offDur(l.Off.IdleTimeout, &l.IdleTimeout)
	offDur(l.Off.WriteTimeout, &l.WriteTimeout)
	offDur(l.Off.StallTimeout, &l.StallTimeout)
	off(l.Off.MinReadRate, &l.MinReadRate)
	off(l.Off.MaxUnfinishedBytesPerConn, &l.MaxUnfinishedBytesPerConn)
	off(l.Off.MaxUnfinishedBytes, &l.MaxUnfinishedBytes)
	off(l.Off.MaxAnswerBytes, &l.MaxAnswerBytes)
	return l
}

// guardLimits returns the limits of the Channel's tchconn.Guard.
func (l PeerLimits) guardLimits(maxRequest int64) tchconn.Limits {
	l = l.internal()
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
	l = l.internal()
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
	rec   *recorder.Recorder
	conns tally.Gauge
	// warns and debugs write the lines about peers on WithLogger's
	// logger (slog.Default() without it), each within a rate of its own
	// (see peerLogBurst).
	warns, debugs *ratelog.Logger

	// acceptTLS, when not nil, runs the TLS handshake of every
	// connection the listener accepts (tlsServer.accept), before the
	// guard reads its init frame.
	acceptTLS func(net.Conn) (net.Conn, error)
	// plaintext is stats.ServerConnsPlaintext, when acceptTLS is set.
	plaintext tally.Counter

	mu       sync.Mutex
	listener *connlimit.Listener

	counters map[[2]string]tally.Counter // by name and tag value
}

func newPeerGuard(o *options, rec *recorder.Recorder) (*peerGuard, error) {
	pg := &peerGuard{rec: rec, conns: rec.Scope().Gauge(stats.ServerConns),
		warns: ratelog.New(o.logger, o.logNow), debugs: ratelog.New(o.logger, o.logNow),
		counters: map[[2]string]tally.Counter{}}
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
		tc := pg.g.Client(nc)
		tc.SetTarget(hostPort) // load reports name it (loadreport.go)
		return tc, nil
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
		// health checks do) are counted, and logged at Debug only.
		pg.debugs.Debug("sluice: closed an inbound connection", slog.String("remotePeer", c.RemoteAddr().String()), slog.String("event", reason))
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

// The rate of the Channel's warnings about its peers (a frame that broke
// the protocol, a refused TLS handshake, a connection closed for a limit):
// any peer can cause one per connection, so all of them together get
// peerLogBurst lines at once and peerLogsPerSecond after that, the next
// line written after some were left out carrying suppressedBefore, their
// number (internal/ratelog). Routine closes, logged at Debug, have a
// budget of their own.
const (
	peerLogsPerSecond = ratelog.PerSecond
	peerLogBurst      = ratelog.Burst
)

// log writes a warning naming the peer on the Channel's logger, within
// the rate above.
func (pg *peerGuard) log(peer, what string, err error) {
	pg.warn("sluice: a peer broke the protocol or a limit", peer, what, err)
}

// warn writes the warning msg about peer at Warn on the Channel's logger
// (WithLogger; slog.Default() without it), with the attributes remotePeer,
// event (what), error and, when lines were left out before it,
// suppressedBefore, within the rate above.
func (pg *peerGuard) warn(msg, peer, what string, err error) {
	// remotePeer first: a handler that prints the attributes in order
	// (sluice serve's) puts the peer right after the message.
	attrs := []slog.Attr{slog.String("remotePeer", peer), slog.String("event", what)}
	if err != nil {
		attrs = append(attrs, slog.Any("error", err))
	}
	pg.warns.Warn(msg, attrs...)
}

func (pg *peerGuard) close() {
	pg.g.Close()
}
