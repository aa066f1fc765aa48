package channel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/busy"
	"github.com/sluice-rpc/sluice/channel/channelz"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	require.NoError(t, dec.Decode(&st), "%s", body)
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
	require.NoError(t, err)
	t.Cleanup(c.Close)
	for _, s := range []*testServer{good, bad} {
		require.NoError(t, c.AddPeer("kv", s.ch.HostPort()))
	}
	require.NoError(t, c.Connect(ctxTimeout(t), "kv"))

	// Peers are chosen at random (neither has a fresh latency estimate to
	// prefer it): the bad one answers about half of these Busy, all in the
	// fake clock's first window.
	for i := 0; i < 60; i++ {
		var err error
		if i%3 == 0 {
			err = c.CallJSON(ctxTimeout(t), "kv", "get", &echoReq{Key: "k"}, nil)
		} else {
			_, err = c.CallRaw(ctxTimeout(t), "kv", "echo", nil, []byte("x"))
		}
		var ce *CallError
		if err != nil && !(errors.As(err, &ce) && ce.Code == codes.Busy) {
			t.Fatalf("call %d: %v", i, err)
		}
	}

	st := c.Debug()
	assert.Equal(t, "client", st.Service)
	assert.Equal(t, clk.Now().UTC(), st.Time)
	assert.False(t, st.Closed)
	require.Len(t, st.Services, 1)
	kv := debugService(t, st, "kv")
	require.Len(t, kv.Peers, 2)
	g, b := debugPeerOf(t, kv, good.ch.HostPort()), debugPeerOf(t, kv, bad.ch.HostPort())
	require.GreaterOrEqual(t, b.Busy, uint64(3), "too few calls reached the busy peer for its limit to fall")
	for _, p := range []channelz.Peer{g, b} {
		assert.Equal(t, "READY", p.State, p.HostPort)
		assert.Zero(t, p.Pending, p.HostPort)
		assert.EqualValues(t, busy.DefaultCeiling, p.Ceiling)
		assert.EqualValues(t, busy.DefaultCeiling, p.Limit, "no window has ended yet")
		assert.Equal(t, 1000.0, p.Window.LengthMs)
		assert.Equal(t, int64(p.Sent), p.Window.Allowed, "every attempt was in the first window")
	}
	assert.Zero(t, g.Busy)
	assert.Zero(t, g.Window.Busy)
	assert.Equal(t, int(min(b.Busy, busy.DefaultMaxHalvings)), b.Window.Busy, "window busy count saturates at MaxHalvings")
	assert.Positive(t, g.Latency.Samples)
	assert.NotNil(t, g.Latency.Updated)
	assert.Zero(t, b.Latency.Samples, "busy answers teach no latency")
	assert.Nil(t, b.Latency.Updated)

	require.NotNil(t, kv.RetryThrottle)
	tokens := c.throttles["kv"].Tokens()
	assert.Equal(t, tokens, kv.RetryThrottle.Tokens)
	assert.Less(t, kv.RetryThrottle.Tokens, 10.0, "busy answers to hedged calls took tokens")
	assert.Equal(t, 10.0, kv.RetryThrottle.MaxTokens)
	assert.Equal(t, 0.1, kv.RetryThrottle.TokenRatio)
	assert.Equal(t, tokens > 5, kv.RetryThrottle.RetriesAllowed)
	assert.Nil(t, kv.Lease)
	assert.Nil(t, kv.Pacing)

	require.Len(t, kv.Methods, 2)
	echo, get := debugMethodOf(t, kv, "echo"), debugMethodOf(t, kv, "get")
	assert.Nil(t, echo.Hedge)
	assert.Equal(t, &channelz.Retry{MaxAttempts: 3, InitialBackoffMs: 10, MaxBackoffMs: 1000, BackoffMultiplier: 2,
		Jitter: "full", RetryableCodes: []string{"TIMEOUT"}}, echo.Retry)
	assert.Nil(t, get.Retry)
	assert.Equal(t, 1500.0, get.TimeoutMs)
	assert.Equal(t, &channelz.Hedge{MaxAttempts: 2, DelayMs: 500, HedgingDelayMs: 500, NonFatalCodes: []string{"BUSY"}}, get.Hedge)

	// The handler serves the same state, in the documented shape.
	rec := serveDebug(c, http.MethodGet)
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	served := decodeDebug(t, rec.Body.Bytes())
	again, err := json.Marshal(served)
	require.NoError(t, err)
	now, err := json.Marshal(c.Debug())
	require.NoError(t, err)
	assert.JSONEq(t, string(now), string(again), "nothing changed between the two reads")
	skv := debugService(t, served, "kv")
	sb := debugPeerOf(t, skv, bad.ch.HostPort())
	assert.Equal(t, "READY", sb.State)
	assert.Equal(t, b.Busy, sb.Busy)
	assert.Equal(t, 500.0, debugMethodOf(t, skv, "get").Hedge.DelayMs)
	assert.Equal(t, tokens, skv.RetryThrottle.Tokens)

	// At the next window the busy peer's limit has fallen below the
	// other's, and the new window has counted nothing yet.
	start := b.Window.Start
	clk.Add(time.Second)
	kv = debugService(t, c.Debug(), "kv")
	g, b = debugPeerOf(t, kv, good.ch.HostPort()), debugPeerOf(t, kv, bad.ch.HostPort())
	assert.Equal(t, "READY", g.State)
	assert.Equal(t, "READY", b.State)
	assert.EqualValues(t, busy.DefaultCeiling, g.Limit)
	assert.Less(t, b.Limit, g.Limit, "the busy peer's limit")
	want := busy.Config{}.Next(busy.DefaultCeiling, int(b.Busy))
	assert.Equal(t, want, b.Limit)
	assert.Equal(t, start.Add(time.Second), b.Window.Start)
	assert.Zero(t, b.Window.Allowed)
	assert.Zero(t, b.Window.Busy)

	// The JSON says the same.
	skv = debugService(t, decodeDebug(t, serveDebug(c, http.MethodGet).Body.Bytes()), "kv")
	assert.Equal(t, want, debugPeerOf(t, skv, bad.ch.HostPort()).Limit)
	assert.EqualValues(t, busy.DefaultCeiling, debugPeerOf(t, skv, good.ch.HostPort()).Limit)
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
	c, err := New("client", WithClock(clk), WithServiceConfig(mustConfig(t, cfg)),
		WithLease("kv", capGate{42}), WithLease("inf", capGate{math.Inf(1)}), WithLease("plain", plainGate{}),
		WithPacing("kv", PacingConfig{MaxDelay: 5 * time.Second}))
	require.NoError(t, err)
	t.Cleanup(c.Close)

	st := c.Debug()
	require.Len(t, st.Services, 3, "services with a lease or pacing are listed without peers or calls")
	for _, s := range st.Services {
		assert.NotNil(t, s.Peers, s.Name)
		assert.Empty(t, s.Peers, s.Name)
		assert.NotNil(t, s.Methods, s.Name)
		assert.Empty(t, s.Methods, s.Name)
		assert.Nil(t, s.RetryThrottle, s.Name)
	}
	assert.Equal(t, []string{"inf", "kv", "plain"}, []string{st.Services[0].Name, st.Services[1].Name, st.Services[2].Name})
	capacity := 42.0
	assert.Equal(t, &channelz.Lease{Gate: "channel.capGate", Capacity: &capacity}, debugService(t, st, "kv").Lease)
	assert.Equal(t, &channelz.Lease{Gate: "channel.capGate", Unlimited: true}, debugService(t, st, "inf").Lease)
	assert.Equal(t, &channelz.Lease{Gate: "channel.plainGate"}, debugService(t, st, "plain").Lease)
	assert.Equal(t, &channelz.Pacing{Strategy: "null", MaxDelayMs: 5000, Windows: []channelz.PaceWindow{}}, debugService(t, st, "kv").Pacing)
	assert.Nil(t, debugService(t, st, "inf").Pacing)

	// The method's policy is made by its first call; make it directly.
	p, err := c.policyFor("kv", "adapt")
	require.NoError(t, err)
	hedge := debugMethodOf(t, debugService(t, c.Debug(), "kv"), "adapt").Hedge
	require.NotNil(t, hedge)
	assert.Equal(t, &channelz.Hedge{MaxAttempts: 3, DelayMs: 100, HedgingDelayMs: 1000, NonFatalCodes: []string{"BUSY", "DECLINED"},
		Adaptive: &channelz.Adaptive{Quantile: 0.8, Window: 20, FloorMs: 2, CapMs: 100}}, hedge,
		"until it has latencies the delay is hedgingDelay within [floor, cap]")
	p.est.Observe(7 * time.Millisecond)
	p.est.Observe(7 * time.Millisecond) // window/10 = 2 samples: the quantile is taken
	hedge = debugMethodOf(t, debugService(t, c.Debug(), "kv"), "adapt").Hedge
	assert.Equal(t, 7.0, hedge.DelayMs)
	assert.Equal(t, &channelz.Adaptive{Quantile: 0.8, Window: 20, FloorMs: 2, CapMs: 100, Samples: 2, Learned: true}, hedge.Adaptive)

	// Windows the servers announced, for the service and for the method.
	now := clk.Now()
	c.pacers["kv"].windows.Record("kv", now.Add(time.Second))
	c.pacers["kv"].windows.Record("kv::adapt", now.Add(2*time.Second))
	assert.Equal(t, []channelz.PaceWindow{
		{Key: "kv", RemainingMs: 1000, Until: now.Add(time.Second).UTC()},
		{Key: "kv::adapt", RemainingMs: 2000, Until: now.Add(2 * time.Second).UTC()},
	}, debugService(t, c.Debug(), "kv").Pacing.Windows)
	clk.Add(1500 * time.Millisecond)
	assert.Equal(t, []channelz.PaceWindow{{Key: "kv::adapt", RemainingMs: 500, Until: now.Add(2 * time.Second).UTC()}},
		debugService(t, c.Debug(), "kv").Pacing.Windows, "the service's window has ended")

	// An unlimited lease is valid JSON; empty lists are arrays, not null.
	rec := serveDebug(c, http.MethodGet)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.NotContains(t, rec.Body.String(), `"peers": null`)
	assert.Contains(t, rec.Body.String(), `"peers": []`)
	served := decodeDebug(t, rec.Body.Bytes())
	assert.True(t, debugService(t, served, "inf").Lease.Unlimited)
	assert.Nil(t, debugService(t, served, "inf").Lease.Capacity)
	assert.Equal(t, 42.0, *debugService(t, served, "kv").Lease.Capacity)
	assert.Equal(t, 7.0, debugMethodOf(t, debugService(t, served, "kv"), "adapt").Hedge.DelayMs)
}

