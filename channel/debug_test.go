package channel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/busy"
	"github.com/sluice-rpc/sluice/channel/channelz"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/codes"
)

// debugCfg retries echo (on TIMEOUT only: a retry's backoff would wait on
// the fake clock) and hedges get; busy answers to get's hedges take tokens
// from the retry-throttling bucket.
const debugCfg = `{"methodConfig":[
 {"name":[{"service":"kv","method":"echo"}],
  "retryPolicy":{"maxAttempts":3,"initialBackoff":"0.01s","maxBackoff":"1s","backoffMultiplier":2,"retryableStatusCodes":["TIMEOUT"]}},
 {"name":[{"service":"kv","method":"get"}],"timeout":"1.5s",
  "hedgingPolicy":{"maxAttempts":2,"hedgingDelay":"0.5s","nonFatalStatusCodes":["BUSY"]}}],
 "retryThrottling":{"maxTokens":10,"tokenRatio":0.1}}`

func debugService(t *testing.T, st channelz.State, name string) channelz.Service {
	t.Helper()
	for _, s := range st.Services {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("service %q missing from %+v", name, st.Services)
	return channelz.Service{}
}

func debugPeerOf(t *testing.T, s channelz.Service, hostPort string) channelz.Peer {
	t.Helper()
	for _, p := range s.Peers {
		if p.HostPort == hostPort {
			return p
		}
	}
	t.Fatalf("peer %s missing from %+v", hostPort, s.Peers)
	return channelz.Peer{}
}

func debugMethodOf(t *testing.T, s channelz.Service, name string) channelz.Method {
	t.Helper()
	for _, m := range s.Methods {
		if m.Name == name {
			return m
		}
	}
	t.Fatalf("method %q missing from %+v", name, s.Methods)
	return channelz.Method{}
}

// serveDebug gets the handler's answer to a request with method.
func serveDebug(c *Channel, method string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	c.DebugHandler().ServeHTTP(rec, httptest.NewRequest(method, "/debug/sluice", nil))
	return rec
}

// decodeDebug decodes the handler's body strictly: every field it holds is
// one of channelz.State's.
func decodeDebug(t *testing.T, body []byte) channelz.State {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var st channelz.State
	if err := dec.Decode(&st); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return st
}

// After calls to two peers, one of which answers Busy, Debug shows both
// READY with nothing pending, the busy one's window counts and then its
// lowered limit, the retry tokens the busy answers to hedges took, and the
// policies of the methods called; the handler serves the same as JSON.
func TestDebugShowsPeersTokensAndPolicies(t *testing.T) {
	good, bad := startServer(t), startServer(t)
	bad.busy.Store(true)
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	c, err := New("client", WithClock(clk), WithServiceConfig(mustConfig(t, debugCfg)))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	for _, s := range []*testServer{good, bad} {
		if err := to(c, "kv").AddPeer(s.ch.HostPort()); err != nil {
			t.Fatalf("AddPeer: %v", err)
		}
	}
	if err := to(c, "kv").Connect(ctxTimeout(t)); err != nil {
		t.Fatalf("Connect: %v", err)
	}

	// Peers are chosen at random (neither has a fresh latency estimate to
	// prefer it): the bad one answers about half of these Busy, all in the
	// fake clock's first window.
	for i := 0; i < 60; i++ {
		var err error
		if i%3 == 0 {
			err = to(c, "kv").CallJSON(ctxTimeout(t), "get", &echoReq{Key: "k"}, nil)
		} else {
			_, err = to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, []byte("x"))
		}
		var ce *CallError
		if err != nil && !(errors.As(err, &ce) && ce.Code == codes.Busy) {
			t.Fatalf("call %d: %v", i, err)
		}
	}

	st := c.Debug()
	if st.Service != "client" {
		t.Errorf("st.Service = %q, want %q", st.Service, "client")
	}
	if want := clk.Now().UTC(); !reflect.DeepEqual(st.Time, want) {
		t.Errorf("st.Time = %+v, want %+v", st.Time, want)
	}
	if st.Closed {
		t.Error("st.Closed = true, want false")
	}
	if len(st.Services) != 1 {
		t.Fatalf("len(st.Services) = %d, want %d", len(st.Services), 1)
	}
	kv := debugService(t, st, "kv")
	if len(kv.Peers) != 2 {
		t.Fatalf("len(kv.Peers) = %d, want %d", len(kv.Peers), 2)
	}
	g, b := debugPeerOf(t, kv, good.ch.HostPort()), debugPeerOf(t, kv, bad.ch.HostPort())
	if b.Busy < uint64(3) {
		t.Fatalf("too few calls reached the busy peer for its limit to fall: got %v, want >= %v", b.Busy, uint64(3))
	}
	for _, p := range []channelz.Peer{g, b} {
		if p.State != "READY" {
			t.Errorf("%s: got %q, want %q", p.HostPort, p.State, "READY")
		}
		if p.Pending != 0 {
			t.Errorf("%s: got %v, want 0", p.HostPort, p.Pending)
		}
		if p.Ceiling != busy.DefaultCeiling {
			t.Errorf("p.Ceiling = %v, want %v", p.Ceiling, busy.DefaultCeiling)
		}
		if p.Limit != busy.DefaultCeiling {
			t.Errorf("no window has ended yet: got %v, want %v", p.Limit, busy.DefaultCeiling)
		}
		if p.Window.LengthMs != 1000.0 {
			t.Errorf("p.Window.LengthMs = %v, want %v", p.Window.LengthMs, 1000.0)
		}
		if p.Window.Allowed != int64(p.Sent) {
			t.Errorf("every attempt was in the first window: got %v, want %v", p.Window.Allowed, int64(p.Sent))
		}
	}
	if g.Busy != 0 {
		t.Errorf("g.Busy = %v, want 0", g.Busy)
	}
	if g.Window.Busy != 0 {
		t.Errorf("g.Window.Busy = %v, want 0", g.Window.Busy)
	}
	if want := int(min(b.Busy, busy.DefaultMaxHalvings)); b.Window.Busy != want {
		t.Errorf("window busy count saturates at MaxHalvings: got %v, want %v", b.Window.Busy, want)
	}
	if g.Latency.Samples <= 0 {
		t.Errorf("g.Latency.Samples = %v, want > 0", g.Latency.Samples)
	}
	if g.Latency.Updated == nil {
		t.Error("g.Latency.Updated is nil")
	}
	if b.Latency.Samples != 0 {
		t.Errorf("busy answers teach no latency: got %v, want 0", b.Latency.Samples)
	}
	if b.Latency.Updated != nil {
		t.Errorf("b.Latency.Updated = %+v, want nil", b.Latency.Updated)
	}

	if kv.RetryThrottle == nil {
		t.Fatal("kv.RetryThrottle is nil")
	}
	tokens := to(c, "kv").bucket.Tokens()
	if kv.RetryThrottle.Tokens != tokens {
		t.Errorf("kv.RetryThrottle.Tokens = %v, want %v", kv.RetryThrottle.Tokens, tokens)
	}
	if !(kv.RetryThrottle.Tokens < 10.0) {
		t.Errorf("busy answers to hedged calls took tokens: got %v, want < %v", kv.RetryThrottle.Tokens, 10.0)
	}
	if kv.RetryThrottle.MaxTokens != 10.0 {
		t.Errorf("kv.RetryThrottle.MaxTokens = %v, want %v", kv.RetryThrottle.MaxTokens, 10.0)
	}
	if kv.RetryThrottle.TokenRatio != 0.1 {
		t.Errorf("kv.RetryThrottle.TokenRatio = %v, want %v", kv.RetryThrottle.TokenRatio, 0.1)
	}
	if kv.RetryThrottle.RetriesAllowed != (tokens > 5) {
		t.Errorf("kv.RetryThrottle.RetriesAllowed = %v, want %v", kv.RetryThrottle.RetriesAllowed, (tokens > 5))
	}
	if kv.Lease != nil {
		t.Errorf("kv.Lease = %+v, want nil", kv.Lease)
	}
	if kv.Pacing != nil {
		t.Errorf("kv.Pacing = %+v, want nil", kv.Pacing)
	}

	if len(kv.Methods) != 2 {
		t.Fatalf("len(kv.Methods) = %d, want %d", len(kv.Methods), 2)
	}
	echo, get := debugMethodOf(t, kv, "echo"), debugMethodOf(t, kv, "get")
	if echo.Hedge != nil {
		t.Errorf("echo.Hedge = %+v, want nil", echo.Hedge)
	}
	if want := (&channelz.Retry{MaxAttempts: 3, InitialBackoffMs: 10, MaxBackoffMs: 1000, BackoffMultiplier: 2,
		Jitter: "full", RetryableCodes: []string{"TIMEOUT"}}); !reflect.DeepEqual(echo.Retry, want) {
		t.Errorf("echo.Retry = %+v, want %+v", echo.Retry, want)
	}
	if get.Retry != nil {
		t.Errorf("get.Retry = %+v, want nil", get.Retry)
	}
	if get.TimeoutMs != 1500.0 {
		t.Errorf("get.TimeoutMs = %v, want %v", get.TimeoutMs, 1500.0)
	}
	if want := (&channelz.Hedge{MaxAttempts: 2, DelayMs: 500, HedgingDelayMs: 500, NonFatalCodes: []string{"BUSY"}}); !reflect.DeepEqual(get.Hedge, want) {
		t.Errorf("get.Hedge = %+v, want %+v", get.Hedge, want)
	}

	// The handler serves the same state, in the documented shape.
	rec := serveDebug(c, http.MethodGet)
	if rec.Code != http.StatusOK {
		t.Fatalf("rec.Code = %v, want %v", rec.Code, http.StatusOK)
	}
	if got := rec.Header().Get("Content-Type"); got != "application/json" {
		t.Errorf(`rec.Header().Get("Content-Type") = %q, want %q`, got, "application/json")
	}
	served := decodeDebug(t, rec.Body.Bytes())
	again, err := json.Marshal(served)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	now, err := json.Marshal(c.Debug())
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	if !bytes.Equal(now, again) {
		t.Errorf("nothing changed between the two reads, but the JSON did:\n%s\n%s", again, now)
	}
	skv := debugService(t, served, "kv")
	sb := debugPeerOf(t, skv, bad.ch.HostPort())
	if sb.State != "READY" {
		t.Errorf("sb.State = %q, want %q", sb.State, "READY")
	}
	if sb.Busy != b.Busy {
		t.Errorf("sb.Busy = %v, want %v", sb.Busy, b.Busy)
	}
	if got := debugMethodOf(t, skv, "get").Hedge.DelayMs; got != 500.0 {
		t.Errorf("got %v, want %v", got, 500.0)
	}
	if skv.RetryThrottle.Tokens != tokens {
		t.Errorf("skv.RetryThrottle.Tokens = %v, want %v", skv.RetryThrottle.Tokens, tokens)
	}

	// At the next window the busy peer's limit has fallen below the
	// other's, and the new window has counted nothing yet.
	start := b.Window.Start
	clk.Add(time.Second)
	kv = debugService(t, c.Debug(), "kv")
	g, b = debugPeerOf(t, kv, good.ch.HostPort()), debugPeerOf(t, kv, bad.ch.HostPort())
	if g.State != "READY" {
		t.Errorf("g.State = %q, want %q", g.State, "READY")
	}
	if b.State != "READY" {
		t.Errorf("b.State = %q, want %q", b.State, "READY")
	}
	if g.Limit != busy.DefaultCeiling {
		t.Errorf("g.Limit = %v, want %v", g.Limit, busy.DefaultCeiling)
	}
	if !(b.Limit < g.Limit) {
		t.Errorf("the busy peer's limit: got %v, want < %v", b.Limit, g.Limit)
	}
	want := busy.Config{}.Next(busy.DefaultCeiling, int(b.Busy))
	if b.Limit != want {
		t.Errorf("b.Limit = %v, want %v", b.Limit, want)
	}
	if want := start.Add(time.Second); !reflect.DeepEqual(b.Window.Start, want) {
		t.Errorf("b.Window.Start = %+v, want %+v", b.Window.Start, want)
	}
	if b.Window.Allowed != 0 {
		t.Errorf("b.Window.Allowed = %v, want 0", b.Window.Allowed)
	}
	if b.Window.Busy != 0 {
		t.Errorf("b.Window.Busy = %v, want 0", b.Window.Busy)
	}

	// The JSON says the same.
	skv = debugService(t, decodeDebug(t, serveDebug(c, http.MethodGet).Body.Bytes()), "kv")
	if got := debugPeerOf(t, skv, bad.ch.HostPort()).Limit; got != want {
		t.Errorf("got %v, want %v", got, want)
	}
	if got := debugPeerOf(t, skv, good.ch.HostPort()).Limit; got != busy.DefaultCeiling {
		t.Errorf("got %v, want %v", got, busy.DefaultCeiling)
	}
}

