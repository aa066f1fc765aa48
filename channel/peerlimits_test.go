package channel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/backoff"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/internal/testkit/tpeer"
	"github.com/sluice-rpc/sluice/internal/tframe"
	"github.com/sluice-rpc/sluice/peer"
	"github.com/sluice-rpc/sluice/stats"
	"github.com/uber-go/tally/v4"
	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/raw"
)

// checksumFrame is the probe's frame: a call request whose checksum type
// (4) indexes past tchannel-go's table of four. It crashes a plain
// tchannel-go server.
func checksumFrame(id uint32) []byte {
	return tframe.AppendCallReq(nil, id, tframe.Call{TTL: 1000, Service: "kv",
		Fragment: tframe.Fragment{ChecksumType: 4, Chunks: [][]byte{[]byte("echo"), nil, nil}}})
}

func taggedCounter(scope tally.TestScope, name, tag, value string) int64 {
	if c, ok := scope.Snapshot().Counters()[name+"+"+tag+"="+value]; ok {
		return c.Value()
	}
	return 0
}

// logRecorder is a slog.Handler that keeps the lines at Warn and above,
// each "msg key=value key=value ", its attributes (WithAttrs's first) in
// order, group names prefixed to their keys as zapslog's handler does.
type logRecorder struct {
	mu     *sync.Mutex
	lines  *[]string
	attrs  string // WithAttrs's, formatted
	prefix string // WithGroup's, "a.b."
}

func newLogRecorder() logRecorder {
	return logRecorder{mu: &sync.Mutex{}, lines: new([]string)}
}

// logger returns a logger writing to l.
func (l logRecorder) logger() *slog.Logger { return slog.New(l) }

func (l logRecorder) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelWarn }

func (l logRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	for _, a := range as {
		l.attrs += l.prefix + a.Key + "=" + a.Value.String() + " "
	}
	return l
}

func (l logRecorder) WithGroup(name string) slog.Handler {
	l.prefix += name + "."
	return l
}

func (l logRecorder) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message + " " + l.attrs)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, "%s%s=%v ", l.prefix, a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	*l.lines = append(*l.lines, b.String())
	l.mu.Unlock()
	return nil
}

func (l logRecorder) warnings() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), *l.lines...)
}

