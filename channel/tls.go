package channel

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-rpc/sluice/internal/config"
	"github.com/sluice-rpc/sluice/internal/connlimit"
	"github.com/sluice-rpc/sluice/internal/tchconn"
	"github.com/sluice-rpc/sluice/internal/tframe"
	"github.com/sluice-rpc/sluice/tlsfiles"
	"github.com/uber/tchannel-go"
)

// Transport security. TChannel itself has none: a Channel speaks TLS
// below it, on the connections its listener accepts (WithServerTLS) and
// those its connectors dial (WithClientTLS), and every frame check, limit
// and metric of a plaintext connection applies to the frames inside the
// TLS one. The handshake is part of the connection's setup, never of a
// call: on the server it runs in the listener's gate, within
// PeerLimits.HandshakeTimeout, before tchannel-go sees the connection; on
// the client it runs in the peer's connector, within the connect timeout
// (ConnectConfig.Timeout), so a call finds a connection ready or
// fails at once with the handshake's error as its cause.
//
// A plaintext call pays nothing for any of it: no allocation, and of the
// code below only tlsInfoOf, a few type assertions for calls with inbound
// middleware (Inbound.TLS). A program that uses neither option does not
// even link the handshakes: they are reachable only from the options'
// closures (TestBinarySize).

// TLSMode says what a server with TLS does with a connection that does not
// begin with a TLS handshake.
type TLSMode int

// The modes. The zero value is TLSOnly.
const (
	// TLSOnly serves TLS connections only. A plaintext TChannel client is
	// answered with a TChannel error frame saying that the port takes TLS
	// only (its handshake fails with that message) and the refusal is
	// logged, naming the client's address; any other bytes close the
	// connection.
	TLSOnly TLSMode = iota
	// TLSMixed serves TLS and plaintext TChannel on one port, for a
	// rollout without a flag day: each connection's first bytes say which
	// it is (a TLS handshake record begins 0x16 0x03; an init frame, its
	// two-byte size then the type 0x01), read within the handshake
	// timeout. Plaintext peers (yab, Node, tcurl, Sluice without
	// WithClientTLS) keep working; handlers tell them apart by
	// Inbound.TLS, and stats.ServerConnsPlaintext counts their
	// connections once their init frame is accepted (not the other bytes
	// a port gets, HTTP health probes say, which it refuses): once it
	// stays still, every client speaks TLS, and the port can move to
	// TLSOnly.
	TLSMixed
)

func (m TLSMode) String() string {
	switch m {
	case TLSOnly:
		return "TLSOnly"
	case TLSMixed:
		return "TLSMixed"
	}
	return fmt.Sprintf("TLSMode(%d)", int(m))
}

// ServerTLS is the TLS of a Channel's server side (WithServerTLS).
type ServerTLS struct {
	// Config is the server's TLS configuration; required. It is used for
	// every connection accepted, as it is: a configuration whose
	// GetConfigForClient or GetCertificate reads the current certificate
	// (as tlsfiles.Reloader.ServerConfig's does) presents a certificate
	// replaced on disk to the connections accepted after, while those
	// already open keep theirs. Mutual TLS is the configuration's
	// ClientAuth, or that of the configuration its GetConfigForClient
	// returns (tlsfiles: a CA set). MinVersion, when set, must be TLS 1.2
	// or later; 0 is crypto/tls's default, TLS 1.2.
	Config *tls.Config
	// Mode says whether plaintext connections are served too. The zero
	// value is TLSOnly.
	Mode TLSMode
}

// Validate reports the first field that breaks its rule.
func (s ServerTLS) Validate() error {
	c := s.Config
	switch {
	case c == nil:
		return config.Errorf("channel", "ServerTLS.Config", config.Verbatim("nil"), "must be the server's TLS configuration (tlsfiles.Reloader.ServerConfig makes one that follows its files)")
	case len(c.Certificates) == 0 && c.GetCertificate == nil && c.GetConfigForClient == nil:
		return config.Errorf("channel", "ServerTLS.Config.Certificates", config.Verbatim("empty"), "must hold a certificate unless GetCertificate or GetConfigForClient is set")
	case c.MinVersion != 0 && c.MinVersion < tls.VersionTLS12:
		return config.Errorf("channel", "ServerTLS.Config.MinVersion", config.Verbatim(tls.VersionName(c.MinVersion)), "must be TLS 1.2 or later (0: crypto/tls's default, TLS 1.2)")
	case s.Mode != TLSOnly && s.Mode != TLSMixed:
		return config.Errorf("channel", "ServerTLS.Mode", s.Mode, "must be TLSOnly or TLSMixed")
	}
	return nil
}

