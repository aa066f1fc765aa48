package channel

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/peer"
	"github.com/uber-go/tally/v4"
	"github.com/uber/tchannel-go"
	tjson "github.com/uber/tchannel-go/json"
)

// testServer is a real Sluice server on 127.0.0.1 serving "kv". It counts
// every request that reaches it and answers Busy while busy is set.
type testServer struct {
	ch       *Channel
	received atomic.Int64
	busy     atomic.Bool
	// broken makes every raw request fail UNEXPECTED.
	broken atomic.Bool
	// busyEvery, if set, decides per raw request whether to answer Busy.
	busyEvery func() bool
	release   chan struct{} // "block" requests wait for it to close
	unblock   func()        // closes release, once
}

// busyMessage is the test server's Busy text: it does not say "busy", so
// a test can tell classification by code from classification by text.
const busyMessage = "no capacity left, come back later"

type echoReq struct{ Key string }
type echoRes struct {
	Key    string
	Server string
}

func startServer(t testing.TB, opts ...Option) *testServer {
	t.Helper()
	ch, err := New("kv", opts...)
	if err != nil {
		t.Fatal(err)
	}
	s := &testServer{ch: ch, release: make(chan struct{})}
	s.unblock = sync.OnceFunc(func() { close(s.release) })
	if err := ch.RegisterRaw("echo", func(ctx context.Context, req *RawRequest) (*RawResponse, error) {
		s.received.Add(1)
		if s.busy.Load() || (s.busyEvery != nil && s.busyEvery()) {
			return nil, Busy(busyMessage)
		}
		if s.broken.Load() {
			return nil, tchannel.NewSystemError(tchannel.ErrCodeUnexpected, "broken")
		}
		if string(req.Arg3) == "unexpected" { // an error whose text says busy, but is not Busy
			return nil, tchannel.NewSystemError(tchannel.ErrCodeUnexpected, "busy with something else, and failed")
		}
		if string(req.Arg3) == "app-error" {
			return &RawResponse{Arg3: []byte("nope"), AppError: true}, nil
		}
		if string(req.Arg3) == "block" {
			<-s.release
			return &RawResponse{}, nil
		}
		return &RawResponse{Arg2: req.Arg2, Arg3: req.Arg3}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := ch.RegisterJSON(map[string]any{
		"get": func(ctx tjson.Context, req *echoReq) (*echoRes, error) {
			s.received.Add(1)
			if s.busy.Load() {
				return nil, Busy(busyMessage)
			}
			if req.Key == "" {
				return nil, errEmptyKey
			}
			ctx.SetResponseHeaders(map[string]string{"seen": ctx.Headers()["who"]})
			return &echoRes{Key: req.Key, Server: ch.HostPort()}, nil
		},
	}); err != nil {
		t.Fatal(err)
	}
	if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.Close)
	t.Cleanup(s.unblock) // runs first: unblock handlers
	return s
}

type keyError string

func (e keyError) Error() string { return string(e) }

const errEmptyKey = keyError("key is empty")

// startClient returns a client channel with the servers as peers of "kv",
// busy windows driven by a fake clock, and metrics in a test scope.
func startClient(t testing.TB, servers ...*testServer) (*Channel, *clock.Fake, tally.TestScope) {
	t.Helper()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	scope := tally.NewTestScope("", nil)
	ch, err := New("client", WithClock(clk), WithScope(scope))
	if err != nil {
		t.Fatal(err)
	}
	to(ch, "kv", WithMethods("echo", "get"))
	for _, s := range servers {
		if err := to(ch, "kv").AddPeer(s.ch.HostPort()); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(ch.Close)
	return ch, clk, scope
}

// waitAllReady waits until the client's peer of each server is Ready. A
// test whose figures assume calls spread over all its servers waits for
// it: on a loaded machine a connect can take longer than the test's first
// calls, which then go to the peers that are Ready.
func waitAllReady(t *testing.T, c *Channel, servers []*testServer) {
	t.Helper()
	for _, s := range servers {
		waitPeerState(t, c, s.ch.HostPort(), peer.Ready)
	}
}

func ctxTimeout(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// withRand fixes the backoff jitter, for tests whose timing depends on it.
func withRand(f func() float64) Option { return func(o *options) { o.rand = f } }

// withOnWait calls f each time a call starts waiting for a ready peer.
func withOnWait(f func()) Option { return func(o *options) { o.onWait = f } }

// to returns ch's Client for service, making it with opts on first use:
// most tests call one or two services through a Channel and need nothing
// of the Client but its calls and peers. It panics if the Client cannot
// be made, as a test's setup failing.
func to(ch *Channel, service string, opts ...ClientOption) *Client {
	if cl := ch.client(service); cl != nil {
		if len(opts) > 0 {
			panic(fmt.Sprintf("to(%q): the Client exists already; give its options on first use", service))
		}
		return cl
	}
	cl, err := ch.NewClient(service, opts...)
	if err != nil {
		panic(fmt.Sprintf("to(%q): %v", service, err))
	}
	return cl
}

// policyOf returns the policy of service's method on c, building it as a
// first call would.
func policyOf(c *Channel, service, method string) (*methodPolicy, error) {
	return to(c, service).policyFor(method)
}

// registrarOf returns the registrar package thrift registers through.
func registrarOf(c *Channel) tchannel.Registrar { return registrar{c} }

// registerJSONBothWays registers the JSON handler h on c twice, both
// behind the Channel's guard: as method sluice with RegisterJSON and as
// method tch with tchannel-go's json.Register (what RegisterJSON was).
func registerJSONBothWays(tb testing.TB, c *Channel, h any, sluice, tch string) {
	tb.Helper()
	if err := c.RegisterJSON(map[string]any{sluice: h}); err != nil {
		tb.Fatal(err)
	}
	if err := tjson.Register(registrarOf(c), tjson.Handlers{tch: h}, func(context.Context, error) {}); err != nil {
		tb.Fatal(err)
	}
}