// The checksum frame, sent to a Sluice server, closes that connection and
// nothing else: the server keeps serving other connections, counts the
// frame and logs a line naming the peer.
func TestChecksumFrameClosesOnlyItsConnection(t *testing.T) {
	scope := tally.NewTestScope("", nil)
	logs := newLogRecorder()
	s := startServer(t, WithScope(scope), WithLogger(logs.logger()))
	client, _, _ := startClient(t, s)
	ctx := ctxTimeout(t)
	_, err := to(client, "kv").CallRaw(ctx, "echo", nil, []byte("before"))
	if err != nil {
		t.Fatalf("CallRaw: %v", err)
	}

	p := tpeer.Dial(t, s.ch.HostPort())
	p.Handshake()
	p.Send(checksumFrame(2))
	f := p.Next()
	if f.Type != tframe.Error {
		t.Fatalf("the answer to the checksum frame: got %v, want %v", f.Type, tframe.Error)
	}
	if !strings.Contains(f.Message, "checksum type is 4") {
		t.Errorf("f.Message = %q, want it to contain %q", f.Message, "checksum type is 4")
	}
	p.ClosedByServer()

	res, err := to(client, "kv").CallRaw(ctx, "echo", nil, []byte("after"))
	if err != nil {
		t.Fatalf("the Sluice client's connection, untouched: %v", err)
	}
	if !bytes.Equal(res.Arg3, []byte("after")) {
		t.Errorf("res.Arg3 = %q, want %q", res.Arg3, []byte("after"))
	}
	_, err = plainCall(t, s.ch.HostPort(), "echo", tchannel.Raw, nil, []byte("new"))
	if err != nil {
		t.Fatalf("a new connection: %v", err)
	}
	if got := taggedCounter(scope, stats.FramesInvalid, stats.TagDirection, "inbound"); got != 1 {
		t.Errorf("got %v, want %v", got, 1)
	}
	warned := false
	for _, l := range logs.warnings() {
		if strings.Contains(l, "remotePeer="+p.LocalAddr().String()) && strings.Contains(l, "checksum type is 4") {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no warning names the peer %s: %q: warned = false, want true", p.LocalAddr(), logs.warnings())
	}
}

// A Sluice client calling a server that answers with the checksum frame
// gets an error, not a crash; the connection had served, yet the client
// reconnects to that server on its backoff's schedule, not at once.
func TestClientGetsAnErrorFromAHostileServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("net.Listen: %v", err)
	}
	defer l.Close()
	var accepts atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepts.Add(1)
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(testwait.Limit))
				calls := 0
				for {
					f, err := tpeer.ReadFrame(c)
					if err != nil {
						return
					}
					switch f.Type {
					case tframe.InitReq:
						c.Write(tframe.AppendInit(nil, tframe.InitRes, f.ID, tframe.Init{Version: 2, Params: tframe.InitParams(l.Addr().String(), "hostile")}))
					case tframe.PingReq:
						c.Write(tframe.Append(nil, tframe.PingRes, f.ID, nil))
					case tframe.CallReq:
						if calls++; calls == 1 { // the first is answered well
							c.Write(tframe.AppendCallRes(nil, f.ID, tframe.Call{Fragment: tframe.Fragment{Chunks: [][]byte{nil, nil, []byte("ok")}}}))
							continue
						}
						c.Write(tframe.AppendCallRes(nil, f.ID, tframe.Call{Fragment: tframe.Fragment{ChecksumType: 4, Chunks: [][]byte{nil, nil, nil}}}))
					}
				}
			}()
		}
	}()
	scope := tally.NewTestScope("", nil)
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	client, err := New("client", WithScope(scope), WithClock(clk))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer client.Close()
	if err := to(client, "kv").AddPeer(l.Addr().String()); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := to(client, "kv").CallRaw(ctx, "echo", nil, nil)
	if err != nil {
		t.Fatalf("CallRaw: %v", err)
	}
	if !bytes.Equal(res.Arg3, []byte("ok")) {
		t.Fatalf("res.Arg3 = %q, want %q", res.Arg3, []byte("ok"))
	}
	clk.Add(10 * time.Second) // the connection has served for long: its end is no failed connect

	_, err = to(client, "kv").CallRaw(ctx, "echo", nil, nil)
	if err == nil {
		t.Fatal("CallRaw succeeded, want an error")
	}
	if err2 := ctx.Err(); err2 != nil {
		t.Errorf("the call waited out its deadline instead of failing when the frame came: %v: %v", err, err2)
	}
	if got := taggedCounter(scope, stats.FramesInvalid, stats.TagDirection, "outbound"); got != 1 {
		t.Errorf("got %v, want %v", got, 1)
	}
	testwait.Until(t, "the peer to be in transient failure", func() bool {
		return to(client, "kv").Peers()[0].State == peer.TransientFailure
	})
	for range 5 {
		_, err = to(client, "kv").CallRaw(ctx, "echo", nil, nil)
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("CallRaw error = %v, want %v", err, ErrUnavailable)
		}
	}
	if got := accepts.Load(); got != 1 {
		t.Errorf("connections to the hostile server within the backoff: got %v, want %v", got, 1)
	}
}

// Arguments across the sizes where reading changes buffers come back
// whole.
func TestLargeArgumentsRoundTrip(t *testing.T) {
	s := startServer(t)
	client, _, _ := startClient(t, s)
	ctx := ctxTimeout(t)
	for _, size := range []int{0, 511, 512, 513, argChunk - 1, argChunk, argChunk + 1, 3*argChunk + 7, 2 << 20} {
		arg2 := bytes.Repeat([]byte{'h'}, size%1000)
		arg3 := make([]byte, size)
		for i := range arg3 {
			arg3[i] = byte(i * 7)
		}
		res, err := to(client, "kv").CallRaw(ctx, "echo", arg2, arg3)
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if !reflect.DeepEqual(res.Arg2, arg2) {
			t.Fatalf("arg2 of size %d: got %q, want %q", size, res.Arg2, arg2)
		}
		if !bytes.Equal(arg3, res.Arg3) {
			t.Fatalf("arg3 of size %d changed: bytes.Equal(arg3, res.Arg3) = false, want true", size)
		}
	}
}