// WithServerTLS makes the Channel's server side speak TLS, as s says, on
// the listener of ListenAndServe or Serve (give Serve a plain listener:
// the Channel runs the handshakes itself). The handshake runs before
// tchannel-go sees the connection, within PeerLimits.HandshakeTimeout
// (with the TChannel init that follows), and a connection refused is
// counted in stats.ServerConnsClosed (reason tls_handshake_failed or
// plaintext_refused) and logged through the Channel's logger, naming the
// peer and why: a client certificate that did not verify, a plaintext
// client on a TLS-only port. Handlers read the verified client's identity
// with PeerIdentity, or Inbound.TLS in middleware.
//
// The Channel's outbound connections are not affected: WithClientTLS.
func WithServerTLS(s ServerTLS) Option {
	return func(o *options) {
		o.serverTLS = func(l PeerLimits) (func(net.Conn) (net.Conn, error), error) {
			if err := s.Validate(); err != nil {
				return nil, err
			}
			return newTLSServer(s, l).accept, nil
		}
	}
}

// ClientTLS is the TLS of the connections a Channel dials
// (WithClientTLS).
type ClientTLS struct {
	// Config returns the TLS configuration of one connection; required.
	// It is called for every connection dialled, so a function that
	// makes a fresh configuration, tlsfiles.Reloader.ClientConfig's,
	// picks up a certificate or CA replaced on disk for the next
	// connection. The Channel does not modify what it returns (it
	// clones it to set the server name). MinVersion, when set, must be
	// TLS 1.2 or later.
	Config func() *tls.Config
	// ServerName, when not empty, is the name the servers' certificates
	// must carry, whatever the configuration says. When it and the
	// configuration's ServerName are both empty, each peer's host is:
	// a peer named by an IP address must present a certificate for that
	// address (an IP SAN), as crypto/tls checks.
	ServerName string
	// Fallback, when not nil, names the peers that may be reached in
	// plaintext when they do not speak TLS: those for which it reports
	// true (FallbackFor lists them). Every connect to such a peer tries
	// TLS first, and falls back to a plaintext connection when the
	// server answered the TLS handshake with bytes that are not TLS (a
	// Sluice server without TLS answers at once with a TChannel error),
	// or closed the connection or said nothing within half the connect
	// timeout (tchannel-go, yab and Node servers wait for an init frame
	// that never completes). A server that answered in TLS and failed
	// the handshake, a certificate for the wrong name say, is never
	// reached in plaintext; nor, ever again, is a peer that has
	// completed a TLS handshake with this Channel: once it serves TLS, a
	// later silence or reset is a server that is slow, overloaded, at
	// its connection cap or draining (or an attacker), not one that
	// forgot TLS, and the connect fails (and is retried) as any other
	// would. Each fallback is counted in stats.PeerTLSFallbacks, and the
	// first to each peer is logged through the Channel's logger. Nil,
	// the default, means no peer: a connect that fails its TLS handshake
	// fails.
	//
	// Falling back is a downgrade that anyone on the path can force (by
	// resetting the connection) until the peer has spoken TLS to the
	// Channel: list only peers that are known to be plaintext for now,
	// and remove them once they serve TLS.
	Fallback func(hostPort string) bool
}

// Validate reports the first field that breaks its rule. It calls Config
// once, to check what it returns.
func (c ClientTLS) Validate() error {
	if c.Config == nil {
		return config.Errorf("channel", "ClientTLS.Config", config.Verbatim("nil"), "must be a function returning each connection's TLS configuration (a tlsfiles.Reloader's ClientConfig)")
	}
	cfg := c.Config()
	switch {
	case cfg == nil:
		return config.Errorf("channel", "ClientTLS.Config", config.Verbatim("a function returning nil"), "must return a TLS configuration")
	case cfg.MinVersion != 0 && cfg.MinVersion < tls.VersionTLS12:
		return config.Errorf("channel", "ClientTLS.Config", config.Verbatim("a function returning MinVersion "+tls.VersionName(cfg.MinVersion)), "must return MinVersion TLS 1.2 or later (0: crypto/tls's default, TLS 1.2)")
	}
	return nil
}

