package channel

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-rpc/sluice/serviceconfig"
	"github.com/sluice-rpc/sluice/stats"
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
	if err != nil {
		t.Fatalf("serviceconfig.Parse: %v", err)
	}
	scope := tally.NewTestScope("", nil)
	c, err := New("client", WithScope(scope), WithServiceConfig(cfg), WithMethods("kv", "echo"))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer c.Close()
	if err := c.AddPeer("kv", s.ch.HostPort()); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}

	// The named methods: series of their own.
	_, err = c.CallRaw(ctxTimeout(t), "kv", "echo", nil, nil)
	if err != nil {
		t.Fatalf("CallRaw: %v", err)
	}
	var out echoRes
	if err := c.CallJSON(ctxTimeout(t), "kv", "get", &echoReq{Key: "k"}, &out); err != nil {
		t.Fatalf("CallJSON: %v", err)
	}
	cn := scope.Snapshot().Counters()
	if got := cn["calls+method=echo,service=kv"].Value(); got != 1 {
		t.Errorf("WithMethods names echo: got %v, want %v", got, 1)
	}
	if got := cn["calls+method=get,service=kv"].Value(); got != 1 {
		t.Errorf("the service config names get: got %v, want %v", got, 1)
	}

	_, err = c.CallRaw(ctxTimeout(t), "kv", "unknown-0", nil, nil)
	if err == nil {
		t.Fatal("CallRaw succeeded, want an error")
	} // the server has no such method: BAD_REQUEST
	before, _ := seriesCount(scope)
	serverBefore, _ := seriesCount(serverScope)
	for i := 1; i < 1000; i++ {
		_, err := c.CallRaw(ctxTimeout(t), "kv", fmt.Sprintf("unknown-%d", i), nil, nil)
		if err == nil {
			t.Fatal("CallRaw succeeded, want an error")
		}
	}
	after, others := seriesCount(scope, "echo", "get", stats.MethodOther)
	serverAfter, _ := seriesCount(serverScope)
	if after != before {
		t.Errorf("client series before and after 999 more unknown methods: got %v, want %v", after, before)
	}
	if others != 0 {
		t.Errorf("series of methods nobody named: got %v, want 0", others)
	}
	if serverAfter != serverBefore {
		t.Errorf("server series before and after 999 more unknown methods: got %v, want %v", serverAfter, serverBefore)
	}
	if got := scope.Snapshot().Counters()["calls+method="+stats.MethodOther+",service=kv"].Value(); got != 1000 {
		t.Errorf("got %v, want %v", got, 1000)
	}
}
