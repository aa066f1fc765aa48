package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uber-go/tally/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
)

// serveWith serves s on 127.0.0.1 with opts, like startServer, and
// returns its address.
func serveWith(t *testing.T, s *Server, opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Serve(lis, opts...)
	}()
	t.Cleanup(func() {
		s.Stop()
		testwait.Recv(t, done, "Serve to return")
	})
	return lis.Addr().String()
}

func newServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	if cfg.Repository == nil {
		cfg.Repository = starRepo()
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// closedWithin reads from c until the server closes it, and returns how
// long that took; it fails the test if c is still open after
// testwait.Limit.
func closedWithin(t *testing.T, c net.Conn) time.Duration {
	t.Helper()
	return closedSince(t, c, time.Now())
}

// closedSince is closedWithin timed from start.
func closedSince(t *testing.T, c net.Conn, start time.Time) time.Duration {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(testwait.Limit))
	buf := make([]byte, 4096)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue // the server's HTTP/2 settings, say
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the server kept the connection open for %v", testwait.Limit)
		}
		return time.Since(start)
	}
}

// A socket that never sends HTTP/2's preface is closed after
// Config.ConnectionTimeout (gRPC's own default is 120 s), or the timeout
// an option passed to Serve sets: the caller's options win.
func TestServeClosesSocketsThatNeverHandshake(t *testing.T) {
	t.Parallel() // waits on real time (refreshes, timers, a child process): overlaps with the other waiting tests
	const timeout = 300 * time.Millisecond
	for _, c := range []struct {
		name string
		cfg  Config
		opts []grpc.ServerOption
	}{
		{"Config", Config{ConnectionTimeout: timeout}, nil},
		{"Serve's option", Config{ConnectionTimeout: time.Hour}, []grpc.ServerOption{grpc.ConnectionTimeout(timeout)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			addr := serveWith(t, newServer(t, c.cfg), c.opts...)
			// From before the dial: the server may accept, and start its
			// timer, before Dial returns here.
			start := time.Now()
			sock, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer sock.Close()
			if took := closedSince(t, sock, start); took < timeout {
				t.Fatalf("closed after %v, before the timeout of %v", took, timeout)
			}
		})
	}
}

// h2 speaks just enough HTTP/2 to see the server's connection settings:
// frames in and out, no streams.
type h2 struct {
	t *testing.T
	c net.Conn
}

// HTTP/2 frame types and the settings read here (RFC 9113).
const (
	h2Settings                  = 0x4
	h2Ping                      = 0x6
	h2GoAway                    = 0x7
	h2Ack                       = 0x1
	h2MaxConcurrentStreams      = 0x3
	h2EnhanceYourCalm           = 0xb
	h2Preface                   = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	h2FrameHeaderLen            = 9
	h2SettingLen                = 6
	h2NoMaxConcurrentStreamsSet = ^uint32(0)
)

// dialH2 connects to addr, sends the preface and empty settings, and
// returns the server's settings once it has acknowledged ours.
func dialH2(t *testing.T, addr string) (*h2, map[uint16]uint32) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	h := &h2{t: t, c: c}
	if _, err := io.WriteString(c, h2Preface); err != nil {
		t.Fatal(err)
	}
	h.write(h2Settings, 0, nil)
	settings := map[uint16]uint32{}
	for got, acked := false, false; !got || !acked; {
		typ, flags, payload, err := h.read()
		if err != nil {
			t.Fatalf("reading the server's settings: %v", err)
		}
		if typ != h2Settings {
			continue
		}
		if flags&h2Ack != 0 {
			acked = true
			continue
		}
		for p := payload; len(p) >= h2SettingLen; p = p[h2SettingLen:] {
			settings[binary.BigEndian.Uint16(p)] = binary.BigEndian.Uint32(p[2:])
		}
		h.write(h2Settings, h2Ack, nil)
		got = true
	}
	return h, settings
}