// WithClientTLS makes every connection the Channel dials speak TLS, as c
// says: the TLS handshake runs in the peer's connector, before TChannel's,
// within the connect timeout (ConnectConfig.Timeout). A handshake
// that fails leaves the peer in TransientFailure with the handshake's
// error as its connection failure, which the UNAVAILABLE error of a call that
// finds no peer carries ("TLS handshake failed: tls: failed to verify
// certificate: x509: certificate is valid for localhost, not
// wrong.example").
func WithClientTLS(c ClientTLS) Option {
	return func(o *options) {
		o.clientTLS = func(pg *peerGuard, next dialFunc) (dialFunc, error) {
			if err := c.Validate(); err != nil {
				return nil, err
			}
			return newTLSClient(c, pg).dialer(next), nil
		}
	}
}

// dialFunc dials a connection: tchannel.ChannelOptions.Dialer's type.
type dialFunc = func(ctx context.Context, network, hostPort string) (net.Conn, error)

// FallbackFor returns a ClientTLS.Fallback that lets exactly the peers at
// hostPorts be reached in plaintext.
func FallbackFor(hostPorts ...string) func(hostPort string) bool {
	set := make(map[string]bool, len(hostPorts))
	for _, hp := range hostPorts {
		set[hp] = true
	}
	return func(hostPort string) bool { return set[hostPort] }
}

// TLSInfo is what a connection's TLS handshake established, worked out
// once per connection and shared by every call it carries: read it, do
// not modify it.
type TLSInfo struct {
	// Identity is the names of the certificate the peer presented
	// (tlsfiles.IdentityOf); zero when it presented none.
	Identity tlsfiles.Identity
	// Verified reports that the peer presented a certificate and
	// crypto/tls verified it in this handshake: the ConnectionState's
	// VerifiedChains are not empty. So it is for a server whose
	// configuration (or the one its GetConfigForClient returns, as
	// tlsfiles' do) has ClientAuth VerifyClientCertIfGiven or
	// RequireAndVerifyClientCert, and for a client without
	// InsecureSkipVerify. It is what happened, not what a configuration
	// says: a certificate a server only requested (RequestClientCert or
	// RequireAnyClientCert) is not verified, whatever a
	// VerifyPeerCertificate or VerifyConnection hook of its own did with
	// it (the Channel cannot tell a hook that verifies from one that only
	// logs); nor, by the same rule, is the server of a client that set
	// InsecureSkipVerify and checks the certificate in a hook. Such a hook
	// refuses what it must by failing the handshake; the connections it
	// lets through are reported unverified.
	Verified bool

	// state is the *tls.ConnectionState State returns. Held as an any:
	// the linker keeps the methods of every type a handler's types lead
	// to, and a tls.ConnectionState field would lead to those of
	// x509.Certificate and crypto/tls's enums, 300 KB in every program,
	// TLS or not.
	state any
}

// State returns the connection's TLS state after its handshake: version,
// cipher suite, the peer's certificates, and the chains crypto/tls
// verified them with (VerifiedChains, empty when it did not: see
// Verified). It is the connection's, shared by its calls: do not modify
// it.
func (t *TLSInfo) State() *tls.ConnectionState {
	st, _ := t.state.(*tls.ConnectionState)
	return st
}

// TLSInfoFrom returns the TLS of the connection that carries the inbound
// call of ctx, a handler's context (raw, JSON or Thrift, or one a
// middleware derived from it), or nil when the call came in plaintext or
// ctx is no handler's. It allocates nothing.
func TLSInfoFrom(ctx context.Context) *TLSInfo {
	call, _ := tchannel.CurrentCall(ctx).(*tchannel.InboundCall)
	if call == nil {
		return nil
	}
	return tlsInfoOf(call.Connection())
}

// PeerIdentity returns the verified identity of the peer whose call ctx
// is the handler's context of (see TLSInfoFrom), and true; or false when
// the call came in plaintext or the peer presented no certificate that
// crypto/tls verified (TLSInfo.Verified; a server configuration without a
// CA asks for none). It
// allocates nothing: the identity is worked out once per connection, and
// its slices are shared; do not modify them.
//
// An authorisation rule compares it with what it allows:
//
//	id, ok := channel.PeerIdentity(ctx)
//	if !ok || !slices.Contains(id.URIs, "spiffe://example.test/billing") {
//		return tchannel.NewSystemError(tchannel.ErrCodeBadRequest, "not allowed")
//	}
func PeerIdentity(ctx context.Context) (tlsfiles.Identity, bool) {
	info := TLSInfoFrom(ctx)
	if info == nil || !info.Verified {
		return tlsfiles.Identity{}, false
	}
	return info.Identity, true
}

