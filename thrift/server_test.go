package thrift

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/sluice-rpc/sluice/stats"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	"github.com/uber/tchannel-go/examples/keyvalue/gen-go/keyvalue"
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

type failingHandler struct{ keyvalue.TChanKeyValue }

func (failingHandler) Get(tthrift.Context, string) (string, error) {
	return "", errors.New("disk on fire")
}