func (h *h2) write(typ, flags byte, payload []byte) {
	h.t.Helper()
	hdr := make([]byte, h2FrameHeaderLen, h2FrameHeaderLen+len(payload))
	hdr[0], hdr[1], hdr[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	hdr[3], hdr[4] = typ, flags
	if _, err := h.c.Write(append(hdr, payload...)); err != nil {
		h.t.Fatalf("writing a frame: %v", err)
	}
}

// read returns the next frame (on stream 0 or any other), waiting at most
// testwait.Limit.
func (h *h2) read() (typ, flags byte, payload []byte, err error) {
	h.c.SetReadDeadline(time.Now().Add(testwait.Limit))
	hdr := make([]byte, h2FrameHeaderLen)
	if _, err := io.ReadFull(h.c, hdr); err != nil {
		return 0, 0, nil, err
	}
	payload = make([]byte, int(hdr[0])<<16|int(hdr[1])<<8|int(hdr[2]))
	if _, err := io.ReadFull(h.c, payload); err != nil {
		return 0, 0, nil, err
	}
	return hdr[3], hdr[4], payload, nil
}

// goAway reads frames until a GOAWAY and returns its error code; it
// fails the test if the connection ends first.
func (h *h2) goAway() uint32 {
	h.t.Helper()
	for {
		typ, _, payload, err := h.read()
		if err != nil {
			h.t.Fatalf("waiting for GOAWAY: %v", err)
		}
		if typ == h2GoAway && len(payload) >= 8 {
			return binary.BigEndian.Uint32(payload[4:])
		}
	}
}

// ping sends a PING and waits for its acknowledgement, failing the test
// on a GOAWAY or a closed connection.
func (h *h2) ping(n uint64) {
	h.t.Helper()
	data := binary.BigEndian.AppendUint64(nil, n)
	h.write(h2Ping, 0, data)
	for {
		typ, flags, payload, err := h.read()
		if err != nil {
			h.t.Fatalf("ping %d: %v", n, err)
		}
		switch {
		case typ == h2GoAway:
			h.t.Fatalf("ping %d: the server sent GOAWAY (code %#x, %q)", n, binary.BigEndian.Uint32(payload[4:]), payload[8:])
		case typ == h2Ping && flags&h2Ack != 0 && string(payload) == string(data):
			return
		}
	}
}

// Serve's gRPC server bounds the calls in flight on a connection to
// Config.MaxConcurrentStreams (default 100; gRPC's own default is no
// bound), unless an option passed to Serve says otherwise.
func TestServeBoundsStreamsPerConnection(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		opts []grpc.ServerOption
		want uint32
	}{
		{"default", Config{}, nil, DefaultMaxConcurrentStreams},
		{"Config", Config{MaxConcurrentStreams: 7}, nil, 7},
		{"Serve's option", Config{MaxConcurrentStreams: 7}, []grpc.ServerOption{grpc.MaxConcurrentStreams(9)}, 9},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, settings := dialH2(t, serveWith(t, newServer(t, c.cfg), c.opts...))
			got, ok := settings[h2MaxConcurrentStreams]
			if !ok {
				got = h2NoMaxConcurrentStreamsSet
			}
			if got != c.want {
				t.Fatalf("SETTINGS_MAX_CONCURRENT_STREAMS %d, want %d", got, c.want)
			}
		})
	}
}

// A connection with no call for Config.MaxConnectionIdle is sent GOAWAY
// (gRPC's own default: never).
func TestServeClosesIdleConnections(t *testing.T) {
	const idle = 200 * time.Millisecond
	h, _ := dialH2(t, serveWith(t, newServer(t, Config{MaxConnectionIdle: idle})))
	start := time.Now()
	if code := h.goAway(); code != 0 {
		t.Fatalf("GOAWAY with code %#x, want NO_ERROR", code)
	}
	if took := time.Since(start); took < idle/2 {
		t.Fatalf("GOAWAY after %v, long before MaxConnectionIdle %v", took, idle)
	}
}

// A client pinging no more often than Config.KeepaliveMinTime is served
// even with no call in flight, as a Doorman client is between refreshes
// (gRPC's own policy sends such a client GOAWAY at its third ping within
// two hours); one pinging in a loop is sent GOAWAY (ENHANCE_YOUR_CALM).
func TestServeKeepalivePolicy(t *testing.T) {
	t.Parallel() // waits on real time (refreshes, timers, a child process): overlaps with the other waiting tests
	const minTime = 100 * time.Millisecond
	addr := serveWith(t, newServer(t, Config{KeepaliveMinTime: minTime}))
	h, _ := dialH2(t, addr)
	for i := range uint64(5) {
		if i > 0 {
			time.Sleep(5 * minTime) // the client's keepalive interval, not a wait for the server
		}
		h.ping(i)
	}
	flood, _ := dialH2(t, addr)
	for i := range uint64(10) {
		flood.write(h2Ping, 0, binary.BigEndian.AppendUint64(nil, i))
	}
	if code := flood.goAway(); code != h2EnhanceYourCalm {
		t.Fatalf("a ping flood got GOAWAY with code %#x, want ENHANCE_YOUR_CALM", code)
	}
}

// closedFor returns how many connections the listener closed for why.
func closedFor(scope tally.TestScope, why string) int64 {
	if c := scope.Snapshot().Counters()[metricConnsClosed+"+"+tagReason+"="+why]; c != nil {
		return c.Value()
	}
	return 0
}

// countingDialer dials TCP and counts its dials.
type countingDialer struct{ n atomic.Int32 }

func (d *countingDialer) dial(ctx context.Context, addr string) (net.Conn, error) {
	d.n.Add(1)
	var nd net.Dialer
	return nd.DialContext(ctx, "tcp", addr)
}