// tlsInfoOf returns the TLS of nc, a connection tchannel-go was given (a
// connector's watched connection, or the guard's Conn, over the Channel's
// TLS connection), or nil for a plaintext one.
func tlsInfoOf(nc net.Conn) *TLSInfo {
	for range 3 { // watched, guarded, TLS
		switch c := nc.(type) {
		case *tlsConn:
			return c.info
		case interface{ NetConn() net.Conn }:
			nc = c.NetConn()
		default:
			return nil
		}
	}
	return nil
}

// newTLSInfo works out the TLSInfo of a connection whose handshake
// ended with state. Verified is what crypto/tls did, never what a
// configuration suggests: a chain it verified.
func newTLSInfo(state tls.ConnectionState) *TLSInfo {
	id, ok := tlsfiles.IdentityOf(&state)
	return &TLSInfo{Identity: id, Verified: ok && len(state.VerifiedChains) > 0, state: &state}
}

// tlsConn is a TLS connection of the Channel's, with what its handshake
// established.
type tlsConn struct {
	*tls.Conn
	raw    net.Conn // the socket under it
	info   *TLSInfo
	client bool
}

// SyscallConn returns the socket's raw connection: tchannel-go sets socket
// options through it.
func (c *tlsConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.raw.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.New("channel: the connection has no syscall.RawConn")
}

// Read reads from the TLS connection. On a client connection, an alert
// from the server says it refused the connection: with TLS 1.3 a server
// checks the client's certificate after the client's handshake is over,
// and the client learns of its refusal at its first read, inside
// TChannel's handshake.
func (c *tlsConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil && c.client {
		var oe *net.OpError // crypto/tls's error for an alert it received
		if errors.As(err, &oe) && oe.Op == "remote error" {
			err = fmt.Errorf("the server refused the TLS connection: %w", err)
		}
	}
	return n, err
}

// prefixConn replays the bytes its listener read to tell TLS from
// plaintext before those the socket holds.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(b []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(b, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

// NetConn returns the socket.
func (c *prefixConn) NetConn() net.Conn { return c.Conn }

// SyscallConn returns the socket's raw connection.
func (c *prefixConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.New("channel: the connection has no syscall.RawConn")
}

// tlsServer is the TLS of a Channel's listener: it runs in the listener's
// gate, before the guard reads the TChannel init.
type tlsServer struct {
	cfg     *tls.Config
	mode    TLSMode
	timeout time.Duration // the gate's: PeerLimits.HandshakeTimeout
}

func newTLSServer(s ServerTLS, l PeerLimits) *tlsServer {
	timeout := l.HandshakeTimeout
	if timeout == 0 {
		timeout = connlimit.DefaultGateTimeout
	}
	return &tlsServer{cfg: s.Config, mode: s.Mode, timeout: timeout}
}

// isTLS reports whether a connection's first bytes begin a TLS handshake
// record: the record type, then the major version, 3 in every TLS version.
// An init frame would be 0x1603 bytes long, which none is (tchannel-go's
// are about 150).
func isTLS(first []byte) bool { return first[0] == 0x16 && first[1] == 0x03 }

// accept reads c's first bytes (within the read deadline the gate set)
// and returns the connection for the guard to read TChannel's init from:
// a TLS connection whose handshake is over, or in TLSMixed a plaintext
// one replaying the bytes read (a *prefixConn, which the listener counts
// in stats.ServerConnsPlaintext once the guard accepts it). It returns a *tlsRefusal for a
// connection it refuses, and the read's error for a socket that left or
// timed out.
func (s *tlsServer) accept(c net.Conn) (net.Conn, error) {
	deadline := time.Now().Add(s.timeout)
	first := make([]byte, 3)
	if _, err := io.ReadFull(c, first); err != nil {
		return nil, err
	}
	pc := &prefixConn{Conn: c, prefix: first}
	if !isTLS(first) {
		if s.mode == TLSMixed {
			return pc, nil
		}
		return nil, s.refusePlaintext(c, first, deadline)
	}
	// Reads are bounded by the gate's deadline; bound the writes too, so
	// that a client that does not read cannot hold the gate.
	_ = c.SetWriteDeadline(deadline)
	tc := tls.Server(pc, s.cfg)
	if err := tc.Handshake(); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, err // counted and logged as any handshake timeout
		}
		return nil, &tlsRefusal{reason: "tls_handshake_failed", msg: "sluice: refused a TLS connection: its handshake failed",
			err: fmt.Errorf("TLS handshake failed: %w", err)}
	}
	_ = c.SetWriteDeadline(time.Time{})
	return &tlsConn{Conn: tc, raw: c, info: newTLSInfo(tc.ConnectionState())}, nil
}

