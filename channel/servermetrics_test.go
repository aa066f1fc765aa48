package channel

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/stats"
	"github.com/uber-go/tally/v4"
	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/raw"
)

// serverCalls is the sum of the server.calls series of scope, all
// methods and callers together.
func serverCalls(scope tally.TestScope) int64 {
	var n int64
	for _, c := range scope.Snapshot().Counters() {
		if c.Name() == stats.ServerCalls {
			n += c.Value()
		}
	}
	return n
}

// serverKey is the key of a kv server metric in a tally test scope's
// snapshot: name, then the tags sorted by key.
func serverKey(name string, tags map[string]string) string {
	ks := slices.Sorted(maps.Keys(tags))
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = k + "=" + tags[k]
	}
	return name + "+" + strings.Join(parts, ",")
}

// mc is the tags of a server metric of kv's method from caller, and more.
func mc(method, caller string, more ...string) map[string]string {
	tags := map[string]string{stats.TagService: "kv", stats.TagMethod: method, stats.TagCaller: caller}
	for i := 0; i+1 < len(more); i += 2 {
		tags[more[i]] = more[i+1]
	}
	return tags
}

// waitCounters waits until every counter of want has its value in scope
// (the server records a request after its answer is on its way, so a
// client may see the answer first).
func waitCounters(t *testing.T, scope tally.TestScope, want map[string]int64) {
	t.Helper()
	var last map[string]tally.CounterSnapshot
	testwait.Until(t, "the server's counters", func() bool {
		last = scope.Snapshot().Counters()
		for k, v := range want {
			if c, ok := last[k]; !ok || c.Value() != v {
				return false
			}
		}
		return true
	})
	if t.Failed() {
		for k, v := range want {
			got := int64(-1)
			if c, ok := last[k]; ok {
				got = c.Value()
			}
			if got != v {
				t.Errorf("%s = %d, want %d (-1: absent)", k, got, v)
			}
		}
	}
}

