package server

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/uber-go/tally/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"

	"github.com/sluice-rpc/sluice/internal/connlimit"
)

// Defaults of the connection fields of Config: what Serve gives the gRPC
// server and the listener, before the options its caller passes.
const (
	// DefaultConnectionTimeout bounds a new connection's handshakes. TLS
	// and HTTP/2's preface take a round trip or two; gRPC's own default,
	// 120 s, lets a socket that sends nothing hold a descriptor for two
	// minutes.
	DefaultConnectionTimeout = 10 * time.Second
	// DefaultMaxConnectionIdle closes a connection with no call for five
	// minutes. A Doorman client calls every refresh interval (16 s for a
	// resource no template matches; templates rarely ask for more than a
	// minute), so an idle connection's client has gone or will reconnect
	// at its next refresh.
	DefaultMaxConnectionIdle = 5 * time.Minute
	// DefaultKeepaliveMinTime is the shortest interval between pings a
	// client may keep to: 10 s is the shortest keepalive time gRPC's
	// clients allow themselves, so no well-behaved client is cut off
	// (the original Doorman client and Sluice's send no pings), while a
	// client pinging in a loop is sent GOAWAY at its third ping.
	DefaultKeepaliveMinTime = 10 * time.Second
	// DefaultMaxConcurrentStreams bounds the calls in flight on one
	// connection: HTTP/2's recommended minimum. A Doorman client has one
	// or two in flight, an intermediate server one (its batches go in
	// turn), `sluice-lab doorman load` eight per connection.
	DefaultMaxConcurrentStreams = 100

	// idleGrace is how much longer than MaxConnectionIdle the listener
	// waits before closing an idle connection itself: gRPC closes it
	// first, gracefully (GOAWAY, then up to 5 s for the client's
	// answer); the listener's close is for connections gRPC did not.
	idleGrace = 30 * time.Second
)

// DefaultMaxConns returns the connection cap a zero Config.MaxConns
// means: half the process's descriptor limit (RLIMIT_NOFILE), leaving the
// other half to the server's own files and outbound connections (its
// parent, etcd), and at least 64.
func DefaultMaxConns() int { return connlimit.DefaultMaxConns() }

// connConfig is the connection part of a Config, defaults applied.
type connConfig struct {
	maxConns         int
	timeout          time.Duration
	maxIdle          time.Duration
	keepaliveMinTime time.Duration
	maxStreams       uint32
}

func newConnConfig(c *Config) connConfig {
	cc := connConfig{maxConns: c.MaxConns, timeout: c.ConnectionTimeout, maxIdle: c.MaxConnectionIdle,
		keepaliveMinTime: c.KeepaliveMinTime, maxStreams: uint32(c.MaxConcurrentStreams)}
	if cc.maxConns == 0 {
		cc.maxConns = DefaultMaxConns()
	}
	if cc.timeout == 0 {
		cc.timeout = DefaultConnectionTimeout
	}
	if cc.maxIdle == 0 {
		cc.maxIdle = DefaultMaxConnectionIdle
	}
	if cc.keepaliveMinTime == 0 {
		cc.keepaliveMinTime = DefaultKeepaliveMinTime
	}
	if cc.maxStreams == 0 {
		cc.maxStreams = DefaultMaxConcurrentStreams
	}
	return cc
}

// grpcOptions returns the options Serve makes its gRPC server with,
// before the caller's (gRPC applies later options over earlier ones, so
// the caller's win).
func (cc connConfig) grpcOptions(t *connTracker) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ConnectionTimeout(cc.timeout),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: cc.keepaliveMinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: cc.maxIdle}),
		grpc.MaxConcurrentStreams(cc.maxStreams),
		grpc.ChainUnaryInterceptor(t.unary),
		grpc.ChainStreamInterceptor(t.stream),
	}
}

// Metric names of Serve's connections, on Config.Scope.
const (
	// metricConnsClosed is a counter tagged reason (evicted, refused,
	// idle, write_stalled): connections the listener closed. Those gRPC
	// closes (handshake timeout, MaxConnectionIdle, keepalive abuse) and
	// those clients close are not counted.
	metricConnsClosed = "lease.server_conns_closed"
	// tagReason is the tag of metricConnsClosed.
	tagReason = "reason"
)