// errTLSOnly is what a plaintext TChannel client of a TLS-only port is
// told, in the error frame that answers its init request.
const errTLSOnly = "this port accepts TLS connections only: connect with TLS (a Sluice client: channel.WithClientTLS)"

// refusePlaintext refuses c, whose first bytes are not TLS, on a TLS-only
// port: a TChannel client is answered with an error frame, once its init
// frame is read (closing a socket with unread bytes would reset it before
// the client reads the answer).
func (s *tlsServer) refusePlaintext(c net.Conn, first []byte, deadline time.Time) error {
	size := int(first[0])<<8 | int(first[1])
	if tframe.Type(first[2]) != tframe.InitReq || size < tframe.HeaderSize || size > tchconn.MaxInitSize {
		return &tlsRefusal{reason: "plaintext_refused", msg: "sluice: refused a plaintext connection on a TLS-only port",
			err: fmt.Errorf("the peer sent neither TLS nor TChannel to a TLS-only port (its first bytes: % x)", first)}
	}
	err := &tlsRefusal{reason: "plaintext_refused", msg: "sluice: refused a plaintext TChannel connection on a TLS-only port",
		err: errors.New("the peer spoke plaintext TChannel to a TLS-only port: it must connect with TLS (a Sluice client: channel.WithClientTLS), or the server serve plaintext too while clients move (channel.TLSMixed)")}
	if _, rerr := io.CopyN(io.Discard, c, int64(size-len(first))); rerr != nil {
		return err
	}
	_ = c.SetWriteDeadline(deadline)
	_, _ = c.Write(tframe.AppendError(nil, 0xFFFFFFFF, byte(tchannel.ErrCodeProtocol), errTLSOnly))
	return err
}

// tlsRefusal is a connection the listener's TLS refused: counted with
// reason, logged with msg.
type tlsRefusal struct {
	reason string
	msg    string
	err    error
}

func (e *tlsRefusal) Error() string { return e.err.Error() }
func (e *tlsRefusal) Unwrap() error { return e.err }

// tlsClient dials the Channel's connections with TLS.
type tlsClient struct {
	config     func() *tls.Config
	serverName string
	fallback   func(hostPort string) bool
	pg         *peerGuard // logs and counts the fallbacks

	// seen holds what is known of each peer Fallback names, by host:port.
	// Like the per-peer metrics (recorder.Recorder.Conn), it keeps every
	// address the Channel has dialled: a few bytes each.
	mu   sync.Mutex
	seen map[string]fallbackState
}

// fallbackState is what a tlsClient knows of a peer Fallback names.
type fallbackState uint8

const (
	// spokeTLS: the peer completed a TLS handshake; never to fall back.
	spokeTLS fallbackState = 1 << iota
	// fellBack: a fallback to plaintext was logged.
	fellBack
)

func newTLSClient(c ClientTLS, pg *peerGuard) *tlsClient {
	return &tlsClient{config: c.Config, serverName: c.ServerName, fallback: c.Fallback, pg: pg,
		seen: map[string]fallbackState{}}
}

// dialer returns the dial function that makes TLS connections over those
// next dials (a net.Dialer when nil).
func (t *tlsClient) dialer(next dialFunc) dialFunc {
	if next == nil {
		var d net.Dialer
		next = d.DialContext
	}
	return func(ctx context.Context, network, hostPort string) (net.Conn, error) {
		raw, err := next(ctx, network, hostPort)
		if err != nil {
			return nil, err
		}
		fallback := t.fallback != nil && t.fallback(hostPort)
		spoke := fallback && t.spoke(hostPort)
		conn, plain, err := t.handshake(ctx, raw, hostPort, fallback && !spoke, spoke)
		if err == nil {
			if fallback && !spoke {
				t.noteTLS(hostPort)
			}
			return conn, nil
		}
		_ = raw.Close()
		if !plain {
			return nil, err
		}
		t.noteFallback(hostPort, err)
		return next(ctx, network, hostPort)
	}
}

