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