// At Config.MaxConns the listener closes the connections that never made
// a call, longest idle first, and keeps one that did; its closes are
// counted in the server's metrics.
func TestServeEvictsSilentConnectionsFirst(t *testing.T) {
	scope := tally.NewTestScope("", nil)
	s := newServer(t, Config{MaxConns: 5, Scope: scope})
	addr := serveWith(t, s)
	var d countingDialer
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(d.dial))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := pb.NewCapacityClient(cc)
	getCapacity := func() error {
		_, err := client.GetCapacity(context.Background(), &pb.GetCapacityRequest{ClientId: proto.String("c"),
			Resource: []*pb.ResourceRequest{{ResourceId: proto.String("r"), Priority: proto.Int64(0), Wants: proto.Float64(1)}}})
		return err
	}
	if err := getCapacity(); err != nil {
		t.Fatal(err)
	}
	evicted := func() int64 { return closedFor(scope, "evicted") }
	const silent = 20
	var socks []net.Conn
	defer func() {
		for _, c := range socks {
			c.Close()
		}
	}()
	for range silent {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		socks = append(socks, c)
	}
	// The client's connection and 4 silent ones fit; each of the other 16
	// closes the oldest silent one.
	testwait.Until(t, "the listener to evict 16 silent connections", func() bool { return evicted() == silent-4 })
	for i, c := range socks {
		if i < silent-4 {
			closedWithin(t, c)
		}
	}
	if err := getCapacity(); err != nil {
		t.Fatal(err)
	}
	if n := d.n.Load(); n != 1 {
		t.Fatalf("the client dialled %d times: its connection, which made a call, was evicted", n)
	}
	if st := s.Status(StatusQuery{}); st.Connections == nil || *st.Connections != (StatusLimit{Held: 5, Max: 5}) {
		t.Fatalf("status: connections %+v, want 5 of at most 5", st.Connections)
	}
}

// A connection with a call in flight is never evicted, even one that has
// made no call before: a handler's call counts from its decoded request
// to its return.
func TestServeKeepsConnectionsWithACallInFlight(t *testing.T) {
	scope := tally.NewTestScope("", nil)
	s := newServer(t, Config{MaxConns: 2, MaxResources: 10, Scope: scope})
	held := make(chan struct{})
	release := make(chan struct{})
	// A bulk request refused for a limit is held back before its answer:
	// here, until the test says.
	s.hold = func(context.Context, time.Duration) {
		close(held)
		<-release
	}
	addr := serveWith(t, s)
	var d countingDialer
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(d.dial))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	req := &pb.GetCapacityRequest{ClientId: proto.String("bulk")}
	for i := range 100 {
		req.Resource = append(req.Resource, &pb.ResourceRequest{ResourceId: proto.String(fmt.Sprint(i)), Priority: proto.Int64(0), Wants: proto.Float64(1)})
	}
	answered := make(chan error, 1)
	go func() {
		_, err := pb.NewCapacityClient(cc).GetCapacity(context.Background(), req)
		answered <- err
	}()
	testwait.Recv(t, held, "the call to be in its handler")
	for range 10 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	testwait.Until(t, "the listener to evict 9 of the silent sockets", func() bool { return closedFor(scope, "evicted") == 9 })
	close(release)
	err = testwait.Recv(t, answered, "the call's answer")
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("the call in flight ended with %v, want its answer (ResourceExhausted)", err)
	}
	if n := d.n.Load(); n != 1 {
		t.Fatalf("the client dialled %d times", n)
	}
}

func TestConnConfigValidated(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{MaxConns: -1}, "server: Config.MaxConns is -1, must be >= 0 (0 means the default)"},
		{Config{MaxConcurrentStreams: -2}, "server: Config.MaxConcurrentStreams is -2, must be >= 0 (0 means the default)"},
		{Config{MaxConcurrentStreams: 1 << 32}, "server: Config.MaxConcurrentStreams is 4294967296, must be <= 4294967295 (HTTP/2's limit)"},
		{Config{ConnectionTimeout: -time.Second}, "server: Config.ConnectionTimeout is -1s, must be >= 0 (0 means the default)"},
		{Config{MaxConnectionIdle: -time.Minute}, "server: Config.MaxConnectionIdle is -1m0s, must be >= 0 (0 means the default)"},
		{Config{KeepaliveMinTime: -time.Millisecond}, "server: Config.KeepaliveMinTime is -1ms, must be >= 0 (0 means the default)"},
	} {
		c.cfg.Repository = starRepo()
		if _, err := New(c.cfg); err == nil || err.Error() != c.want {
			t.Errorf("New(%+v): %v, want %q", c.cfg, err, c.want)
		}
	}
	// The defaults a zero Config means.
	s := newServer(t, Config{})
	if want := (connConfig{maxConns: DefaultMaxConns(), timeout: DefaultConnectionTimeout, maxIdle: DefaultMaxConnectionIdle,
		keepaliveMinTime: DefaultKeepaliveMinTime, maxStreams: DefaultMaxConcurrentStreams}); s.conns != want {
		t.Fatalf("a zero Config's connection settings: %+v, want %+v", s.conns, want)
	}
}
