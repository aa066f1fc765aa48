package channel

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/peer"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/sluice-rpc/sluice/serviceconfig"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	tjson "github.com/uber/tchannel-go/json"
)

// fleet is a set of real servers of "kv" whose JSON method "get" runs a
// shared script: answer(n) decides the reply to the nth request (0-based)
// the fleet receives. Every request is logged with its server and
// previous-rpc-attempts header.
type fleet struct {
	servers []*Channel
	answer  func(n int) error
	mu      sync.Mutex
	log     []arrival
}

type arrival struct {
	server, attemptsHeader string
	at                     time.Time
}

func startFleet(t *testing.T, n int, answer func(n int) error) *fleet {
	t.Helper()
	f := &fleet{answer: answer}
	for i := 0; i < n; i++ {
		ch, err := New("kv")
		require.NoError(t, err)
		hp := new(string)
		require.NoError(t, ch.RegisterJSON(map[string]any{
			"get": func(ctx tjson.Context, req *echoReq) (*echoRes, error) {
				f.mu.Lock()
				k := len(f.log)
				f.log = append(f.log, arrival{server: *hp, attemptsHeader: ctx.Headers()[retry.AttemptsHeader], at: time.Now()})
				f.mu.Unlock()
				if err := f.answer(k); err != nil {
					return nil, err
				}
				return &echoRes{Key: req.Key, Server: *hp}, nil
			},
		}))
		require.NoError(t, ch.ListenAndServe("127.0.0.1:0"))
		*hp = ch.HostPort()
		t.Cleanup(ch.Close)
		f.servers = append(f.servers, ch)
	}
	return f
}

func (f *fleet) arrivals() []arrival {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]arrival(nil), f.log...)
}

func (f *fleet) received() int { return len(f.arrivals()) }

func mustConfig(t *testing.T, js string) *serviceconfig.Config {
	t.Helper()
	cfg, err := serviceconfig.Parse([]byte(js))
	require.NoError(t, err)
	return cfg
}

const retryBusy = `{"methodConfig":[{"name":[{"service":"kv"}],
 "retryPolicy":{"maxAttempts":%d,"initialBackoff":"%s","maxBackoff":"1s","backoffMultiplier":2,"retryableStatusCodes":["BUSY"]}}]%s}`

