package thrift

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uber/tchannel-go/examples/keyvalue/gen-go/keyvalue"
	tthrift "github.com/uber/tchannel-go/thrift"
)

func TestGeneratedClientCallSucceeds(t *testing.T) {
	s, _ := startServer(t)
	_, _, kv := startClient(t, s)

	require.NoError(t, kv.Set(ctxTimeout(t, nil), "alpha", "one"))
	v, err := kv.Get(ctxTimeout(t, nil), "alpha")
	require.NoError(t, err)
	assert.Equal(t, "one", v)
	health, err := kv.HealthCheck(ctxTimeout(t, nil))
	require.NoError(t, err)
	assert.Equal(t, "OK", health)
	assert.EqualValues(t, 3, s.received.Load())
}

// A declared exception is an application error: it reaches the caller as
// the generated typed error, the transport succeeded, and it is sent once.
func TestDeclaredExceptionIsTypedAndSentOnce(t *testing.T) {
	for _, tc := range []struct {
		name, key string
		check     func(t *testing.T, err error)
	}{
		{"KeyNotFound", "missing", func(t *testing.T, err error) {
			var nf *keyvalue.KeyNotFound
			require.ErrorAs(t, err, &nf)
			assert.Equal(t, "missing", nf.Key)
		}},
		{"InvalidKey", "1bad", func(t *testing.T, err error) {
			var ik *keyvalue.InvalidKey
			require.ErrorAs(t, err, &ik)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newKVServerPair(t)
			c, _, kv := startClient(t, a, b)
			_, err := kv.Get(ctxTimeout(t, nil), tc.key)
			tc.check(t, err)
			var ce *channel.CallError
			assert.False(t, errors.As(err, &ce), "an exception is not a call error: %v", err)
			assert.EqualValues(t, 1, a.received.Load()+b.received.Load(), "the exception was retried")
			for _, p := range c.Peers(service) {
				assert.Zero(t, p.Busy, "an exception counted as busy on %s", p.HostPort)
			}
		})
	}
}

func newKVServerPair(t *testing.T) (*kvServer, *kvServer) {
	a, _ := startServer(t)
	b, _ := startServer(t)
	return a, b
}

func TestHeadersTravelBothWays(t *testing.T) {
	s, _ := startServer(t)
	_, _, kv := startClient(t, s)
	ctx := ctxTimeout(t, map[string]string{"who": "me"})
	require.NoError(t, kv.Set(ctx, "k", "v"))
	assert.Equal(t, map[string]string{"seen": "me", "server": s.hostPort}, ctx.ResponseHeaders())

	// On a declared exception too: the response carries its headers.
	ctx = ctxTimeout(t, map[string]string{"who": "you"})
	_, err := kv.Get(ctx, "absent")
	var nf *keyvalue.KeyNotFound
	require.ErrorAs(t, err, &nf)
	assert.Equal(t, "you", ctx.ResponseHeaders()["seen"])

	// No request headers, no response headers.
	ctx = ctxTimeout(t, nil)
	require.NoError(t, kv.Set(ctx, "k", "v"))
	assert.Empty(t, ctx.ResponseHeaders())
}

// A server answering Busy from its handler is throttled: after a busy
// second its limit collapses, after two it is below one request, and the
// client's calls all go to the other peers.
func TestBusyServerIsThrottledAndTrafficMoves(t *testing.T) {
	a, _ := startServer(t)
	b, _ := startServer(t)
	bad, _ := startServer(t)
	c, clk, kv := startClient(t, a, b, bad)
	limit := func() float64 {
		for _, p := range c.Peers(service) {
			if p.HostPort == bad.hostPort {
				return p.Limit
			}
		}
		t.Fatal("the busy peer is missing")
		return 0
	}
	send := func(n int) (ok, busy int) {
		for i := 0; i < n; i++ {
			_, err := kv.HealthCheck(ctxTimeout(t, nil))
			var ce *channel.CallError
			switch {
			case err == nil:
				ok++
			case errors.As(err, &ce) && ce.Code == codes.Busy:
				assert.Equal(t, bad.hostPort, ce.Peer)
				assert.Equal(t, "test server is busy", ce.Message)
				busy++
			default:
				t.Fatalf("call %d: %v", i, err)
			}
		}
		return ok, busy
	}

	bad.busy.Store(true)
	_, busy1 := send(150) // second 1: no limit yet, the busy peer gets its share
	require.Greater(t, busy1, 10, "the busy peer took no traffic in second 1")
	clk.Add(time.Second)
	assert.Equal(t, 38, int(limit()), "9999999*4/2^20 after a busy window")
	_, busy2 := send(150)
	assert.LessOrEqual(t, busy2, 38)
	clk.Add(time.Second)
	require.Less(t, limit(), 1.0, "limit after two busy windows")

	before := bad.received.Load()
	ok, busy3 := send(200) // second 3: every call goes to a or b
	assert.Equal(t, 200, ok)
	assert.Zero(t, busy3)
	assert.Equal(t, before, bad.received.Load(), "a request reached the throttled peer")
	assert.Greater(t, a.received.Load(), int64(100))
	assert.Greater(t, b.received.Load(), int64(100))
}