// handshake runs the TLS handshake over raw, bounded by ctx. With
// fallback set, it reports plain when the server does not speak TLS (see
// ClientTLS.Fallback), and gives the handshake only half the time left.
// spoke says that Fallback names the peer but it has spoken TLS before,
// for the error to say why there is no fallback.
func (t *tlsClient) handshake(ctx context.Context, raw net.Conn, hostPort string, fallback, spoke bool) (_ net.Conn, plain bool, _ error) {
	cfg := t.config()
	if cfg == nil {
		return nil, false, errors.New("channel: ClientTLS.Config returned nil")
	}
	if name := t.serverName; name != "" || cfg.ServerName == "" {
		if name == "" {
			name, _, _ = net.SplitHostPort(hostPort)
		}
		cfg = cfg.Clone()
		cfg.ServerName = name
	}
	hctx := ctx
	if d, ok := ctx.Deadline(); ok && fallback {
		var cancel context.CancelFunc
		hctx, cancel = context.WithDeadline(ctx, time.Now().Add(time.Until(d)/2))
		defer cancel()
	}
	seen := &seenConn{Conn: raw}
	start := time.Now()
	tc := tls.Client(seen, cfg)
	err := tc.HandshakeContext(hctx)
	if err == nil {
		return &tlsConn{Conn: tc, raw: raw, info: newTLSInfo(tc.ConnectionState()), client: true}, false, nil
	}
	// Whether the server speaks TLS: it answered bytes that are not TLS,
	// or closed, reset or kept silent before sending any. A server that
	// answered in TLS and failed the handshake speaks TLS.
	var (
		rh   tls.RecordHeaderError
		why  string
		took = time.Since(start).Round(time.Millisecond)
	)
	switch {
	case errors.As(err, &rh):
		why = "it answered with bytes that are not TLS"
	case seen.any:
		if hctx.Err() != nil {
			return nil, false, fmt.Errorf("TLS handshake timed out after %v: %w", took, err)
		}
		return nil, false, fmt.Errorf("TLS handshake failed: %w", err)
	case hctx.Err() != nil:
		why = fmt.Sprintf("it accepted the TCP connection and said nothing for %v", took)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE):
		why = "it closed the connection without a TLS answer"
	default:
		return nil, false, fmt.Errorf("TLS handshake failed: %w", err)
	}
	if fallback && ctx.Err() == nil {
		return nil, true, fmt.Errorf("%s: %w", why, err)
	}
	if spoke {
		return nil, false, fmt.Errorf("TLS handshake failed: %s; not reached in plaintext, as it has completed a TLS handshake with this Channel before: %w", why, err)
	}
	return nil, false, fmt.Errorf("TLS handshake failed: the peer does not seem to speak TLS: %s (a plaintext TChannel server? ClientTLS.Fallback lets such peers be reached in plaintext): %w", why, err)
}

// spoke reports whether the peer at hostPort has completed a TLS
// handshake with the Channel.
func (t *tlsClient) spoke(hostPort string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.seen[hostPort]&spokeTLS != 0
}

// noteTLS notes that the peer at hostPort, which Fallback names, has
// completed a TLS handshake: it is never reached in plaintext again.
func (t *tlsClient) noteTLS(hostPort string) {
	t.mu.Lock()
	t.seen[hostPort] |= spokeTLS
	t.mu.Unlock()
}

// noteFallback counts a fallback to plaintext, and logs the first of
// each peer.
func (t *tlsClient) noteFallback(hostPort string, why error) {
	t.pg.rec.Conn(hostPort).TLSFallbacks.Inc(1)
	t.mu.Lock()
	first := t.seen[hostPort]&fellBack == 0
	t.seen[hostPort] |= fellBack
	t.mu.Unlock()
	if first {
		t.pg.warn("sluice: a peer does not speak TLS; connecting in plaintext, as ClientTLS.Fallback allows (logged once per peer)",
			hostPort, "tls_fallback", why)
	}
}

// seenConn notes whether any byte came from the server: during a TLS
// handshake, whether it answered at all. It stays under the TLS
// connection for its life, a test of a bool per read.
type seenConn struct {
	net.Conn
	any bool // set by the handshake's reads; read once the handshake is over
}

func (c *seenConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && !c.any {
		c.any = true
	}
	return n, err
}