// capGate is a Gate that reports a capacity, as leasing.RateLimiter does.
type capGate struct{ capacity float64 }

func (capGate) Admit(context.Context) error { return nil }
func (g capGate) Capacity() float64         { return g.capacity }

// plainGate is a Gate with no capacity to report.
type plainGate struct{}

func (plainGate) Admit(context.Context) error { return nil }

// An adaptive hedge reports its learned delay, lease gates their
// capacity, and pacing the windows the servers announced.
func TestDebugAdaptiveHedgeLeaseAndPacing(t *testing.T) {
	const cfg = `{"methodConfig":[{"name":[{"service":"kv","method":"adapt"}],
	  "hedgingPolicy":{"maxAttempts":3,"hedgingDelay":"1s","nonFatalStatusCodes":["BUSY","DECLINED"],
	  "adaptiveDelay":{"quantile":0.8,"window":20,"floor":"0.002s","cap":"0.1s"}}}]}`
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	c, err := New("client", WithClock(clk), WithServiceConfig(mustConfig(t, cfg)))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	to(c, "kv", WithLease(capGate{42}), WithPacing(PacingConfig{MaxDelay: 5 * time.Second}))
	to(c, "inf", WithLease(capGate{math.Inf(1)}))
	to(c, "plain", WithLease(plainGate{}))

	st := c.Debug()
	if len(st.Services) != 3 {
		t.Fatalf("services with a lease or pacing are listed without peers or calls: got length %d, want %d", len(st.Services), 3)
	}
	for _, s := range st.Services {
		if s.Peers == nil {
			t.Errorf("%s: s.Peers is nil", s.Name)
		}
		if len(s.Peers) != 0 {
			t.Errorf("%s: got %v, want empty", s.Name, s.Peers)
		}
		if s.Methods == nil {
			t.Errorf("%s: s.Methods is nil", s.Name)
		}
		if len(s.Methods) != 0 {
			t.Errorf("%s: got %v, want empty", s.Name, s.Methods)
		}
		if s.RetryThrottle != nil {
			t.Errorf("%s: got %+v, want nil", s.Name, s.RetryThrottle)
		}
	}
	if got, want := []string{st.Services[0].Name, st.Services[1].Name, st.Services[2].Name}, []string{"inf", "kv", "plain"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	capacity := 42.0
	if got, want := debugService(t, st, "kv").Lease, (&channelz.Lease{Gate: "channel.capGate", Capacity: &capacity}); !reflect.DeepEqual(got, want) {
		t.Errorf(`debugService(t, st, "kv").Lease = %+v, want %+v`, got, want)
	}
	if got, want := debugService(t, st, "inf").Lease, (&channelz.Lease{Gate: "channel.capGate", Unlimited: true}); !reflect.DeepEqual(got, want) {
		t.Errorf(`debugService(t, st, "inf").Lease = %+v, want %+v`, got, want)
	}
	if got, want := debugService(t, st, "plain").Lease, (&channelz.Lease{Gate: "channel.plainGate"}); !reflect.DeepEqual(got, want) {
		t.Errorf(`debugService(t, st, "plain").Lease = %+v, want %+v`, got, want)
	}
	if got, want := debugService(t, st, "kv").Pacing, (&channelz.Pacing{Strategy: "null", MaxDelayMs: 5000, Windows: []channelz.PaceWindow{}}); !reflect.DeepEqual(got, want) {
		t.Errorf(`debugService(t, st, "kv").Pacing = %+v, want %+v`, got, want)
	}
	if got := debugService(t, st, "inf").Pacing; got != nil {
		t.Errorf(`debugService(t, st, "inf").Pacing = %+v, want nil`, got)
	}

	// The method's policy is made by its first call; make it directly.
	p, err := policyOf(c, "kv", "adapt")
	if err != nil {
		t.Fatalf("policyFor: %v", err)
	}
	hedge := debugMethodOf(t, debugService(t, c.Debug(), "kv"), "adapt").Hedge
	if hedge == nil {
		t.Fatal("hedge is nil")
	}
	if want := (&channelz.Hedge{MaxAttempts: 3, DelayMs: 100, HedgingDelayMs: 1000, NonFatalCodes: []string{"BUSY", "DECLINED"},
		Adaptive: &channelz.Adaptive{Quantile: 0.8, Window: 20, FloorMs: 2, CapMs: 100}}); !reflect.DeepEqual(hedge, want) {
		t.Errorf("until it has latencies the delay is hedgingDelay within [floor, cap]: got %+v, want %+v", hedge, want)
	}
	p.est.Observe(7 * time.Millisecond)
	p.est.Observe(7 * time.Millisecond) // window/10 = 2 samples: the quantile is taken
	hedge = debugMethodOf(t, debugService(t, c.Debug(), "kv"), "adapt").Hedge
	if hedge.DelayMs != 7.0 {
		t.Errorf("hedge.DelayMs = %v, want %v", hedge.DelayMs, 7.0)
	}
	if want := (&channelz.Adaptive{Quantile: 0.8, Window: 20, FloorMs: 2, CapMs: 100, Samples: 2, Learned: true}); !reflect.DeepEqual(hedge.Adaptive, want) {
		t.Errorf("hedge.Adaptive = %+v, want %+v", hedge.Adaptive, want)
	}

	// Windows the servers announced, for the service and for the method.
	now := clk.Now()
	to(c, "kv").pacer.(*pacer).windows.Record("kv", now.Add(time.Second))
	to(c, "kv").pacer.(*pacer).windows.Record("kv::adapt", now.Add(2*time.Second))
	if want, got := []channelz.PaceWindow{
		{Key: "kv", RemainingMs: 1000, Until: now.Add(time.Second).UTC()},
		{Key: "kv::adapt", RemainingMs: 2000, Until: now.Add(2 * time.Second).UTC()},
	}, debugService(t, c.Debug(), "kv").Pacing.Windows; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	clk.Add(1500 * time.Millisecond)
	if want, got := []channelz.PaceWindow{{Key: "kv::adapt", RemainingMs: 500, Until: now.Add(2 * time.Second).UTC()}}, debugService(t, c.Debug(), "kv").Pacing.Windows; !reflect.DeepEqual(got, want) {
		t.Errorf("the service's window has ended: got %v, want %v", got, want)
	}

	// An unlimited lease is valid JSON; empty lists are arrays, not null.
	rec := serveDebug(c, http.MethodGet)
	if rec.Code != http.StatusOK {
		t.Fatalf("%s: got %v, want %v", rec.Body.String(), rec.Code, http.StatusOK)
	}
	if strings.Contains(rec.Body.String(), `"peers": null`) {
		t.Errorf("rec.Body.String() = %q, want it not to contain %q", rec.Body.String(), `"peers": null`)
	}
	if !strings.Contains(rec.Body.String(), `"peers": []`) {
		t.Errorf("rec.Body.String() = %q, want it to contain %q", rec.Body.String(), `"peers": []`)
	}
	served := decodeDebug(t, rec.Body.Bytes())
	if !debugService(t, served, "inf").Lease.Unlimited {
		t.Error("condition is false, want true")
	}
	if got := debugService(t, served, "inf").Lease.Capacity; got != nil {
		t.Errorf("got %v, want nil", got)
	}
	if got := *debugService(t, served, "kv").Lease.Capacity; got != 42.0 {
		t.Errorf("got %v, want %v", got, 42.0)
	}
	if got := debugMethodOf(t, debugService(t, served, "kv"), "adapt").Hedge.DelayMs; got != 7.0 {
		t.Errorf("got %v, want %v", got, 7.0)
	}
}

func TestDebugHandlerAnswersOnlyGet(t *testing.T) {
	c, err := New("client")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		rec := serveDebug(c, m)
		if rec.Code != http.StatusMethodNotAllowed {
			t.Errorf("%s: got %v, want %v", m, rec.Code, http.StatusMethodNotAllowed)
		}
		if got := rec.Header().Get("Allow"); got != "GET, HEAD" {
			t.Errorf("%s: got %q, want %q", m, got, "GET, HEAD")
		}
	}
	for _, m := range []string{http.MethodGet, http.MethodHead} {
		rec := serveDebug(c, m)
		if rec.Code != http.StatusOK {
			t.Errorf("%s: got %v, want %v", m, rec.Code, http.StatusOK)
		}
		if got := rec.Header().Get("Content-Type"); got != "application/json" {
			t.Errorf("%s: got %q, want %q", m, got, "application/json")
		}
	}
	st := decodeDebug(t, serveDebug(c, http.MethodGet).Body.Bytes())
	if st.Service != "client" {
		t.Errorf("st.Service = %q, want %q", st.Service, "client")
	}
	if st.Services == nil {
		t.Error("st.Services is nil")
	}
	if len(st.Services) != 0 {
		t.Errorf("st.Services = %v, want empty", st.Services)
	}
}