// retryClient is a client on the wall clock (backoffs are real waits) with
// the fleet's servers as peers.
func retryClient(t *testing.T, f *fleet, cfg *serviceconfig.Config, opts ...Option) (*Channel, tally.TestScope) {
	t.Helper()
	scope := tally.NewTestScope("", nil)
	opts = append([]Option{WithServiceConfig(cfg), WithScope(scope), WithMethods("kv", "get", "echo")}, opts...)
	c, err := New("client", opts...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	for _, s := range f.servers {
		require.NoError(t, c.AddPeer("kv", s.HostPort()))
	}
	// Retries go to distinct peers among those ready: have them all ready.
	require.NoError(t, c.Connect(ctxTimeout(t), "kv"))
	return c, scope
}

func busyFirst(k int) func(int) error {
	return func(n int) error {
		if n < k {
			return Busy("busy #%d", n)
		}
		return nil
	}
}

func TestRetryOnDistinctPeersWithAttemptHeaders(t *testing.T) {
	f := startFleet(t, 3, busyFirst(2))
	c, scope := retryClient(t, f, mustConfig(t, fmt.Sprintf(retryBusy, 3, "0.001s", "")))
	var out echoRes
	var rh map[string]string
	require.NoError(t, c.CallJSON(ctxTimeout(t), "kv", "get", &echoReq{Key: "k"}, &out, ResponseHeaders(&rh)))

	log := f.arrivals()
	require.Len(t, log, 3)
	seen := map[string]bool{}
	for i, a := range log {
		want := ""
		if i > 0 {
			want = fmt.Sprint(i)
		}
		assert.Equal(t, want, a.attemptsHeader, "attempt %d", i)
		assert.False(t, seen[a.server], "attempt %d went to %s again", i, a.server)
		seen[a.server] = true
	}
	assert.Equal(t, log[2].server, out.Server)

	cn := scope.Snapshot().Counters()
	assert.EqualValues(t, 3, cn["attempts+method=get,service=kv"].Value())
	assert.EqualValues(t, 1, cn["calls+method=get,service=kv"].Value())
	assert.EqualValues(t, 2, cn["retry.attempts+method=get,service=kv"].Value())
	assert.EqualValues(t, 1, cn["retry.attempts.failed+method=get,service=kv"].Value())
	attempts := scope.Snapshot().Histograms()["call.attempts+method=get,service=kv"]
	require.NotNil(t, attempts)
	assert.EqualValues(t, 1, attempts.Values()[3], "the call sent 3 attempts")
	assert.EqualValues(t, 2, cn["attempt.errors+code=BUSY,method=get,service=kv"].Value())
}

func TestCallerLearnsAttempts(t *testing.T) {
	f := startFleet(t, 3, busyFirst(1))
	c, _ := retryClient(t, f, mustConfig(t, fmt.Sprintf(retryBusy, 3, "0.001s", "")))
	res, err := c.Call(ctxTimeout(t), "kv", "get", &Request{Format: "json", Arg3: []byte(`{"Key":"k"}`)})
	require.NoError(t, err)
	assert.Equal(t, 2, res.Attempts)
}

func TestNotRetried(t *testing.T) {
	tests := []struct {
		name   string
		answer func(int) error
		check  func(t *testing.T, err error)
	}{
		{"non-retryable code", func(int) error { return Declined("draining") }, func(t *testing.T, err error) {
			var ce *CallError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, codes.Declined, ce.Code)
		}},
		{"application error", func(int) error { return errEmptyKey }, func(t *testing.T, err error) {
			var ae *ApplicationError
			require.ErrorAs(t, err, &ae)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := startFleet(t, 3, tt.answer)
			c, _ := retryClient(t, f, mustConfig(t, fmt.Sprintf(retryBusy, 5, "0.001s", "")))
			tt.check(t, c.CallJSON(ctxTimeout(t), "kv", "get", &echoReq{Key: "k"}, nil))
			// A handler's DECLINED is an ordinary code: the handler ran, so
			// it runs once (only a decline before any handler is retried
			// transparently).
			assert.Equal(t, 1, f.received())
		})
	}
}

func TestDeadlineEndsRetryChain(t *testing.T) {
	f := startFleet(t, 3, func(int) error { return Busy("always") })
	// Backoffs of half their bound: 100, 200, 400 ms. With full jitter the
	// four could all be short enough to fit in the deadline.
	half := withRand(func() float64 { return 0.5 })
	c, _ := retryClient(t, f, mustConfig(t, fmt.Sprintf(retryBusy, 5, "0.2s", "")), half)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.CallJSON(ctx, "kv", "get", &echoReq{Key: "k"}, nil)
	var ce *CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, retry.StopContext, ce.Stop, "err: %v", err)
	assert.Less(t, ce.Attempts, 5)
	assert.Less(t, time.Since(start), time.Second)
}

