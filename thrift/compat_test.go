package thrift

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uber/tchannel-go/examples/keyvalue/gen-go/keyvalue"
)

// exercise runs the same conversation with any generated client: a call
// that succeeds, headers both ways, and a declared exception.
func exercise(t *testing.T, kv keyvalue.TChanKeyValue, s *kvServer) {
	t.Helper()
	ctx := ctxTimeout(t, map[string]string{"who": "compat"})
	require.NoError(t, kv.Set(ctx, "key", "value"))
	assert.Equal(t, map[string]string{"seen": "compat", "server": s.hostPort}, ctx.ResponseHeaders())

	v, err := kv.Get(ctxTimeout(t, nil), "key")
	require.NoError(t, err)
	assert.Equal(t, "value", v)

	_, err = kv.Get(ctxTimeout(t, nil), "nokey")
	var nf *keyvalue.KeyNotFound
	require.ErrorAs(t, err, &nf)
	assert.Equal(t, "nokey", nf.Key)

	err = kv.Set(ctxTimeout(t, nil), "9", "v")
	var ik *keyvalue.InvalidKey
	require.ErrorAs(t, err, &ik)

	assert.EqualValues(t, 4, s.received.Load())
}

// A Sluice Thrift client talks to tchannel-go's own Thrift server.
func TestSluiceClientPlainServer(t *testing.T) {
	s := startPlainServer(t)
	_, _, kv := startClient(t, s)
	exercise(t, kv, s)
}

// tchannel-go's own Thrift client talks to a Sluice Thrift server.
func TestPlainClientSluiceServer(t *testing.T) {
	s, _ := startServer(t)
	exercise(t, startPlainClient(t, s.hostPort), s)
}

// The reference: tchannel-go on both sides has the same conversation.
func TestPlainClientPlainServer(t *testing.T) {
	s := startPlainServer(t)
	exercise(t, startPlainClient(t, s.hostPort), s)
}