// A connection that finished its handshake and then says nothing is
// closed after IdleTimeout; a Sluice client whose connection was closed so
// reconnects and calls on. (A client counts a connection closed within its
// backoff's initial interval as a failed peer: here that is 100 ms, below
// the idle timeout, as a second is below a real one of minutes.)
func TestIdleConnectionsAreClosed(t *testing.T) {
	scope := tally.NewTestScope("", nil)
	s := startServer(t, WithScope(scope), WithPeerLimits(PeerLimits{IdleTimeout: 300 * time.Millisecond}))
	clientScope := tally.NewTestScope("", nil)
	client, err := New("client", WithScope(clientScope), WithConnectConfig(ConnectConfig{Backoff: backoff.Exponential{
		Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 1.6, Jitter: backoff.ProportionalJitter}}))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(client.Close)
	if err := to(client, "kv").AddPeer(s.ch.HostPort()); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}
	ctx := ctxTimeout(t)
	_, err = to(client, "kv").CallRaw(ctx, "echo", nil, nil)
	if err != nil {
		t.Fatalf("CallRaw: %v", err)
	}
	p := tpeer.Dial(t, s.ch.HostPort())
	p.Handshake()
	p.ClosedByServer()
	testwait.Until(t, "both connections to be closed as idle", func() bool {
		return taggedCounter(scope, stats.ServerConnsClosed, stats.TagReason, "idle") == 2
	})
	// The Sluice client was asked to close its connection, and did: it
	// connects again for its next call.
	waitPeerState(t, client, s.ch.HostPort(), peer.Idle)
	ctx = ctxTimeout(t)
	_, err = to(client, "kv").CallRaw(ctx, "echo", nil, nil)
	if err != nil {
		t.Fatalf("the client's call after its idle connection was closed: %v", err)
	}
	if n := taggedCounter(clientScope, stats.PeerConnects, stats.TagPeer, s.ch.HostPort()); n != 2 {
		t.Fatalf("%d connects, want 2: the first, and one for the call after the idle close", n)
	}
}