// A real server's metrics say, per method and caller, how many requests
// it had, how long they took and how each was answered: system errors by
// code (BUSY from the handler, from load shedding and from the guard while
// closing; UNEXPECTED), application errors apart (raw and JSON), and
// sheds by reason.
func TestServerMetricsByMethodCallerAndCode(t *testing.T) {
	scope := tally.NewTestScope("", nil)
	// A rate limit of one request per 1000 s: the first of carol's
	// requests passes, the second is shed.
	s := startServer(t, WithScope(scope))
	shedding := startServer(t, WithScope(scope), WithShedding(ShedConfig{MaxRPS: 0.001, Burst: 1}))
	c, err := New("client-svc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	kv := to(c, "kv")
	if err := kv.AddPeer(s.ch.HostPort()); err != nil {
		t.Fatal(err)
	}
	ctx := ctxTimeout(t)
	call := func(caller, arg3 string) error {
		_, err := kv.CallRaw(ctx, "echo", nil, []byte(arg3), WithCallerName(caller))
		return err
	}
	for _, arg3 := range []string{"x", "y", "app-error"} {
		if err := call("alice", arg3); err != nil {
			t.Fatalf("alice's %s: %v", arg3, err)
		}
	}
	s.busy.Store(true)
	if err := call("alice", "x"); !isCode(err, tchannel.ErrCodeBusy) {
		t.Fatalf("alice's call to a busy handler: %v, want BUSY", err)
	}
	s.busy.Store(false)
	if err := call("bob", "unexpected"); !isCode(err, tchannel.ErrCodeUnexpected) {
		t.Fatalf("bob's unexpected: %v, want UNEXPECTED", err)
	}
	var res echoRes
	if err := kv.CallJSON(ctx, "get", &echoReq{}, &res, WithCallerName("bob")); err == nil {
		t.Fatal("bob's JSON call with an empty key: no error, want the application error")
	}
	if err := kv.CallJSON(ctx, "get", &echoReq{Key: "k"}, &res); err != nil {
		t.Fatalf("a JSON call under the Channel's own name: %v", err)
	}
	// Shed by rate, then refused while closing (from a plain client).
	for i, want := range []tchannel.SystemErrCode{0, tchannel.ErrCodeBusy} {
		_, _, _, err := raw.Call(ctx, plainClient(t, nil), shedding.ch.HostPort(), "kv", "echo", nil, []byte("x"))
		if want == 0 && err != nil || want != 0 && !isCode(err, want) {
			t.Fatalf("request %d to the shedding server: %v, want code %v", i, err, want)
		}
	}
	shedding.ch.declining.Store(true)
	t.Cleanup(func() { shedding.ch.declining.Store(false) })
	if _, err := plainCall(t, shedding.ch.HostPort(), "echo", tchannel.Raw, nil, []byte("x")); !isCode(err, tchannel.ErrCodeDeclined) {
		t.Fatalf("a request while closing: %v, want DECLINED", err)
	}

	waitCounters(t, scope, map[string]int64{
		serverKey(stats.ServerCalls, mc("echo", "alice")):                                        4,
		serverKey(stats.ServerCallAppErrors, mc("echo", "alice")):                                1,
		serverKey(stats.ServerCallErrors, mc("echo", "alice", stats.TagCode, "BUSY")):            1,
		serverKey(stats.ServerCalls, mc("echo", "bob")):                                          1,
		serverKey(stats.ServerCallErrors, mc("echo", "bob", stats.TagCode, "UNEXPECTED")):        1,
		serverKey(stats.ServerCalls, mc("get", "bob")):                                           1,
		serverKey(stats.ServerCallAppErrors, mc("get", "bob")):                                   1,
		serverKey(stats.ServerCalls, mc("get", "client-svc")):                                    1,
		serverKey(stats.ServerCalls, mc("echo", "plain-client")):                                 3,
		serverKey(stats.ServerShed, mc("echo", "plain-client", stats.TagReason, "rate")):         1,
		serverKey(stats.ServerCallErrors, mc("echo", "plain-client", stats.TagCode, "BUSY")):     1,
		serverKey(stats.ServerCallErrors, mc("echo", "plain-client", stats.TagCode, "DECLINED")): 1,
	})
	snap := scope.Snapshot()
	for k, c := range snap.Counters() {
		if c.Name() == stats.ServerCallErrors && c.Tags()[stats.TagCaller] == "alice" && c.Tags()[stats.TagCode] != "BUSY" {
			t.Errorf("%s = %d: alice's only system error was BUSY", k, c.Value())
		}
		if strings.HasPrefix(c.Name(), "inbound.") {
			t.Errorf("%s: tchannel-go's names without WithTChannelMetrics", k)
		}
	}
	lat, ok := snap.Histograms()[serverKey(stats.ServerCallLatency, mc("echo", "alice"))]
	if !ok {
		t.Fatalf("no server.call.latency histogram for alice's echo calls")
	}
	wantBounds := append(slices.Clone([]time.Duration(stats.LatencyBuckets)), math.MaxInt64)
	var n int64
	var bounds []time.Duration
	for b, k := range lat.Durations() {
		bounds = append(bounds, b)
		n += k
	}
	slices.Sort(bounds)
	if !slices.Equal(bounds, wantBounds) {
		t.Errorf("server.call.latency bounds %v, want the client's, %v", bounds, wantBounds)
	}
	if n != 4 {
		t.Errorf("server.call.latency holds %d of alice's echo calls, want 4", n)
	}
}

// isCode reports whether err is a TChannel system error with code, as a
// Sluice or a plain client returns it.
func isCode(err error, code tchannel.SystemErrCode) bool {
	var se tchannel.SystemError
	return errors.As(err, &se) && se.Code() == code
}

// Callers' names are bounded per method: the first stats.MaxCallerSeries
// get series of their own, and keep them; every later one counts under
// stats.CallerOther, under Sluice's names and tchannel-go's alike.
func TestServerMetricsCallersCapped(t *testing.T) {
	scope := tally.NewTestScope("", nil)
	s := startServer(t, WithScope(scope), WithTChannelMetrics())
	c, err := New("client-svc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	kv := to(c, "kv")
	if err := kv.AddPeer(s.ch.HostPort()); err != nil {
		t.Fatal(err)
	}
	ctx := ctxTimeout(t)
	const extra = 3
	callers := stats.MaxCallerSeries + extra
	for i := range callers {
		if _, err := kv.CallRaw(ctx, "echo", nil, []byte("x"), WithCallerName(fmt.Sprintf("c%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	// c0 keeps its series after the cap is reached.
	if _, err := kv.CallRaw(ctx, "echo", nil, []byte("x"), WithCallerName("c0")); err != nil {
		t.Fatal(err)
	}
	tch := func(caller string) string {
		return serverKey(stats.TChannelInboundRecvd, map[string]string{stats.TagTChannelService: "kv",
			stats.TagTChannelCaller: caller, stats.TagTChannelEndpoint: "echo"})
	}
	waitCounters(t, scope, map[string]int64{
		serverKey(stats.ServerCalls, mc("echo", "c0")):              2,
		serverKey(stats.ServerCalls, mc("echo", stats.CallerOther)): extra,
		tch("c0"):              2,
		tch(stats.CallerOther): extra,
	})
	own, tchOwn := 0, 0
	for _, c := range scope.Snapshot().Counters() {
		switch c.Name() {
		case stats.ServerCalls:
			own++
		case stats.TChannelInboundRecvd:
			tchOwn++
		}
	}
	if want := stats.MaxCallerSeries + 1; own != want || tchOwn != want {
		t.Errorf("%d server.calls and %d inbound.calls.recvd series for %d callers, want %d each (the cap, and %s)",
			own, tchOwn, callers, want, stats.CallerOther)
	}
}

// With WithTChannelMetrics the server reports tchannel-go's inbound names
// too, with tchannel-go's tag names and error types.
func TestServerMetricsTChannelNames(t *testing.T) {
	scope := tally.NewTestScope("", nil)
	s := startServer(t, WithScope(scope), WithTChannelMetrics())
	hp := s.ch.HostPort()
	for _, arg3 := range []string{"x", "app-error", "unexpected"} {
		_, _ = plainCall(t, hp, "echo", tchannel.Raw, nil, []byte(arg3))
	}
	s.busy.Store(true)
	if _, err := plainCall(t, hp, "echo", tchannel.Raw, nil, []byte("x")); !isCode(err, tchannel.ErrCodeBusy) {
		t.Fatalf("a call to a busy handler: %v, want BUSY", err)
	}
	tags := func(more ...string) map[string]string {
		m := map[string]string{stats.TagTChannelService: "kv", stats.TagTChannelCaller: "plain-client", stats.TagTChannelEndpoint: "echo"}
		for i := 0; i+1 < len(more); i += 2 {
			m[more[i]] = more[i+1]
		}
		return m
	}
	waitCounters(t, scope, map[string]int64{
		serverKey(stats.TChannelInboundRecvd, tags()):                                                      4,
		serverKey(stats.TChannelInboundSuccess, tags()):                                                    1,
		serverKey(stats.TChannelInboundAppErrors, tags()):                                                  1,
		serverKey(stats.TChannelInboundSystemErrors, tags(stats.TagTChannelErrorType, "busy")):             1,
		serverKey(stats.TChannelInboundSystemErrors, tags(stats.TagTChannelErrorType, "unexpected-error")): 1,
		serverKey(stats.ServerCalls, mc("echo", "plain-client")):                                           4,
	})
	lat, ok := scope.Snapshot().Timers()[serverKey(stats.TChannelInboundLatency, tags())]
	if !ok || len(lat.Values()) != 4 {
		t.Errorf("inbound.calls.latency: %v, want a timer of 4 latencies", lat)
	}
}

// A handler registered with RegisterHandler answers its calls itself,
// out of the Channel's sight: its requests count in server.calls and the
// latency, and in no error counter.
func TestServerMetricsUnclassifiedHandler(t *testing.T) {
	scope := tally.NewTestScope("", nil)
	s := startServer(t, WithScope(scope))
	if err := s.ch.RegisterHandler("plain", raw.Wrap(plainEcho{})); err != nil {
		t.Fatal(err)
	}
	if _, err := plainCall(t, s.ch.HostPort(), "plain", tchannel.Raw, nil, []byte("x")); err != nil {
		t.Fatal(err)
	}
	waitCounters(t, scope, map[string]int64{serverKey(stats.ServerCalls, mc("plain", "plain-client")): 1})
	for k, c := range scope.Snapshot().Counters() {
		if c.Tags()[stats.TagMethod] == "plain" && c.Name() != stats.ServerCalls {
			t.Errorf("%s = %d: the handler's answer is not the Channel's to classify", k, c.Value())
		}
	}
}

// With no scope, the server reads no clock for its metrics and records
// nothing: the guard has none.
func TestServerMetricsOffWithoutScope(t *testing.T) {
	ch, err := New("kv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.Close)
	if err := ch.RegisterRaw("echo", benchEcho); err != nil {
		t.Fatal(err)
	}
	g, ok := ch.tch.GetSubChannel("kv").GetHandlers()["echo"].(*guarded)
	if !ok || g.metrics != nil {
		t.Errorf("the guard of a Channel without a scope has metrics %v, want none", g)
	}
}
