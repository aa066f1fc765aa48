package thrift

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/examples/keyvalue/gen-go/keyvalue"
	tthrift "github.com/uber/tchannel-go/thrift"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// service is the TChannel service name the test servers register under.
const service = "keyvalue"

// kvServer is a real key-value Thrift server on 127.0.0.1, on a Sluice
// channel or a plain tchannel-go one. It counts every request its handler
// sees, records the previous-rpc-attempts each carried, and answers Busy
// while busy is set.
type kvServer struct {
	hostPort string
	received atomic.Int64
	busy     atomic.Bool
	busyNext atomic.Int64 // answer Busy to this many more requests

	mu       sync.Mutex
	vals     map[string]string
	previous []int // PreviousAttempts of each request, in order
	// What each request carried, in order: its application headers and
	// its TChannel transport headers.
	headers   []map[string]string
	transport []transportSeen
}

// transportSeen is what a handler saw of a request's TChannel transport
// headers (tchannel.CurrentCall).
type transportSeen struct{ Caller, ShardKey, RoutingKey, RoutingDelegate string }

var _ keyvalue.TChanKeyValue = (*kvServer)(nil)

func newKVServer() *kvServer { return &kvServer{vals: map[string]string{}} }

// begin records a request and returns the Busy error to answer with, if any.
func (s *kvServer) begin(ctx tthrift.Context) error {
	s.received.Add(1)
	s.mu.Lock()
	s.previous = append(s.previous, PreviousAttempts(ctx))
	s.headers = append(s.headers, ctx.Headers())
	if call := tchannel.CurrentCall(ctx); call != nil {
		s.transport = append(s.transport, transportSeen{call.CallerName(), call.ShardKey(), call.RoutingKey(), call.RoutingDelegate()})
	}
	s.mu.Unlock()
	if s.busy.Load() {
		return channel.Busy("test server is busy")
	}
	for n := s.busyNext.Load(); n > 0; n = s.busyNext.Load() {
		if s.busyNext.CompareAndSwap(n, n-1) {
			return channel.Busy("test server is busy for this request")
		}
	}
	// Echo the caller's "who" header back as "seen", with who served it.
	if who, ok := ctx.Headers()["who"]; ok {
		ctx.SetResponseHeaders(map[string]string{"seen": who, "server": s.hostPort})
	}
	return nil
}

func (s *kvServer) Get(ctx tthrift.Context, key string) (string, error) {
	if err := s.begin(ctx); err != nil {
		return "", err
	}
	if !validKey(key) {
		return "", &keyvalue.InvalidKey{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vals[key]
	if !ok {
		return "", &keyvalue.KeyNotFound{Key: key}
	}
	return v, nil
}

func (s *kvServer) Set(ctx tthrift.Context, key, value string) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	if !validKey(key) {
		return &keyvalue.InvalidKey{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vals[key] = value
	return nil
}

func (s *kvServer) HealthCheck(ctx tthrift.Context) (string, error) {
	if err := s.begin(ctx); err != nil {
		return "", err
	}
	return "OK", nil
}

func (s *kvServer) previousAttempts() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.previous...)
}

// seen returns the application and transport headers of every request, in
// order.
func (s *kvServer) seen() ([]map[string]string, []transportSeen) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]string(nil), s.headers...), append([]transportSeen(nil), s.transport...)
}

func validKey(key string) bool {
	r, _ := utf8.DecodeRuneInString(key)
	return unicode.IsLetter(r)
}

// startServer starts a kvServer on a Sluice channel made with opts.
func startServer(t testing.TB, opts ...channel.Option) (*kvServer, *channel.Channel) {
	t.Helper()
	ch, err := channel.New(service, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.Close)
	s := newKVServer()
	NewServer(ch).Register(keyvalue.NewTChanKeyValueServer(s))
	if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	s.hostPort = ch.HostPort()
	return s, ch
}

// startPlainServer starts a kvServer on a plain tchannel-go channel with
// tchannel-go's own Thrift server.
func startPlainServer(t testing.TB) *kvServer {
	t.Helper()
	ch, err := tchannel.NewChannel(service, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closePlain(t, ch) })
	s := newKVServer()
	tthrift.NewServer(ch).Register(keyvalue.NewTChanKeyValueServer(s))
	if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	s.hostPort = ch.PeerInfo().HostPort
	return s
}

// closePlain closes a plain tchannel-go channel and waits until its
// connections have closed, so that goleak sees none of their goroutines.
func closePlain(t testing.TB, ch *tchannel.Channel) {
	ch.Close()
	testwait.Recv(t, ch.ClosedChan(), "the plain channel to close")
}

// startClient returns a Sluice Client of service, on a channel whose busy
// windows follow a fake clock, with the servers as peers, and the
// generated client on top of it.
func startClient(t testing.TB, servers ...*kvServer) (*channel.Client, *clock.Fake, keyvalue.TChanKeyValue) {
	t.Helper()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	ch, err := channel.New("kv-client", channel.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.Close)
	cl, err := ch.NewClient(service)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		if err := cl.AddPeer(s.hostPort); err != nil {
			t.Fatal(err)
		}
	}
	return cl, clk, keyvalue.NewTChanKeyValueClient(NewClient(cl))
}

// startPlainClient returns tchannel-go's own generated Thrift client on a
// plain channel, calling hostPort.
func startPlainClient(t testing.TB, hostPort string) keyvalue.TChanKeyValue {
	t.Helper()
	ch, err := tchannel.NewChannel("plain-client", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closePlain(t, ch) })
	ch.Peers().Add(hostPort)
	return keyvalue.NewTChanKeyValueClient(tthrift.NewClient(ch, service, nil))
}

// ctxTimeout returns a Thrift context with a 2 s deadline and the headers.
func ctxTimeout(t testing.TB, headers map[string]string) tthrift.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	t.Cleanup(cancel)
	return tthrift.WithHeaders(ctx, headers)
}
