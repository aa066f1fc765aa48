package thrift

import (
	"context"
	"time"

	"testing"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/serviceconfig"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uber/tchannel-go/examples/keyvalue/gen-go/keyvalue"
)

// retryConfig retries BUSY and UNEXPECTED up to 3 attempts, without retry
// throttling so that every busy answer may be retried.
const retryConfig = `{"methodConfig": [{
	"name": [{"service": "keyvalue"}],
	"retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.001s", "maxBackoff": "0.01s",
		"backoffMultiplier": 2, "retryableStatusCodes": ["BUSY", "UNEXPECTED"]}
}]}`

// startRetryClient returns a generated client on a Sluice channel (wall
// clock: backoff timers must fire) with retryConfig applied.
func startRetryClient(t *testing.T, servers ...*kvServer) keyvalue.TChanKeyValue {
	t.Helper()
	cfg, err := serviceconfig.Parse([]byte(retryConfig))
	require.NoError(t, err)
	ch, err := channel.New("kv-retry-client", channel.WithServiceConfig(cfg))
	require.NoError(t, err)
	t.Cleanup(ch.Close)
	for _, s := range servers {
		require.NoError(t, ch.AddPeer(service, s.hostPort))
	}
	// Retries go to distinct peers among those ready: have them all ready.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, ch.Connect(ctx, service))
	return keyvalue.NewTChanKeyValueClient(NewClient(ch, service))
}

// Of two servers one answers Busy: every call succeeds, each busy answer
// is retried on the other peer, and that retry carries
// previous-rpc-attempts: 1, which the handler reads with PreviousAttempts.
func TestBusyIsRetriedOnAnotherPeerWithPreviousAttempts(t *testing.T) {
	good, _ := startServer(t)
	bad, _ := startServer(t)
	bad.busy.Store(true)
	kv := startRetryClient(t, good, bad)

	const calls = 40
	for i := 0; i < calls; i++ {
		v, err := kv.HealthCheck(ctxTimeout(t, nil))
		require.NoError(t, err, "call %d", i)
		assert.Equal(t, "OK", v)
	}
	busy := int(bad.received.Load())
	require.Greater(t, busy, 0, "no call tried the busy peer first")
	assert.EqualValues(t, calls, good.received.Load(), "the good peer saw every call once")
	for _, n := range bad.previousAttempts() {
		assert.Zero(t, n, "a retry went back to the busy peer")
	}
	retried := 0
	for _, n := range good.previousAttempts() {
		require.LessOrEqual(t, n, 1)
		retried += n
	}
	assert.Equal(t, busy, retried, "each busy answer is followed by one retry with previous-rpc-attempts: 1")
}

// A declared exception is a successful transport: never retried, even by a
// policy that retries every code the handler could fail with.
func TestDeclaredExceptionNotRetriedUnderRetryPolicy(t *testing.T) {
	a, _ := startServer(t)
	b, _ := startServer(t)
	kv := startRetryClient(t, a, b)
	_, err := kv.Get(ctxTimeout(t, nil), "missing")
	var nf *keyvalue.KeyNotFound
	require.ErrorAs(t, err, &nf)
	assert.EqualValues(t, 1, a.received.Load()+b.received.Load())
}