func TestEveryPeerThrottledFailsLocally(t *testing.T) {
	s, _ := startServer(t)
	s.busy.Store(true)
	_, clk, kv := startClient(t, s)
	for sec := 0; sec < 2; sec++ {
		for i := 0; i < 40; i++ {
			_, err := kv.HealthCheck(ctxTimeout(t, nil))
			require.Error(t, err)
		}
		clk.Add(time.Second)
	}
	before := s.received.Load()
	_, err := kv.HealthCheck(ctxTimeout(t, nil))
	require.ErrorIs(t, err, channel.ErrThrottled)
	assert.Equal(t, before, s.received.Load())
}

// The client checks what it reads as tchannel-go's does: a response that is
// not the expected struct, or has bytes after it, is an error.
func TestMalformedResponses(t *testing.T) {
	for _, tc := range []struct {
		name string
		arg3 []byte
		want string
	}{
		{"not a struct", []byte{0x0b}, "cannot decode the response"},
		// An empty result struct (field stop) followed by a stray byte.
		{"trailing bytes", []byte{0x00, 0x07}, "1 bytes after its struct"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := channel.New(service)
			require.NoError(t, err)
			t.Cleanup(ch.Close)
			require.NoError(t, ch.RegisterRaw("KeyValue::HealthCheck", func(context.Context, *channel.RawRequest) (*channel.RawResponse, error) {
				return &channel.RawResponse{Arg2: []byte{0, 0}, Arg3: tc.arg3}, nil
			}))
			require.NoError(t, ch.ListenAndServe("127.0.0.1:0"))
			_, _, kv := startClient(t, &kvServer{hostPort: ch.HostPort()})
			_, err = kv.HealthCheck(ctxTimeout(t, nil))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestNilChannelIsAnErrorNotAPanic(t *testing.T) {
	ok, err := NewClient(nil, service).Call(ctxTimeout(t, nil), "KeyValue", "Get", &keyvalue.KeyValueGetArgs{}, &keyvalue.KeyValueGetResult{})
	assert.False(t, ok)
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "no channel"), err.Error())
}

func TestNoPeers(t *testing.T) {
	_, _, kv := startClient(t)
	_, err := kv.Get(ctxTimeout(t, nil), "k")
	assert.ErrorIs(t, err, channel.ErrNoPeers)
}

// The cache of method names returns the same names as concatenation, and
// stops growing at its bound.
func TestMethodNameCache(t *testing.T) {
	c := NewClient(nil, service).(*client)
	assert.Equal(t, "KeyValue::Get", c.methodName("KeyValue", "Get"))
	assert.Equal(t, "KeyValue::Get", c.methodName("KeyValue", "Get"))
	assert.Equal(t, "Admin::clearAll", c.methodName("Admin", "clearAll"))
	for i := 0; i < 2*maxMethodNames; i++ {
		name := strings.Repeat("m", i+1)
		assert.Equal(t, "S::"+name, c.methodName("S", name))
	}
	assert.Len(t, *c.names.Load(), maxMethodNames)
}

func TestPreviousAttempts(t *testing.T) {
	for _, tc := range []struct {
		headers map[string]string
		want    int
	}{
		{nil, 0},
		{map[string]string{"previous-rpc-attempts": "1"}, 1},
		{map[string]string{"previous-rpc-attempts": "4"}, 4},
		{map[string]string{"previous-rpc-attempts": "-1"}, 0},
		{map[string]string{"previous-rpc-attempts": "x"}, 0},
	} {
		assert.Equal(t, tc.want, PreviousAttempts(tthrift.WithHeaders(context.Background(), tc.headers)), "%v", tc.headers)
	}
}