// closedOftenClient returns a Sluice client of s, reporting to scope if
// not nil, for tests whose server closes its connections often: a
// connection that closes young is not a connect failure to back off from
// here (the tests are about the calls the closes meet).
func closedOftenClient(t *testing.T, s *testServer, scope tally.Scope) *Channel {
	t.Helper()
	opts := []Option{WithConnectConfig(ConnectConfig{Backoff: backoff.Exponential{
		Initial: time.Millisecond, Max: time.Millisecond, Multiplier: 1.6, Jitter: backoff.ProportionalJitter}})}
	if scope != nil {
		opts = append(opts, WithScope(scope))
	}
	client, err := New("client", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	if err := to(client, "kv", WithMethods("echo")).AddPeer(s.ch.HostPort()); err != nil {
		t.Fatal(err)
	}
	return client
}

// A Sluice client whose calls come about as often as the server's idle
// timeout loses none of them: the server asks it to close an idle
// connection instead of closing it under a call on the wire.
func TestIdleCloseLosesNoCall(t *testing.T) {
	t.Parallel() // it sleeps out 120 gaps around the idle timeout
	const idle = 20 * time.Millisecond
	scope := tally.NewTestScope("", nil)
	s := startServer(t, WithScope(scope), WithPeerLimits(PeerLimits{IdleTimeout: idle}))
	client := closedOftenClient(t, s, nil)
	var failed []error
	const calls = 120
	for i := range calls {
		// Gaps around the idle timeout, so that calls meet its closes.
		time.Sleep(idle*3/4 + time.Duration(i%11)*idle/20)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if _, err := to(client, "kv").CallRaw(ctx, "echo", nil, nil); err != nil {
			failed = append(failed, err)
		}
		cancel()
	}
	closes := taggedCounter(scope, stats.ServerConnsClosed, stats.TagReason, "idle")
	t.Logf("%d calls, %d idle closes, %d failed", calls, closes, len(failed))
	if closes < calls/10 {
		t.Fatalf("only %d idle closes in %d calls: the gaps did not meet the idle timeout", closes, calls)
	}
	if len(failed) > 0 {
		t.Fatalf("%d of %d calls failed; the first: %v", len(failed), calls, failed[0])
	}
}

// A socket that never sends its init request is closed after
// HandshakeTimeout.
func TestHandshakeTimeout(t *testing.T) {
	scope := tally.NewTestScope("", nil)
	s := startServer(t, WithScope(scope), WithPeerLimits(PeerLimits{HandshakeTimeout: 100 * time.Millisecond}))
	p := tpeer.Dial(t, s.ch.HostPort())
	p.ClosedByServer()
	testwait.Until(t, "the close to be counted", func() bool {
		return taggedCounter(scope, stats.ServerConnsClosed, stats.TagReason, "handshake_timeout") == 1
	})
}

// At MaxConns, sockets that connected and wait do not lock out a new
// client: it takes the place of one of them.
func TestMaxConnsMakesRoomForANewClient(t *testing.T) {
	const maxConns = 8
	scope := tally.NewTestScope("", nil)
	s := startServer(t, WithScope(scope), WithPeerLimits(PeerLimits{MaxConns: maxConns}))
	for range maxConns {
		tpeer.Dial(t, s.ch.HostPort()).Handshake() // closed by the test's cleanup
	}
	for range maxConns {
		tpeer.Dial(t, s.ch.HostPort()) // and some that never even say hello
	}
	client, _, _ := startClient(t, s)
	ctx := ctxTimeout(t)
	for range 10 {
		_, err := to(client, "kv").CallRaw(ctx, "echo", nil, nil)
		if err != nil {
			t.Fatalf("CallRaw: %v", err)
		}
	}
	if got := taggedCounter(scope, stats.ServerConnsClosed, stats.TagReason, "evicted"); got < int64(maxConns+1) {
		t.Errorf("got %v, want >= %v", got, int64(maxConns+1))
	}
}

// A Sluice client whose connection is evicted at the cap between its
// calls loses none of them: it is asked to close the connection instead.
func TestEvictionLosesNoCall(t *testing.T) {
	scope := tally.NewTestScope("", nil)
	s := startServer(t, WithScope(scope), WithPeerLimits(PeerLimits{MaxConns: 2}))
	clientScope := tally.NewTestScope("", nil)
	client := closedOftenClient(t, s, clientScope)
	plain, err := tchannel.NewChannel("plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		// A plain client calling all the time: its connection is always
		// the more recently active, so the Sluice client's is the one a
		// new socket evicts whenever it is between calls.
		defer wg.Done()
		for ctx.Err() == nil {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			_, _, _, _ = raw.Call(cctx, plain, s.ch.HostPort(), "kv", "echo", nil, nil)
			cancel()
		}
	}()
	go func() {
		// New sockets at the cap, each taking a place.
		defer wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for ctx.Err() == nil {
			if nc, err := net.Dial("tcp", s.ch.HostPort()); err == nil {
				nc.Close()
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
			}
		}
	}()
	var failed []error
	const calls = 300
	for i := range calls {
		time.Sleep(time.Duration(i%5) * time.Millisecond) // gaps, so the evictions meet idle moments
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		// A socket at the cap also evicts the client's connection in its
		// handshake (it is pending, as the socket is): that connect
		// fails, and a call waits for the next instead of failing
		// UNAVAILABLE, so that what is counted is the calls that met an
		// eviction of a connection they could be sent on.
		if _, err := to(client, "kv").CallRaw(cctx, "echo", nil, nil, WaitForReady()); err != nil {
			failed = append(failed, err)
		}
		cancel()
	}
	stop()
	wg.Wait()
	evicted := taggedCounter(scope, stats.ServerConnsClosed, stats.TagReason, "evicted")
	connects := taggedCounter(clientScope, stats.PeerConnects, stats.TagPeer, s.ch.HostPort())
	t.Logf("%d calls, %d evictions, %d connects of the Sluice client, %d failed", calls, evicted, connects, len(failed))
	if connects < 10 {
		t.Fatalf("the Sluice client connected %d times: its connection was not evicted enough to meet its calls", connects)
	}
	if len(failed) > 0 {
		t.Fatalf("%d of %d calls failed; the first: %v", len(failed), calls, failed[0])
	}
}

// A connection with MaxCallsPerConn calls in flight gets BUSY for the
// next, before its handler runs.
func TestMaxCallsPerConn(t *testing.T) {
	scope := tally.NewTestScope("", nil)
	server, err := New("kv", WithScope(scope), WithPeerLimits(PeerLimits{MaxCallsPerConn: 2}))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(server.Close)
	var ran atomic.Int64
	release := make(chan struct{})
	if err := server.RegisterRaw("block", func(context.Context, *RawRequest) (*RawResponse, error) {
		ran.Add(1)
		<-release
		return &RawResponse{}, nil
	}); err != nil {
		t.Fatalf("RegisterRaw: %v", err)
	}
	if err := server.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatalf("ListenAndServe: %v", err)
	}
	client := plainClient(t, nil)
	ctx := ctxTimeout(t)
	call := func() error {
		c, err := client.BeginCall(ctx, server.HostPort(), "kv", "block", nil)
		if err != nil {
			return err
		}
		_, _, _, err = raw.WriteArgs(c, nil, nil)
		return err
	}
	blocked := make(chan error, 2)
	for range 2 {
		go func() { blocked <- call() }()
	}
	testwait.Until(t, "two calls in their handlers", func() bool { return ran.Load() == 2 })
	msg := requireSystemError(t, call(), tchannel.ErrCodeBusy)
	if !strings.Contains(msg, "too many calls in flight") {
		t.Errorf("msg = %q, want it to contain %q", msg, "too many calls in flight")
	}
	if got := ran.Load(); got != 2 {
		t.Errorf("the third call's handler ran: got %v, want %v", got, 2)
	}
	if got := taggedCounter(scope, stats.ServerRefused, stats.TagReason, "calls_per_conn"); got != 1 {
		t.Errorf("got %v, want %v", got, 1)
	}
	close(release)
	for range 2 {
		if err := testwait.Recv(t, blocked, "a blocked call"); err != nil {
			t.Fatalf("testwait.Recv: %v", err)
		}
	}
	if err := call(); err != nil {
		t.Fatalf("a call once the others ended: %v", err)
	}
}