// Debug and the handler read while calls run, hedge, get Busy answers,
// and change limits, tokens and estimates: the race detector checks the
// reads, and the calls go on meanwhile.
func TestDebugWhileCalling(t *testing.T) {
	good, flaky := startServer(t), startServer(t)
	var n atomic.Int64
	flaky.busyEvery = func() bool { return n.Add(1)%2 == 0 }
	const cfg = `{"methodConfig":[
	 {"name":[{"service":"kv","method":"echo"}],
	  "retryPolicy":{"maxAttempts":3,"initialBackoff":"0.001s","maxBackoff":"0.01s","backoffMultiplier":2,"retryableStatusCodes":["BUSY"]}},
	 {"name":[{"service":"kv","method":"get"}],
	  "hedgingPolicy":{"maxAttempts":2,"hedgingDelay":"0.001s","nonFatalStatusCodes":["BUSY"],
	  "adaptiveDelay":{"quantile":0.5,"window":10,"floor":"0.001s","cap":"0.01s"}}}],
	 "retryThrottling":{"maxTokens":10,"tokenRatio":0.5}}`
	busyCfg := busy.Config{Window: 20 * time.Millisecond} // many windows roll during the test
	c, err := New("client", WithServiceConfig(mustConfig(t, cfg)), WithBusyConfig(busyCfg))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	to(c, "kv", WithLease(capGate{1e6}), WithPacing(PacingConfig{MaxDelay: 10 * time.Millisecond}))
	for _, s := range []*testServer{good, flaky} {
		if err := to(c, "kv").AddPeer(s.ch.HostPort()); err != nil {
			t.Fatalf("AddPeer: %v", err)
		}
	}

	var calls, reads sync.WaitGroup
	done := make(chan struct{})
	for w := 0; w < 4; w++ {
		calls.Add(1)
		go func() {
			defer calls.Done()
			for i := 0; i < 50; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				if i%2 == 0 {
					_ = to(c, "kv").CallJSON(ctx, "get", &echoReq{Key: "k"}, nil)
				} else {
					_, _ = to(c, "kv").CallRaw(ctx, "echo", nil, []byte("x"))
				}
				cancel()
			}
		}()
	}
	var served atomic.Int64
	for r := 0; r < 2; r++ {
		reads.Add(1)
		go func() {
			defer reads.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				st := c.Debug()
				for _, s := range st.Services {
					for _, p := range s.Peers {
						if p.Limit <= 0 || p.Window.Allowed < 0 || p.Pending < 0 {
							t.Errorf("impossible peer state %+v", p)
						}
					}
				}
				rec := serveDebug(c, http.MethodGet)
				if rec.Code != http.StatusOK {
					t.Errorf("handler answered %d: %s", rec.Code, rec.Body)
				}
				served.Add(1)
				time.Sleep(time.Millisecond)
			}
		}()
	}
	calls.Wait()
	close(done)
	reads.Wait()
	if got := served.Load(); got <= 0 {
		t.Errorf("served.Load() = %v, want > 0", got)
	}

	kv := debugService(t, c.Debug(), "kv")
	if len(kv.Peers) != 2 {
		t.Fatalf("len(kv.Peers) = %d, want %d", len(kv.Peers), 2)
	}
	for _, p := range kv.Peers {
		if p.State != "READY" {
			t.Errorf("p.State = %q, want %q", p.State, "READY")
		}
		if p.Pending != 0 {
			t.Errorf("p.Pending = %v, want 0", p.Pending)
		}
	}
	if got := debugPeerOf(t, kv, flaky.ch.HostPort()).Busy; got <= 0 {
		t.Errorf("got %v, want > 0", got)
	}
	if kv.RetryThrottle == nil {
		t.Fatal("kv.RetryThrottle is nil")
	}
	if got := debugMethodOf(t, kv, "get").Hedge.Adaptive; got == nil {
		t.Fatal("got nil")
	}
	if got := debugMethodOf(t, kv, "get").Hedge.Adaptive.Samples; got <= 0 {
		t.Errorf("got %v, want > 0", got)
	}
}
