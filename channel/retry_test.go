package channel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/peer"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/sluice-rpc/sluice/serviceconfig"
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
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		hp := new(string)
		if err2 := ch.RegisterJSON(map[string]any{
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
		}); err2 != nil {
			t.Fatalf("RegisterJSON: %v", err2)
		}
		if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
			t.Fatalf("ListenAndServe: %v", err)
		}
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
	if err != nil {
		t.Fatalf("serviceconfig.Parse: %v", err)
	}
	return cfg
}

const retryBusy = `{"methodConfig":[{"name":[{"service":"kv"}],
 "retryPolicy":{"maxAttempts":%d,"initialBackoff":"%s","maxBackoff":"1s","backoffMultiplier":2,"retryableStatusCodes":["BUSY"]}}]%s}`

// retryClient is a client on the wall clock (backoffs are real waits) with
// the fleet's servers as peers.
func retryClient(t *testing.T, f *fleet, cfg *serviceconfig.Config, opts ...Option) (*Channel, tally.TestScope) {
	t.Helper()
	scope := tally.NewTestScope("", nil)
	opts = append([]Option{WithServiceConfig(cfg), WithScope(scope)}, opts...)
	c, err := New("client", opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	to(c, "kv", WithMethods("get", "echo"))
	for _, s := range f.servers {
		if err := to(c, "kv").AddPeer(s.HostPort()); err != nil {
			t.Fatalf("AddPeer: %v", err)
		}
	}
	// Retries go to distinct peers among those ready: have them all ready.
	if err := to(c, "kv").Connect(ctxTimeout(t)); err != nil {
		t.Fatalf("Connect: %v", err)
	}
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
	if err := to(c, "kv").CallJSON(ctxTimeout(t), "get", &echoReq{Key: "k"}, &out, ResponseHeaders(&rh)); err != nil {
		t.Fatalf("CallJSON: %v", err)
	}

	log := f.arrivals()
	if len(log) != 3 {
		t.Fatalf("len(log) = %d, want %d", len(log), 3)
	}
	seen := map[string]bool{}
	for i, a := range log {
		want := ""
		if i > 0 {
			want = fmt.Sprint(i)
		}
		if a.attemptsHeader != want {
			t.Errorf("attempt %d: got %q, want %q", i, a.attemptsHeader, want)
		}
		if seen[a.server] {
			t.Errorf("attempt %d went to %s again: seen[a.server] = true, want false", i, a.server)
		}
		seen[a.server] = true
	}
	if out.Server != log[2].server {
		t.Errorf("out.Server = %q, want %q", out.Server, log[2].server)
	}

	cn := scope.Snapshot().Counters()
	if got := cn["attempts+method=get,service=kv"].Value(); got != 3 {
		t.Errorf("got %v, want %v", got, 3)
	}
	if got := cn["calls+method=get,service=kv"].Value(); got != 1 {
		t.Errorf("got %v, want %v", got, 1)
	}
	if got := cn["retry.attempts+method=get,service=kv"].Value(); got != 2 {
		t.Errorf("got %v, want %v", got, 2)
	}
	if got := cn["retry.attempts.failed+method=get,service=kv"].Value(); got != 1 {
		t.Errorf("got %v, want %v", got, 1)
	}
	attempts := scope.Snapshot().Histograms()["call.attempts+method=get,service=kv"]
	if attempts == nil {
		t.Fatal("no call.attempts histogram for kv::get")
	}
	if got := attempts.Values()[3]; got != 1 {
		t.Errorf("the call sent 3 attempts: got %v, want %v", got, 1)
	}
	if got := cn["attempt.errors+code=BUSY,method=get,service=kv"].Value(); got != 2 {
		t.Errorf("got %v, want %v", got, 2)
	}
}

func TestCallerLearnsAttempts(t *testing.T) {
	f := startFleet(t, 3, busyFirst(1))
	c, _ := retryClient(t, f, mustConfig(t, fmt.Sprintf(retryBusy, 3, "0.001s", "")))
	res, err := to(c, "kv").Call(ctxTimeout(t), "get", &Request{Format: "json", Arg3: []byte(`{"Key":"k"}`)})
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	if res.Attempts != 2 {
		t.Errorf("res.Attempts = %v, want %v", res.Attempts, 2)
	}
}

func TestNotRetried(t *testing.T) {
	tests := []struct {
		name   string
		answer func(int) error
		check  func(t *testing.T, err error)
	}{
		{"non-retryable code", func(int) error { return Declined("draining") }, func(t *testing.T, err error) {
			var ce *CallError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a %T", err, ce)
			}
			if ce.Code != codes.Declined {
				t.Errorf("ce.Code = %v, want %v", ce.Code, codes.Declined)
			}
		}},
		{"application error", func(int) error { return errEmptyKey }, func(t *testing.T, err error) {
			var ae *ApplicationError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v, want a %T", err, ae)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := startFleet(t, 3, tt.answer)
			c, _ := retryClient(t, f, mustConfig(t, fmt.Sprintf(retryBusy, 5, "0.001s", "")))
			tt.check(t, to(c, "kv").CallJSON(ctxTimeout(t), "get", &echoReq{Key: "k"}, nil))
			// A handler's DECLINED is an ordinary code: the handler ran, so
			// it runs once (only a decline before any handler is retried
			// transparently).
			if got := f.received(); got != 1 {
				t.Errorf("f.received() = %v, want %v", got, 1)
			}
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
	err := to(c, "kv").CallJSON(ctx, "get", &echoReq{Key: "k"}, nil)
	var ce *CallError
	if !errors.As(err, &ce) {
		t.Fatalf("CallJSON error = %v, want a %T", err, ce)
	}
	if ce.Stop != retry.StopContext {
		t.Errorf("err: %v: got %v, want %v", err, ce.Stop, retry.StopContext)
	}
	if ce.Attempts >= 5 {
		t.Errorf("ce.Attempts = %v, want < %v", ce.Attempts, 5)
	}
	if got := time.Since(start); got >= time.Second {
		t.Errorf("time.Since(start) = %v, want < %v", got, time.Second)
	}
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
		err := to(c, "kv").CallJSON(ctxTimeout(t), "get", &echoReq{Key: "k"}, nil)
		if err == nil {
			return 0
		}
		if !errors.As(err, &ce) {
			t.Fatalf("CallJSON error = %v, want a %T", err, ce)
		}
		return ce.Attempts
	}
	// 6 tokens; each failed attempt costs one; retries stop at <= 3 tokens.
	if got := attempts(); got != 3 {
		t.Errorf("attempts() = %v, want %v", got, 3)
	} // 6 -> 3 tokens
	if got := attempts(); got != 1 {
		t.Errorf("attempts() = %v, want %v", got, 1)
	} // at the threshold: the failure returns at once
	if got := attempts(); got != 1 {
		t.Errorf("attempts() = %v, want %v", got, 1)
	}
	tokens := scope.Snapshot().Gauges()["retry.throttle.tokens+service=kv"]
	if tokens == nil {
		t.Fatal("no retry.throttle.tokens gauge for kv")
	}
	if got := tokens.Value(); got != 1.0 {
		t.Errorf("tokens.Value() = %v, want %v", got, 1.0)
	}

	healthy.Store(true)
	for i := 0; i < 4; i++ { // +1 token per success: 1 -> 5
		if got := attempts(); got != 0 {
			t.Fatalf("attempts() = %v, want 0", got)
		}
	}
	healthy.Store(false)
	// 5 tokens: the first failure leaves 4 (> 3: retry), the retry's failure
	// leaves 3 (at the threshold: refused).
	if got := attempts(); got != 2 {
		t.Errorf("retries allowed again once tokens > maxTokens/2: got %v, want %v", got, 2)
	}
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
		if err := to(c, "kv").CallJSON(ctxTimeout(t), "get", &echoReq{Key: "k"}, nil); err != nil {
			t.Fatalf("CallJSON: %v", err)
		}
		log := f.arrivals()
		if len(log) != 2 {
			t.Fatalf("len(log) = %d, want %d", len(log), 2)
		}
		if got := log[1].at.Sub(log[0].at); got < 150*time.Millisecond {
			t.Errorf("log[1].at.Sub(log[0].at) = %v, want >= %v", got, 150*time.Millisecond)
		}
	})
	t.Run("negative stops", func(t *testing.T) {
		f := startFleet(t, 3, func(int) error { return BusyAfter(-1, "go away") })
		c, _ := retryClient(t, f, mustConfig(t, fmt.Sprintf(retryBusy, 5, "0.001s", "")))
		err := to(c, "kv").CallJSON(ctxTimeout(t), "get", &echoReq{Key: "k"}, nil)
		var ce *CallError
		if !errors.As(err, &ce) {
			t.Fatalf("CallJSON error = %v, want a %T", err, ce)
		}
		if ce.Stop != retry.StopPushback {
			t.Errorf("ce.Stop = %v, want %v", ce.Stop, retry.StopPushback)
		}
		if ce.Message != "go away" {
			t.Errorf("the hint is parsed off the message: got %q, want %q", ce.Message, "go away")
		}
		if got := f.received(); got != 1 {
			t.Errorf("f.received() = %v, want %v", got, 1)
		}
	})
	t.Run("shedding sends the hint", func(t *testing.T) {
		s := startServer(t, WithShedding(ShedConfig{MaxRPS: 0.001, Burst: 1, NoRetry: true}))
		c, err := New("client", WithServiceConfig(mustConfig(t, fmt.Sprintf(retryBusy, 5, "0.001s", ""))))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		defer c.Close()
		if err := to(c, "kv").AddPeer(s.ch.HostPort()); err != nil {
			t.Fatalf("AddPeer: %v", err)
		}
		_, err = to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil)
		if err != nil {
			t.Fatalf("CallRaw: %v", err)
		}
		_, err = to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil)
		var ce *CallError
		if !errors.As(err, &ce) {
			t.Fatalf("CallRaw error = %v, want a %T", err, ce)
		}
		if ce.Stop != retry.StopPushback {
			t.Errorf("ce.Stop = %v, want %v", ce.Stop, retry.StopPushback)
		}
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
		if err := to(c, "kv").AddPeer(d); err != nil {
			t.Fatalf("AddPeer: %v", err)
		}
	}
	if err := to(c, "kv").Connect(ctxTimeout(t)); err == nil {
		t.Fatal("two peers cannot connect")
	}
	for i := 0; i < 10; i++ {
		var res map[string]string
		if err := to(c, "kv").CallJSON(ctxTimeout(t), "get", &echoReq{Key: "k"}, &res); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if got := scope.Snapshot().Counters()["attempt.unsent+method=get,service=kv"].Value(); got != 0 {
		t.Errorf("an attempt was tried on a dead peer: got %v, want 0", got)
	}
	if got := f.received(); got != 20 {
		t.Errorf("f.received() = %v, want %v", got, 20)
	}
	for _, p := range to(c, "kv").Peers() {
		want := peer.TransientFailure
		if p.HostPort == f.servers[0].HostPort() {
			want = peer.Ready
		}
		if p.State != want {
			t.Errorf("%s: got %v, want %v", p.HostPort, p.State, want)
		}
	}
}