// A request whose fragments stop coming is dropped after StallTimeout,
// whatever its TTL: its caller gets TIMEOUT, its handler never ran.
func TestStalledRequestIsDropped(t *testing.T) {
	t.Parallel() // it waits out the stall timeout
	scope := tally.NewTestScope("", nil)
	s := startServer(t, WithScope(scope), WithPeerLimits(PeerLimits{StallTimeout: 300 * time.Millisecond}))
	p := tpeer.Dial(t, s.ch.HostPort())
	p.Handshake()
	p.Send(tpeer.CallReq(2, "kv", "echo", true, make([]byte, 60_000)), tpeer.Fragment(2, true, make([]byte, 60_000)))
	f := p.Next()
	if f.Type != tframe.Error {
		t.Fatalf("f.Type = %v, want %v", f.Type, tframe.Error)
	}
	if tchannel.SystemErrCode(f.Code) != tchannel.ErrCodeTimeout {
		t.Errorf("%q: got %v, want %v", f.Message, f.Code, tchannel.ErrCodeTimeout)
	}
	if !strings.Contains(f.Message, "stopped coming") {
		t.Errorf("f.Message = %q, want it to contain %q", f.Message, "stopped coming")
	}
	if got := taggedCounter(scope, stats.ServerDropped, stats.TagReason, "stalled"); got != 1 {
		t.Errorf("got %v, want %v", got, 1)
	}
}

func TestPeerLimitsValidate(t *testing.T) {
	for _, tc := range []struct {
		opts []Option
		want string
	}{
		{[]Option{WithPeerLimits(PeerLimits{HandshakeTimeout: -1})}, "HandshakeTimeout"},
		{[]Option{WithPeerLimits(PeerLimits{MaxUnfinishedBytesPerConn: 1 << 20})}, "MaxUnfinishedBytesPerConn is 1048576, below the maximum request size 4194304"},
		{[]Option{WithMaxRequestSize(100), WithPeerLimits(PeerLimits{MaxUnfinishedBytesPerConn: 1000, MaxUnfinishedBytes: 500})}, "MaxUnfinishedBytes is 500"},
		{[]Option{WithPeerLimits(PeerLimits{MaxConns: -1})}, "channel: PeerLimits.MaxConns is -1, must be >= 0 (0 means the default; Off.MaxConns turns it off)"},
		{[]Option{WithPeerLimits(PeerLimits{IdleTimeout: time.Second, Off: PeerLimitsOff{IdleTimeout: true}})}, "channel: PeerLimits.IdleTimeout is 1s, must be 0 when Off.IdleTimeout is set"},
	} {
		_, err := New("kv", tc.opts...)
		if err == nil {
			t.Fatal("New succeeded, want an error")
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err.Error() = %q, want it to contain %q", err.Error(), tc.want)
		}
	}
}