func TestThrottleStopsRetriesAndRecovers(t *testing.T) {
	var healthy atomic.Bool
	f := startFleet(t, 3, func(int) error {
		if healthy.Load() {
			return nil
		}
		return Busy("overloaded")
	})
	cfg := mustConfig(t, fmt.Sprintf(retryBusy, 3, "0.001s", `,"retryThrottling":{"maxTokens":6,"tokenRatio":1}`))
	c, scope := retryClient(t, f, cfg)
	attempts := func() int {
		var ce *CallError
		err := c.CallJSON(ctxTimeout(t), "kv", "get", &echoReq{Key: "k"}, nil)
		if err == nil {
			return 0
		}
		require.ErrorAs(t, err, &ce)
		return ce.Attempts
	}
	// 6 tokens; each failed attempt costs one; retries stop at <= 3 tokens.
	assert.Equal(t, 3, attempts()) // 6 -> 3 tokens
	assert.Equal(t, 1, attempts()) // at the threshold: the failure returns at once
	assert.Equal(t, 1, attempts())
	tokens := scope.Snapshot().Gauges()["retry.throttle.tokens+service=kv"]
	require.NotNil(t, tokens)
	assert.Equal(t, 1.0, tokens.Value())

	healthy.Store(true)
	for i := 0; i < 4; i++ { // +1 token per success: 1 -> 5
		require.Zero(t, attempts())
	}
	healthy.Store(false)
	// 5 tokens: the first failure leaves 4 (> 3: retry), the retry's failure
	// leaves 3 (at the threshold: refused).
	assert.Equal(t, 2, attempts(), "retries allowed again once tokens > maxTokens/2")
}

func TestPushback(t *testing.T) {
	t.Run("delay", func(t *testing.T) {
		f := startFleet(t, 3, func(n int) error {
			if n == 0 {
				return BusyAfter(150*time.Millisecond, "slow down")
			}
			return nil
		})
		c, _ := retryClient(t, f, mustConfig(t, fmt.Sprintf(retryBusy, 3, "0.001s", "")))
		require.NoError(t, c.CallJSON(ctxTimeout(t), "kv", "get", &echoReq{Key: "k"}, nil))
		log := f.arrivals()
		require.Len(t, log, 2)
		assert.GreaterOrEqual(t, log[1].at.Sub(log[0].at), 150*time.Millisecond)
	})
	t.Run("negative stops", func(t *testing.T) {
		f := startFleet(t, 3, func(int) error { return BusyAfter(-1, "go away") })
		c, _ := retryClient(t, f, mustConfig(t, fmt.Sprintf(retryBusy, 5, "0.001s", "")))
		err := c.CallJSON(ctxTimeout(t), "kv", "get", &echoReq{Key: "k"}, nil)
		var ce *CallError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, retry.StopPushback, ce.Stop)
		assert.Equal(t, "go away", ce.Message, "the hint is parsed off the message")
		assert.Equal(t, 1, f.received())
	})
	t.Run("shedding sends the hint", func(t *testing.T) {
		s := startServer(t, WithShedding(ShedConfig{MaxRPS: 0.001, Burst: 1, Pushback: -1}))
		c, err := New("client", WithServiceConfig(mustConfig(t, fmt.Sprintf(retryBusy, 5, "0.001s", ""))))
		require.NoError(t, err)
		defer c.Close()
		require.NoError(t, c.AddPeer("kv", s.ch.HostPort()))
		_, err = c.CallRaw(ctxTimeout(t), "kv", "echo", nil, nil)
		require.NoError(t, err)
		_, err = c.CallRaw(ctxTimeout(t), "kv", "echo", nil, nil)
		var ce *CallError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, retry.StopPushback, ce.Stop)
	})
}

// Peers nobody listens on are in transient failure and never chosen: every
// call succeeds on the live peer (maxAttempts 2: one BUSY and one success
// there), and no attempt is even tried on a dead one.
func TestUnreachablePeersAreNotChosen(t *testing.T) {
	var deads []string
	for i := 0; i < 2; i++ {
		d := startServer(t)
		deads = append(deads, d.ch.HostPort())
		d.ch.Close()
	}
	f := startFleet(t, 1, func(n int) error {
		if n%2 == 0 {
			return Busy("busy once per call")
		}
		return nil
	})
	c, scope := retryClient(t, f, mustConfig(t, fmt.Sprintf(retryBusy, 2, "0.001s", "")))
	for _, d := range deads {
		require.NoError(t, c.AddPeer("kv", d))
	}
	require.Error(t, c.Connect(ctxTimeout(t), "kv"), "two peers cannot connect")
	for i := 0; i < 10; i++ {
		var res map[string]string
		require.NoError(t, c.CallJSON(ctxTimeout(t), "kv", "get", &echoReq{Key: "k"}, &res), "call %d", i)
	}
	assert.Zero(t, scope.Snapshot().Counters()["attempt.unsent+method=get,service=kv"].Value(), "an attempt was tried on a dead peer")
	assert.Equal(t, 20, f.received())
	for _, p := range c.Peers("kv") {
		want := peer.TransientFailure
		if p.HostPort == f.servers[0].HostPort() {
			want = peer.Ready
		}
		assert.Equal(t, want, p.State, p.HostPort)
	}
}