func TestRetriesDisabledAndUnbuffered(t *testing.T) {
	t.Run("disabled", func(t *testing.T) {
		f := startFleet(t, 3, busyFirst(1))
		c, _ := retryClient(t, f, mustConfig(t, fmt.Sprintf(retryBusy, 3, "0.001s", "")), WithRetries(RetryConfig{Disabled: true}))
		err := to(c, "kv").CallJSON(ctxTimeout(t), "get", &echoReq{Key: "k"}, nil)
		var ce *CallError
		if !errors.As(err, &ce) {
			t.Fatalf("CallJSON error = %v, want a %T", err, ce)
		}
		if ce.Code != codes.Busy {
			t.Errorf("ce.Code = %v, want %v", ce.Code, codes.Busy)
		}
		if got := f.received(); got != 1 {
			t.Errorf("f.received() = %v, want %v", got, 1)
		}
	})
	t.Run("request larger than the per-call buffer", func(t *testing.T) {
		f := startFleet(t, 3, busyFirst(1))
		c, _ := retryClient(t, f, mustConfig(t, fmt.Sprintf(retryBusy, 3, "0.001s", "")), WithRetries(RetryConfig{BufferTotal: 1 << 20, BufferPerCall: 16}))
		err := to(c, "kv").CallJSON(ctxTimeout(t), "get", &echoReq{Key: "a key longer than sixteen bytes"}, nil)
		var ce *CallError
		if !errors.As(err, &ce) {
			t.Fatalf("CallJSON error = %v, want a %T", err, ce)
		}
		if ce.Stop != retry.StopUnbuffered {
			t.Errorf("ce.Stop = %v, want %v", ce.Stop, retry.StopUnbuffered)
		}
		if got := f.received(); got != 1 {
			t.Errorf("f.received() = %v, want %v", got, 1)
		}
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
	if err != nil {
		t.Fatalf("serviceconfig.Parse: %v", err)
	}
	c, err := New("client", WithServiceConfig(cfg))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer c.Close()
	want := map[methodKey]time.Duration{{"kv", "get"}: time.Second, {"kv", "put"}: 2 * time.Second, {"other", "get"}: 3 * time.Second, {"other", "put"}: 0}
	seen := map[methodKey]*methodPolicy{}
	for _, k := range []methodKey{{"kv", "get"}, {"kv", "get"}, {"kv", "put"}, {"kv", "get"}, {"other", "get"}, {"kv", "get"},
		{"other", "put"}, {"other", "get"}, {"kv", "put"}, {"kv", "put"}, {"other", "put"}} {
		p, err := policyOf(c, k.service, k.method)
		if err != nil {
			t.Fatalf("policyFor: %v", err)
		}
		if p.timeout != want[k] {
			t.Errorf("%v: got %v, want %v", k, p.timeout, want[k])
		}
		if got := (methodKey{p.service, p.method}); got != k {
			t.Errorf("methodKey{p.service, p.method} = %+v, want %+v", got, k)
		}
		if q := seen[k]; q != nil {
			if q != p {
				t.Errorf("%v: two policies for one method: %p and %p", k, q, p)
			}
		}
		seen[k] = p
	}
	if got := seen[methodKey{"kv", "get"}].retry.MaxAttempts(); got != 3 {
		t.Errorf("got %v, want %v", got, 3)
	}
	if got := seen[methodKey{"kv", "put"}].retry.MaxAttempts(); got != 1 {
		t.Errorf("got %v, want %v", got, 1)
	}
}

func TestRetryConfigValidated(t *testing.T) {
	for _, tt := range []struct {
		cfg  RetryConfig
		want string
	}{
		{RetryConfig{MaxAttemptsCap: -1}, "channel: RetryConfig.MaxAttemptsCap is -1, must be >= 0 (0 means the default, retry.MaxAttemptsCap: 5)"},
		{RetryConfig{Budget: retry.BudgetConfig{Ratio: 11}}, "channel: RetryConfig.Budget.Ratio is 11, must be in [0, 10] (0 means 0.2)"},
		{RetryConfig{BufferTotal: -1, BufferPerCall: 10}, "channel: RetryConfig.BufferTotal is -1, must be >= 0 (0 means the default, 16777216)"},
		{RetryConfig{BufferTotal: 10, BufferPerCall: -1}, "channel: RetryConfig.BufferPerCall is -1, must be >= 0 (0 means the default, 1048576, or BufferTotal if that is smaller)"},
		{RetryConfig{BufferTotal: 10, BufferPerCall: 11}, "channel: RetryConfig.BufferPerCall is 11, must be at most BufferTotal (10)"},
		{RetryConfig{BufferPerCall: 16<<20 + 1}, "channel: RetryConfig.BufferPerCall is 16777217, must be at most BufferTotal (16777216)"},
	} {
		_, err := New("c", WithRetries(tt.cfg))
		var fe *retry.FieldError
		if err == nil || err.Error() != tt.want || !errors.As(err, &fe) {
			t.Errorf("New(WithRetries(%+v)) = %v, want the *retry.FieldError %q", tt.cfg, err, tt.want)
		}
	}
}

// RetryConfig.MaxAttemptsCap caps every policy's maxAttempts; 0 means
// retry.MaxAttemptsCap.
func TestRetryConfigMaxAttemptsCap(t *testing.T) {
	cfg := mustConfig(t, fmt.Sprintf(retryBusy, 7, "0.001s", ""))
	for _, tt := range []struct{ limit, want int }{{0, retry.MaxAttemptsCap}, {2, 2}, {1, 1}} {
		c, err := New("client", WithServiceConfig(cfg), WithRetries(RetryConfig{MaxAttemptsCap: tt.limit}))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		p, err := policyOf(c, "kv", "get")
		if err != nil {
			t.Fatalf("policyFor: %v", err)
		}
		if got := p.retry.MaxAttempts(); got != tt.want {
			t.Errorf("MaxAttemptsCap %d: a policy of 7 attempts makes %d, want %d", tt.limit, got, tt.want)
		}
		c.Close()
	}
}

// Only a method config naming a method exactly gives it series of its
// own; one naming the whole service, or every call, applies to the
// method without naming it.
func TestNamesExactly(t *testing.T) {
	cfg := mustConfig(t, `{"methodConfig":[
 {"name":[{"service":"kv","method":"Get"}],"timeout":"1s"},
 {"name":[{"service":"kv"}],"timeout":"2s"},
 {"name":[{}],"timeout":"3s"}]}`)
	for _, tt := range []struct {
		cfg             *serviceconfig.Config
		service, method string
		want            bool
	}{
		{cfg, "kv", "Get", true},
		{cfg, "kv", "Put", false},    // the whole service's config
		{cfg, "other", "Get", false}, // the default config
		{cfg, "kv", "", false},
		{nil, "kv", "Get", false},
	} {
		if got := namesExactly(tt.cfg, tt.service, tt.method); got != tt.want {
			t.Errorf("namesExactly(%s, %q) = %v, want %v", tt.service, tt.method, got, tt.want)
		}
	}
}