// connTracker tells Serve's listener (package internal/connlimit) which
// of its connections are serving calls. The listener accepts each
// connection under its remote address; gRPC hands a handler that address
// (package peer); the interceptors mark the call's start and end on the
// connection with Begin and End.
//
// A call counts from the moment its request is decoded to its handler's
// return: a stream whose request never comes in full makes its
// connection no busier (gRPC bounds streams per connection, and the
// listener evicts such connections like idle ones).
type connTracker struct {
	mu    sync.RWMutex
	conns map[connAddr]*connlimit.Conn

	closed map[connlimit.Reason]tally.Counter
}

// connAddr is a connection's remote address as a map key: the TCP
// address without allocating, or any other address as text.
type connAddr struct {
	tcp   netip.AddrPort
	other string
}

func addrOf(a net.Addr) connAddr {
	if t, ok := a.(*net.TCPAddr); ok {
		return connAddr{tcp: t.AddrPort()}
	}
	return connAddr{other: a.String()}
}

func newConnTracker(scope tally.Scope) *connTracker {
	t := &connTracker{conns: make(map[connAddr]*connlimit.Conn), closed: make(map[connlimit.Reason]tally.Counter)}
	for _, why := range []connlimit.Reason{connlimit.Evicted, connlimit.Refused, connlimit.Idle, connlimit.WriteStalled,
		connlimit.GateTimeout, connlimit.GateFailed} {
		t.closed[why] = scope.Tagged(map[string]string{tagReason: why.String()}).Counter(metricConnsClosed)
	}
	return t
}

// onClose counts a connection the listener closed.
func (t *connTracker) onClose(c *connlimit.Conn, why connlimit.Reason, _ error) {
	t.forget(addrOf(c.RemoteAddr()), c)
	if ctr := t.closed[why]; ctr != nil {
		ctr.Inc(1)
	}
}

func (t *connTracker) forget(k connAddr, c *connlimit.Conn) {
	t.mu.Lock()
	if t.conns[k] == c {
		delete(t.conns, k)
	}
	t.mu.Unlock()
}

// conn returns the connection a call came on, or nil.
func (t *connTracker) conn(ctx context.Context) *connlimit.Conn {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return nil
	}
	k := addrOf(p.Addr)
	t.mu.RLock()
	c := t.conns[k]
	t.mu.RUnlock()
	return c
}

func (t *connTracker) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	c := t.conn(ctx)
	if c == nil {
		return handler(ctx, req)
	}
	c.Begin()
	defer c.End()
	return handler(ctx, req)
}

func (t *connTracker) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	c := t.conn(ss.Context())
	if c == nil {
		return handler(srv, ss)
	}
	c.Begin()
	defer c.End()
	return handler(srv, ss)
}

// trackedListener is Serve's listener: connlimit's, each accepted
// connection recorded under its remote address until it closes.
type trackedListener struct {
	*connlimit.Listener
	t *connTracker
}

func (l trackedListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	c := nc.(*connlimit.Conn) // the Listener has no gate: Accept returns its Conn
	k := addrOf(c.RemoteAddr())
	if k.other != "" {
		// Not a TCP address (a Unix socket's peers share one): its calls
		// cannot be told from other connections', so it is marked busy for
		// good, never closed as idle or evicted (the cap still holds, and
		// gRPC still closes it when idle).
		c.Begin()
		return c, nil
	}
	l.t.mu.Lock()
	l.t.conns[k] = c // a connection closing under the same address is replaced
	l.t.mu.Unlock()
	return &trackedConn{Conn: c, t: l.t, k: k}, nil
}

// trackedConn forgets its address when closed.
type trackedConn struct {
	*connlimit.Conn
	t *connTracker
	k connAddr
}

func (c *trackedConn) Close() error {
	c.t.forget(c.k, c.Conn)
	return c.Conn.Close()
}

// limitConns wraps lis with the connection cap and idle closing, and
// returns it with the tracker its calls are reported through.
func (s *Server) limitConns(lis net.Listener) (trackedListener, *connTracker, error) {
	t := newConnTracker(s.scope)
	cl, err := connlimit.Listen(lis, connlimit.Config{
		MaxConns:    s.conns.maxConns,
		IdleTimeout: s.conns.maxIdle + idleGrace,
		OnClose:     t.onClose,
	})
	if err != nil {
		return trackedListener{}, nil, err
	}
	return trackedListener{Listener: cl, t: t}, t, nil
}
