package channel

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-rpc/sluice/codes"
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

// methodTags returns the method tags of service's series in a test scope.
func methodTags(scope tally.TestScope, service string) map[string]bool {
	tags := map[string]bool{}
	snap := scope.Snapshot()
	add := func(t map[string]string) {
		if t[stats.TagService] == service && t[stats.TagMethod] != "" {
			tags[t[stats.TagMethod]] = true
		}
	}
	for _, c := range snap.Counters() {
		add(c.Tags())
	}
	for _, h := range snap.Histograms() {
		add(h.Tags())
	}
	return tags
}

// Calling 1,000 distinct methods that no service config and no WithMethods
// names adds a bounded number of series: the first MaxMethodSeries get
// series of their own, the others share the service's stats.MethodOther
// series, on the client; on the server, unregistered methods make none at
// all.
func TestUnknownMethodsAddNoSeries(t *testing.T) {
	serverScope := tally.NewTestScope("", nil)
	s := startServer(t, WithScope(serverScope))
	cfg, err := serviceconfig.Parse([]byte(`{"methodConfig":[{"name":[{"service":"kv","method":"get"}],"timeout":"1s"}]}`))
	if err != nil {
		t.Fatalf("serviceconfig.Parse: %v", err)
	}
	scope := tally.NewTestScope("", nil)
	c, err := New("client", WithScope(scope), WithServiceConfig(cfg))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer c.Close()
	if err := to(c, "kv", WithMethods("echo")).AddPeer(s.ch.HostPort()); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}

	// The named methods: series of their own.
	_, err = to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil)
	if err != nil {
		t.Fatalf("CallRaw: %v", err)
	}
	var out echoRes
	if err := to(c, "kv").CallJSON(ctxTimeout(t), "get", &echoReq{Key: "k"}, &out); err != nil {
		t.Fatalf("CallJSON: %v", err)
	}
	cn := scope.Snapshot().Counters()
	if got := cn["calls+method=echo,service=kv"].Value(); got != 1 {
		t.Errorf("WithMethods names echo: got %v, want %v", got, 1)
	}
	if got := cn["calls+method=get,service=kv"].Value(); got != 1 {
		t.Errorf("the service config names get: got %v, want %v", got, 1)
	}

	// The first MaxMethodSeries unknown methods, and one more: the server
	// has no such method, each call fails BAD_REQUEST.
	for i := 0; i <= MaxMethodSeries; i++ {
		if _, err := to(c, "kv").CallRaw(ctxTimeout(t), fmt.Sprintf("unknown-%d", i), nil, nil); err == nil {
			t.Fatal("CallRaw succeeded, want an error")
		}
	}
	before, _ := seriesCount(scope)
	serverBefore, _ := seriesCount(serverScope)
	for i := MaxMethodSeries + 1; i < 1000; i++ {
		_, err := to(c, "kv").CallRaw(ctxTimeout(t), fmt.Sprintf("unknown-%d", i), nil, nil)
		if err == nil {
			t.Fatal("CallRaw succeeded, want an error")
		}
	}
	after, _ := seriesCount(scope)
	serverAfter, _ := seriesCount(serverScope)
	if after != before {
		t.Errorf("client series before and after %d more unknown methods: got %v, want %v", 999-MaxMethodSeries, after, before)
	}
	if serverAfter != serverBefore {
		t.Errorf("server series before and after %d more unknown methods: got %v, want %v", 999-MaxMethodSeries, serverAfter, serverBefore)
	}
	tags := methodTags(scope, "kv")
	if !tags["echo"] || !tags["get"] || !tags[stats.MethodOther] {
		t.Errorf("method tags %v lack echo, get or %s", tags, stats.MethodOther)
	}
	if got, want := len(tags), MaxMethodSeries+3; got != want {
		t.Errorf("kv's method tags: got %d, want %d (echo, get, %s and the first %d unknown methods)", got, want, stats.MethodOther, MaxMethodSeries)
	}
	for i := 0; i < MaxMethodSeries; i++ {
		if m := fmt.Sprintf("unknown-%d", i); !tags[m] {
			t.Errorf("%s, among the first %d methods called, has no series of its own", m, MaxMethodSeries)
		}
	}
	if got := scope.Snapshot().Counters()["calls+method="+stats.MethodOther+",service=kv"].Value(); got != 1000-MaxMethodSeries {
		t.Errorf("calls counted under %s: got %v, want %v", stats.MethodOther, got, 1000-MaxMethodSeries)
	}

	// A method WithMethods names keeps its own series after the bound.
	c2, err := New("client", WithScope(tally.NewTestScope("", nil)))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer c2.Close()
	if err := to(c2, "kv", WithMethods("late")).AddPeer(s.ch.HostPort()); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}
	for i := 0; i <= MaxMethodSeries; i++ {
		_, _ = to(c2, "kv").CallRaw(ctxTimeout(t), fmt.Sprintf("unknown-%d", i), nil, nil)
	}
	_, _ = to(c2, "kv").CallRaw(ctxTimeout(t), "late", nil, nil)
	if tags := methodTags(c2.rec.Scope().(tally.TestScope), "kv"); !tags["late"] || len(tags) != MaxMethodSeries+2 {
		t.Errorf("with a pinned method called after the bound: %d method tags, late among them: %v; want %d", len(tags), tags["late"], MaxMethodSeries+2)
	}
}

