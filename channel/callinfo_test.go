package channel

import (
	"fmt"
	"testing"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// CallJSON and CallRaw report a call's attempts and peers through
// ReportCallInfo, on success and on failure.
func TestReportCallInfo(t *testing.T) {
	f := startFleet(t, 3, busyFirst(2))
	c, _ := retryClient(t, f, mustConfig(t, fmt.Sprintf(retryBusy, 3, "0.001s", "")))
	var info CallInfo
	var out echoRes
	require.NoError(t, c.CallJSON(ctxTimeout(t), "kv", "get", &echoReq{Key: "k"}, &out, ReportCallInfo(&info)))
	assert.Equal(t, 3, info.Attempts)
	require.Len(t, info.Peers, 3)
	assert.Equal(t, out.Server, info.Peer, "the peer that answered")
	assert.Equal(t, info.Peers[2], info.Peer)

	s := startServer(t)
	s.busy.Store(true)
	c2, _, _ := startClient(t, s)
	info = CallInfo{Attempts: -1}
	_, err := c2.CallRaw(ctxTimeout(t), "kv", "echo", nil, nil, ReportCallInfo(&info))
	require.Error(t, err)
	assert.Equal(t, CallInfo{Attempts: 1, Peer: s.ch.HostPort(), Peers: []string{s.ch.HostPort()}}, info)
}

// CallRaw and CallJSON run in recycled call states: what a call returned
// or reported must not change when later calls reuse its state. A
// CallInfo's and a CallError's Peers are the state's own slice, so those
// states are never recycled; a response's arguments are not the state's.
func TestRecycledCallStatesKeepResults(t *testing.T) {
	a, b := startServer(t), startServer(t)
	c, _, _ := startClient(t, a, b)
	ctx := ctxTimeout(t)

	res, err := c.CallRaw(ctx, "kv", "echo", []byte("h1"), []byte("first"))
	require.NoError(t, err)
	var info CallInfo
	_, err = c.CallRaw(ctx, "kv", "echo", nil, []byte("x"), ReportCallInfo(&info))
	require.NoError(t, err)
	infoPeers := append([]string(nil), info.Peers...)
	require.Len(t, infoPeers, 1)
	assert.Contains(t, []string{a.ch.HostPort(), b.ch.HostPort()}, infoPeers[0])
	a.busy.Store(true)
	b.busy.Store(true)
	_, failed := c.CallRaw(ctx, "kv", "echo", nil, []byte("busy"))
	var ce *CallError
	require.ErrorAs(t, failed, &ce)
	errPeers := append([]string(nil), ce.Peers...)
	require.Len(t, errPeers, 1)
	assert.Contains(t, []string{a.ch.HostPort(), b.ch.HostPort()}, errPeers[0])
	a.busy.Store(false)
	b.busy.Store(false)

	var out echoRes
	for i := 0; i < 50; i++ { // reuse the states, on both peers
		_, err := c.CallRaw(ctx, "kv", "echo", []byte("h2"), []byte(fmt.Sprint("later ", i)))
		require.NoError(t, err)
		require.NoError(t, c.CallJSON(ctx, "kv", "get", &echoReq{Key: fmt.Sprint(i)}, &out))
		require.Equal(t, fmt.Sprint(i), out.Key)
	}
	assert.Equal(t, "h1", string(res.Arg2))
	assert.Equal(t, "first", string(res.Arg3))
	assert.Equal(t, infoPeers, info.Peers)
	assert.Equal(t, errPeers, ce.Peers)
}

// Every failure has a code, local ones included: a request that cannot be
// encoded is BAD_REQUEST, a call on a closed channel CLOSED; neither sends
// anything.
func TestEveryFailureHasACode(t *testing.T) {
	s := startServer(t)
	c, _, _ := startClient(t, s)
	var info CallInfo
	err := c.CallJSON(ctxTimeout(t), "kv", "get", map[string]any{"f": func() {}}, nil, ReportCallInfo(&info))
	var ce *CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, codes.BadRequest, ce.Code)
	assert.Contains(t, ce.Error(), "cannot encode the request as JSON")
	assert.Zero(t, info.Attempts)

	c.Close()
	_, err = c.CallRaw(ctxTimeout(t), "kv", "echo", nil, nil)
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, codes.Closed, ce.Code)
	assert.True(t, ce.Code.IsLocal())
	assert.ErrorIs(t, err, ErrClosed)
	assert.Equal(t, "CLOSED", ce.CodeName())
	assert.Zero(t, s.received.Load())
}