// The limits Off names reach the guard and the listener as their "none".
func TestPeerLimitsOffReachTheGuard(t *testing.T) {
	off := PeerLimits{Off: PeerLimitsOff{MaxConns: true, IdleTimeout: true, WriteTimeout: true, StallTimeout: true,
		MaxUnfinishedBytesPerConn: true, MaxUnfinishedBytes: true, MaxCallsPerConn: true, MaxAnswerBytes: true}}
	g, lc := off.guardLimits(defaultMaxRequestSize), off.listenerConfig()
	if g.StallTimeout >= 0 || g.MaxUnfinishedPerConn >= 0 || g.MaxUnfinished >= 0 || g.MaxCallsPerConn >= 0 || g.MaxAnswerBytes >= 0 {
		t.Errorf("guard limits %+v, want every one off (negative)", g)
	}
	if lc.MaxConns != math.MaxInt || lc.IdleTimeout >= 0 || lc.WriteTimeout >= 0 {
		t.Errorf("listener config %+v, want no cap and no timeouts", lc)
	}
	on := (PeerLimits{}).guardLimits(defaultMaxRequestSize)
	if on.MaxUnfinishedPerConn <= 0 || on.MaxUnfinished <= 0 {
		t.Errorf("the zero PeerLimits' guard limits %+v, want the defaults", on)
	}
}

// inboundExchanges counts the calls tchannel-go holds on the server's
// inbound connections.
func inboundExchanges(ch *Channel) int {
	n := 0
	for _, p := range ch.TChannel().IntrospectState(&tchannel.IntrospectionOptions{}).RootPeers {
		for _, c := range p.InboundConnections {
			n += c.InboundExchange.Count
		}
	}
	return n
}

// A request whose arguments do not follow the protocol (an argument
// missing: the frame ends after arg2) is answered BAD_REQUEST at once by
// raw and JSON handlers, and tchannel-go holds nothing of it afterwards,
// whatever time to live it claimed.
func TestMalformedArgumentsAreAnswered(t *testing.T) {
	scope := tally.NewTestScope("", nil)
	s := startServer(t, WithScope(scope))
	for i, method := range []string{"echo", "get"} {
		p := tpeer.Dial(t, s.ch.HostPort())
		p.Handshake()
		p.Send(tframe.AppendCallReq(nil, 2, tframe.Call{TTL: 120_000, Service: "kv",
			Headers:  [][2]string{{"as", "raw"}, {"cn", "tpeer"}},
			Fragment: tframe.Fragment{Chunks: [][]byte{[]byte(method), nil}}}))
		f := p.Next()
		if f.Type != tframe.Error {
			t.Fatalf("%s: got %v, want %v", method, f.Type, tframe.Error)
		}
		if tchannel.SystemErrCode(f.Code) != tchannel.ErrCodeBadRequest {
			t.Errorf("%s: %q: got %v, want %v", method, f.Message, f.Code, tchannel.ErrCodeBadRequest)
		}
		if !strings.Contains(f.Message, "malformed request") {
			t.Errorf("%s: got %q, want it to contain %q", method, f.Message, "malformed request")
		}
		testwait.Until(t, "tchannel-go to release the call", func() bool { return inboundExchanges(s.ch) == 0 })
		// The server counts the answer once it is sent, so the client
		// can read it before the count moves.
		testwait.Until(t, fmt.Sprintf("%s: the malformed counter to reach %d", method, i+1), func() bool {
			return counter(scope, stats.ServerMalformed) >= int64(i+1)
		})
		if got := counter(scope, stats.ServerMalformed); int(got) != i+1 {
			t.Errorf("counter(scope, stats.ServerMalformed) = %v, want %v", got, i+1)
		}
	}
}

// A handler that returns without answering leaves nothing in tchannel-go:
// the Channel releases the call, although its time to live is 120 s.
func TestUnansweredCallIsReleased(t *testing.T) {
	s := startServer(t)
	ran := make(chan struct{}, 1)
	if err := s.ch.RegisterHandler("silent", tchannel.HandlerFunc(func(context.Context, *tchannel.InboundCall) { ran <- struct{}{} })); err != nil {
		t.Fatal(err)
	}
	p := tpeer.Dial(t, s.ch.HostPort())
	p.Handshake()
	p.Send(tpeer.CallReq(2, "kv", "silent", false, nil))
	testwait.Recv(t, ran, "the handler to run")
	testwait.Until(t, "tchannel-go to release the call", func() bool { return inboundExchanges(s.ch) == 0 })
	// The connection serves on.
	p.Send(tpeer.CallReq(3, "kv", "echo", false, []byte("ok")))
	if got := p.Next().Type; got != tframe.CallRes {
		t.Fatalf("p.Next().Type = %v, want %v", got, tframe.CallRes)
	}
}