// A client gives each method it calls, named nowhere, a series of its own
// (under the bound): three methods, three series, nothing under
// stats.MethodOther.
func TestClientMethodsGetTheirOwnSeries(t *testing.T) {
	s := startServer(t)
	scope := tally.NewTestScope("", nil)
	c, err := New("client", WithScope(scope))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer c.Close()
	if err := to(c, "kv").AddPeer(s.ch.HostPort()); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}
	if _, err := to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil); err != nil {
		t.Fatalf("CallRaw: %v", err)
	}
	if err := to(c, "kv").CallJSON(ctxTimeout(t), "get", &echoReq{Key: "k"}, nil); err != nil {
		t.Fatalf("CallJSON: %v", err)
	}
	_, _ = to(c, "kv").CallRaw(ctxTimeout(t), "KeyValue::Get", nil, nil) // not served: BAD_REQUEST
	cn := scope.Snapshot().Counters()
	for _, m := range []string{"echo", "get", "KeyValue::Get"} {
		if got := cn["calls+method="+m+",service=kv"]; got == nil || got.Value() != 1 {
			t.Errorf("calls to %s have no series of their own", m)
		}
	}
	if got := cn["calls+method="+stats.MethodOther+",service=kv"]; got != nil {
		t.Errorf("%d calls counted under %s, want none", got.Value(), stats.MethodOther)
	}
	if got := cn["call.errors+code=BAD_REQUEST,method=KeyValue::Get,service=kv"]; got == nil || got.Value() != 1 {
		t.Errorf("the failed call's error is not counted under its own method")
	}
}

// Only the services a Channel has Clients for get series: a call
// middleware that sends calls on to 50 service names the Channel has no
// Client for, with 20 methods each, fails them NO_PEERS and makes no
// series of those names. A Client with no peers yet gives its methods
// their own series from the first call.
func TestServicesWithoutClientsAddNoSeries(t *testing.T) {
	s := startServer(t)
	scope := tally.NewTestScope("", nil)
	reroute := func(ctx context.Context, service, method string, req *Request, next Invoker) (*Response, error) {
		if to, ok := ctx.Value(rerouteKey{}).(string); ok {
			service = to
		}
		return next(ctx, service, method, req)
	}
	c, err := New("client", WithScope(scope), WithCallMiddleware(reroute))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer c.Close()
	kv := to(c, "kv")
	for i := range 50 {
		svc := fmt.Sprintf("nobody-%d", i)
		ctx := context.WithValue(ctxTimeout(t), rerouteKey{}, svc)
		for j := range 20 {
			_, err := kv.CallRaw(ctx, fmt.Sprintf("m-%d", j), nil, nil)
			var ce *CallError
			if !errors.As(err, &ce) || ce.Code != codes.NoPeers || ce.Service != svc {
				t.Fatalf("a call rerouted to %s: %v, want NO_PEERS naming it", svc, err)
			}
		}
		if tags := methodTags(scope, svc); len(tags) != 0 {
			t.Fatalf("%s: method tags %v, want none", svc, tags)
		}
	}

	if _, err := kv.CallRaw(ctxTimeout(t), "echo", nil, nil); err == nil {
		t.Fatal("a call before AddPeer succeeded")
	}
	if err := kv.AddPeer(s.ch.HostPort()); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}
	if _, err := kv.CallRaw(ctxTimeout(t), "echo", nil, nil); err != nil {
		t.Fatalf("CallRaw after AddPeer: %v", err)
	}
	if got := scope.Snapshot().Counters()["calls+method=echo,service=kv"]; got == nil || got.Value() != 2 {
		t.Errorf("echo: got %v, want its own series with 2 calls (one NO_PEERS, one ok)", got)
	}
}

// rerouteKey carries the service a test's call middleware sends a call to.
type rerouteKey struct{}