func TestDebugHandlerAnswersOnlyGet(t *testing.T) {
	c, err := New("client")
	require.NoError(t, err)
	t.Cleanup(c.Close)
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		rec := serveDebug(c, m)
		assert.Equal(t, http.StatusMethodNotAllowed, rec.Code, m)
		assert.Equal(t, "GET, HEAD", rec.Header().Get("Allow"), m)
	}
	for _, m := range []string{http.MethodGet, http.MethodHead} {
		rec := serveDebug(c, m)
		assert.Equal(t, http.StatusOK, rec.Code, m)
		assert.Equal(t, "application/json", rec.Header().Get("Content-Type"), m)
	}
	st := decodeDebug(t, serveDebug(c, http.MethodGet).Body.Bytes())
	assert.Equal(t, "client", st.Service)
	assert.NotNil(t, st.Services)
	assert.Empty(t, st.Services)
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
	c, err := New("client", WithServiceConfig(mustConfig(t, cfg)), WithBusyConfig(busyCfg),
		WithLease("kv", capGate{1e6}), WithPacing("kv", PacingConfig{MaxDelay: 10 * time.Millisecond}))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	for _, s := range []*testServer{good, flaky} {
		require.NoError(t, c.AddPeer("kv", s.ch.HostPort()))
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
					_ = c.CallJSON(ctx, "kv", "get", &echoReq{Key: "k"}, nil)
				} else {
					_, _ = c.CallRaw(ctx, "kv", "echo", nil, []byte("x"))
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
	assert.Positive(t, served.Load())

	kv := debugService(t, c.Debug(), "kv")
	require.Len(t, kv.Peers, 2)
	for _, p := range kv.Peers {
		assert.Equal(t, "READY", p.State)
		assert.Zero(t, p.Pending)
	}
	assert.Positive(t, debugPeerOf(t, kv, flaky.ch.HostPort()).Busy)
	require.NotNil(t, kv.RetryThrottle)
	require.NotNil(t, debugMethodOf(t, kv, "get").Hedge.Adaptive)
	assert.Positive(t, debugMethodOf(t, kv, "get").Hedge.Adaptive.Samples)
}