func TestRetriesDisabledAndUnbuffered(t *testing.T) {
	t.Run("disabled", func(t *testing.T) {
		f := startFleet(t, 3, busyFirst(1))
		c, _ := retryClient(t, f, mustConfig(t, fmt.Sprintf(retryBusy, 3, "0.001s", "")), WithRetriesDisabled())
		err := c.CallJSON(ctxTimeout(t), "kv", "get", &echoReq{Key: "k"}, nil)
		var ce *CallError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, codes.Busy, ce.Code)
		assert.Equal(t, 1, f.received())
	})
	t.Run("request larger than the per-call buffer", func(t *testing.T) {
		f := startFleet(t, 3, busyFirst(1))
		c, _ := retryClient(t, f, mustConfig(t, fmt.Sprintf(retryBusy, 3, "0.001s", "")), WithRetryBuffer(1<<20, 16))
		err := c.CallJSON(ctxTimeout(t), "kv", "get", &echoReq{Key: "a key longer than sixteen bytes"}, nil)
		var ce *CallError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, retry.StopUnbuffered, ce.Stop)
		assert.Equal(t, 1, f.received())
	})
}

// policyFor keeps the policy it returned last at hand: calls that
// alternate between methods, and between services with a method of the
// same name, each get their own.
func TestPolicyForEachMethod(t *testing.T) {
	cfg, err := serviceconfig.Parse([]byte(`{"methodConfig":[
		{"name":[{"service":"kv","method":"get"}],"timeout":"1s",
		 "retryPolicy":{"maxAttempts":3,"initialBackoff":"0.01s","maxBackoff":"0.1s","backoffMultiplier":2,"retryableStatusCodes":["BUSY"]}},
		{"name":[{"service":"kv","method":"put"}],"timeout":"2s"},
		{"name":[{"service":"other","method":"get"}],"timeout":"3s"}]}`))
	require.NoError(t, err)
	c, err := New("client", WithServiceConfig(cfg))
	require.NoError(t, err)
	defer c.Close()
	want := map[methodKey]time.Duration{{"kv", "get"}: time.Second, {"kv", "put"}: 2 * time.Second, {"other", "get"}: 3 * time.Second, {"other", "put"}: 0}
	seen := map[methodKey]*methodPolicy{}
	for _, k := range []methodKey{{"kv", "get"}, {"kv", "get"}, {"kv", "put"}, {"kv", "get"}, {"other", "get"}, {"kv", "get"},
		{"other", "put"}, {"other", "get"}, {"kv", "put"}, {"kv", "put"}, {"other", "put"}} {
		p, err := c.policyFor(k.service, k.method)
		require.NoError(t, err)
		assert.Equal(t, want[k], p.timeout, "%v", k)
		assert.Equal(t, k, methodKey{p.service, p.method})
		if q := seen[k]; q != nil {
			assert.Same(t, q, p, "%v: one policy per method", k)
		}
		seen[k] = p
	}
	assert.Equal(t, 3, seen[methodKey{"kv", "get"}].retry.MaxAttempts())
	assert.Equal(t, 1, seen[methodKey{"kv", "put"}].retry.MaxAttempts())
}

func TestRetryOptionsValidated(t *testing.T) {
	_, err := New("c", WithMaxAttemptsCap(0))
	assert.ErrorContains(t, err, "WithMaxAttemptsCap is 0")
	_, err = New("c", WithRetryBuffer(-1, 10))
	assert.ErrorContains(t, err, "WithRetryBuffer")
}
