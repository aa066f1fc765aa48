package thrift

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/sluice-rpc/sluice/stats"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/examples/keyvalue/gen-go/keyvalue"
	"github.com/uber/tchannel-go/raw"
	athrift "github.com/uber/tchannel-go/thirdparty/github.com/apache/thrift/lib/go/thrift"
	tthrift "github.com/uber/tchannel-go/thrift"
	"github.com/uber/tchannel-go/thrift/gen-go/meta"
)

// Handlers registered through NewServer sit behind the channel's guard:
// requests are counted, and shedding answers Busy before the handler runs.
func TestServerIsBehindTheGuard(t *testing.T) {
	scope := tally.NewTestScope("", nil)
	// One request admitted, the next token in 1000 s: the second is shed.
	s, _ := startServer(t, channel.WithScope(scope), channel.WithShedding(channel.ShedConfig{MaxRPS: 0.001, Burst: 1}))
	_, _, kv := startClient(t, s)

	_, err := kv.HealthCheck(ctxTimeout(t, nil))
	require.NoError(t, err)
	_, err = kv.HealthCheck(ctxTimeout(t, nil))
	var ce *channel.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, codes.Busy, ce.Code)
	assert.EqualValues(t, 1, s.received.Load(), "the shed request reached the handler")

	snap := scope.Snapshot().Counters()
	assert.EqualValues(t, 2, snap[stats.ServerRequests+"+"].Value())
	assert.EqualValues(t, 1, snap[stats.ServerShed+"+"].Value())
}

// NewServer registers tchannel-go's Thrift meta service (health checks)
// under the channel's own service name, and a Sluice client calls it.
func TestServerAnswersMetaHealth(t *testing.T) {
	s, _ := startServer(t)
	c, _, _ := startClient(t, s)
	var res meta.MetaHealthResult
	ok, err := NewClient(c, service).Call(ctxTimeout(t, nil), "Meta", "health", &meta.MetaHealthArgs{Hr: &meta.HealthRequest{}}, &res)
	require.NoError(t, err)
	require.True(t, ok)
	require.NotNil(t, res.Success)
	assert.True(t, res.Success.Ok)
}

type pushbackHandler struct {
	keyvalue.TChanKeyValue
	p retry.Pushback
}

func (h pushbackHandler) Set(ctx tthrift.Context, key, value string) error {
	ctx.SetResponseHeaders(map[string]string{"kept": "yes"})
	SetPushback(ctx, h.p)
	return nil
}

func TestSetPushback(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    retry.Pushback
		want map[string]string
	}{
		{"delay", retry.PushbackAfter(150 * time.Millisecond), map[string]string{"kept": "yes", retry.PushbackHeader: "150"}},
		{"stop", retry.PushbackStopped(), map[string]string{"kept": "yes", retry.PushbackHeader: "-1"}},
		{"none", retry.Pushback{}, map[string]string{"kept": "yes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := channel.New(service)
			require.NoError(t, err)
			t.Cleanup(ch.Close)
			NewServer(ch).Register(keyvalue.NewTChanKeyValueServer(pushbackHandler{p: tc.p}))
			require.NoError(t, ch.ListenAndServe("127.0.0.1:0"))
			_, _, kv := startClient(t, &kvServer{hostPort: ch.HostPort()})
			ctx := ctxTimeout(t, nil)
			require.NoError(t, kv.Set(ctx, "k", "v"))
			assert.Equal(t, tc.want, ctx.ResponseHeaders())
		})
	}
}

func TestSetPushbackKeepsTheHandlersMap(t *testing.T) {
	ctx := tthrift.WithHeaders(context.Background(), nil)
	mine := map[string]string{"a": "1", retry.PushbackHeader: "5"}
	ctx.SetResponseHeaders(mine)
	SetPushback(ctx, retry.PushbackAfter(time.Second))
	assert.Equal(t, "1000", ctx.ResponseHeaders()[retry.PushbackHeader])
	assert.Equal(t, "5", mine[retry.PushbackHeader], "SetPushback modified the handler's map")
	SetPushback(ctx, retry.Pushback{})
	_, ok := ctx.ResponseHeaders()[retry.PushbackHeader]
	assert.False(t, ok)
	assert.Equal(t, "1", ctx.ResponseHeaders()["a"])
}

// A handler error that is neither a declared exception nor a system error
// answers Unexpected, as on tchannel-go.
func TestHandlerErrorIsUnexpected(t *testing.T) {
	ch, err := channel.New(service)
	require.NoError(t, err)
	t.Cleanup(ch.Close)
	NewServer(ch).Register(keyvalue.NewTChanKeyValueServer(failingHandler{}))
	require.NoError(t, ch.ListenAndServe("127.0.0.1:0"))
	_, _, kv := startClient(t, &kvServer{hostPort: ch.HostPort()})
	_, err = kv.Get(ctxTimeout(t, nil), "k")
	var ce *channel.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, codes.Unexpected, ce.Code)
}

