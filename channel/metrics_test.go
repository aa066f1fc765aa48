package channel

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-rpc/sluice/serviceconfig"
	"github.com/sluice-rpc/sluice/stats"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
)

// seriesCount returns how many series a test scope holds, and how many of
// them have a method tag other than the ones listed.
func seriesCount(scope tally.TestScope, methods ...string) (all, others int) {
	snap := scope.Snapshot()
	var ids []string
	for id := range snap.Counters() {
		ids = append(ids, id)
	}
	for id := range snap.Gauges() {
		ids = append(ids, id)
	}
	for id := range snap.Timers() {
		ids = append(ids, id)
	}
	for id := range snap.Histograms() {
		ids = append(ids, id)
	}
outer:
	for _, id := range ids {
		all++
		for _, m := range methods {
			if strings.Contains(id, "method="+m+",") {
				continue outer
			}
		}
		if strings.Contains(id, "method=") {
			others++
		}
	}
	return all, others
}

// Calling 1,000 distinct methods that no service config and no WithMethods
// names adds no series: they share the service's stats.MethodOther series, on
// the client; on the server, unregistered methods make none at all.
func TestUnknownMethodsAddNoSeries(t *testing.T) {
	serverScope := tally.NewTestScope("", nil)
	s := startServer(t, WithScope(serverScope))
	cfg, err := serviceconfig.Parse([]byte(`{"methodConfig":[{"name":[{"service":"kv","method":"get"}],"timeout":"1s"}]}`))
	require.NoError(t, err)
	scope := tally.NewTestScope("", nil)
	c, err := New("client", WithScope(scope), WithServiceConfig(cfg), WithMethods("kv", "echo"))
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.AddPeer("kv", s.ch.HostPort()))

	// The named methods: series of their own.
	_, err = c.CallRaw(ctxTimeout(t), "kv", "echo", nil, nil)
	require.NoError(t, err)
	var out echoRes
	require.NoError(t, c.CallJSON(ctxTimeout(t), "kv", "get", &echoReq{Key: "k"}, &out))
	cn := scope.Snapshot().Counters()
	assert.EqualValues(t, 1, cn["calls+method=echo,service=kv"].Value(), "WithMethods names echo")
	assert.EqualValues(t, 1, cn["calls+method=get,service=kv"].Value(), "the service config names get")

	_, err = c.CallRaw(ctxTimeout(t), "kv", "unknown-0", nil, nil)
	require.Error(t, err) // the server has no such method: BAD_REQUEST
	before, _ := seriesCount(scope)
	serverBefore, _ := seriesCount(serverScope)
	for i := 1; i < 1000; i++ {
		_, err := c.CallRaw(ctxTimeout(t), "kv", fmt.Sprintf("unknown-%d", i), nil, nil)
		require.Error(t, err)
	}
	after, others := seriesCount(scope, "echo", "get", stats.MethodOther)
	serverAfter, _ := seriesCount(serverScope)
	assert.Equal(t, before, after, "client series before and after 999 more unknown methods")
	assert.Zero(t, others, "series of methods nobody named")
	assert.Equal(t, serverBefore, serverAfter, "server series before and after 999 more unknown methods")
	assert.EqualValues(t, 1000, scope.Snapshot().Counters()["calls+method="+stats.MethodOther+",service=kv"].Value())
}