// A system error the handler returns wrapped answers with its code, as for
// raw and JSON handlers (tchannel-go's Thrift server sees only an unwrapped
// one, and would answer UNEXPECTED).
func TestHandlerWrappedSystemErrorKeepsItsCode(t *testing.T) {
	ch, err := channel.New(service)
	require.NoError(t, err)
	t.Cleanup(ch.Close)
	NewServer(ch).Register(keyvalue.NewTChanKeyValueServer(wrappingHandler{}))
	require.NoError(t, ch.ListenAndServe("127.0.0.1:0"))
	_, _, kv := startClient(t, &kvServer{hostPort: ch.HostPort()})
	_, err = kv.Get(ctxTimeout(t, nil), "k")
	var ce *channel.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, codes.BadRequest, ce.Code)
	assert.Equal(t, "key k: no such shard", ce.Message)
}

type wrappingHandler struct{ keyvalue.TChanKeyValue }

func (wrappingHandler) Get(_ tthrift.Context, key string) (string, error) {
	return "", fmt.Errorf("lookup: %w", tchannel.NewSystemError(tchannel.ErrCodeBadRequest, "key %s: no such shard", key))
}

type failingHandler struct{ keyvalue.TChanKeyValue }

func (failingHandler) Get(tthrift.Context, string) (string, error) {
	return "", errors.New("disk on fire")
}

// plainThriftCall calls method of the Thrift server at hp through a plain
// tchannel-go channel with arg3 as it is (and no headers).
func plainThriftCall(t *testing.T, hp, method string, arg3 []byte) error {
	t.Helper()
	ch, err := tchannel.NewChannel("plain-client", nil)
	require.NoError(t, err)
	t.Cleanup(func() { closePlain(t, ch) })
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Limit)
	defer cancel()
	call, err := ch.BeginCall(ctx, hp, service, method, &tchannel.CallOptions{Format: tchannel.Thrift})
	require.NoError(t, err)
	_, _, _, err = raw.WriteArgs(call, []byte{0, 0}, arg3)
	return err
}

// A request body over the Channel's limit, or one declaring a string or a
// container longer than the limit, is answered BAD_REQUEST saying the
// limit, before the handler runs and before anything is allocated for what
// it declares; one at the limit is served.
func TestServerBoundsRequestBodies(t *testing.T) {
	const limit = 1024
	// KeyValue::Set's arguments: field 1 (key) and 2 (value), strings.
	str := func(id byte, n uint32, body string) []byte {
		return append([]byte{byte(athrift.STRING), 0, id, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, body...)
	}
	setArgs := func(value string) []byte {
		b := append(str(1, 1, "k"), str(2, uint32(len(value)), value)...)
		return append(b, byte(athrift.STOP))
	}
	for _, tc := range []struct {
		name string
		arg3 []byte
	}{
		{"long value", setArgs(strings.Repeat("v", 64<<10))},
		// 300 unknown i32 fields, skipped: no length declares the excess.
		{"many fields", append(bytes.Repeat([]byte{byte(athrift.I32), 0, 9, 0, 0, 0, 1}, 300), byte(athrift.STOP))},
		{"declared string", str(1, 1<<31-1, "only a few bytes")},
		// A list where a string is expected is skipped, through the limit.
		{"declared list", []byte{byte(athrift.LIST), 0, 1, byte(athrift.I32), 0x7f, 0xff, 0xff, 0xff}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scope := tally.NewTestScope("", nil)
			s, _ := startServer(t, channel.WithMaxRequestSize(limit), channel.WithScope(scope))
			err := plainThriftCall(t, s.hostPort, "KeyValue::Set", tc.arg3)
			var se tchannel.SystemError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tchannel.ErrCodeBadRequest, se.Code(), se.Message())
			assert.Contains(t, se.Message(), "1024 bytes")
			assert.Zero(t, s.received.Load(), "the handler ran")
			oversize := scope.Snapshot().Counters()[stats.ServerOversize+"+"]
			require.NotNil(t, oversize, "nothing was counted on %s", stats.ServerOversize)
			assert.EqualValues(t, 1, oversize.Value())
		})
	}
	t.Run("at the limit", func(t *testing.T) {
		s, _ := startServer(t, channel.WithMaxRequestSize(limit))
		arg3 := setArgs(strings.Repeat("v", limit-len(setArgs(""))))
		require.Len(t, arg3, limit)
		require.NoError(t, plainThriftCall(t, s.hostPort, "KeyValue::Set", arg3))
		assert.EqualValues(t, 1, s.received.Load())
	})
}
