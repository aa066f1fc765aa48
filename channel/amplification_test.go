package channel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/stats"
	"github.com/uber-go/tally/v4"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/criticality"
	"github.com/sluice-rpc/sluice/internal/classctx"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/uber/tchannel-go"
	tjson "github.com/uber/tchannel-go/json"
	"github.com/uber/tchannel-go/raw"
)

// chainPolicy retries UNEXPECTED and BUSY three times, quickly, on every
// service of a chain.
const chainPolicy = `{"methodConfig":[{"name":[{"service":"a"},{"service":"b"},{"service":"leaf"}],
	"retryPolicy":{"maxAttempts":3,"initialBackoff":"0.0005s","maxBackoff":"0.001s","backoffMultiplier":2,"retryableStatusCodes":["UNEXPECTED","BUSY"]}}]}`

// chain is client -> a -> b -> leaf, one real server per layer, each
// layer calling the next with chainPolicy. The leaf answers what fail
// says (nil: success) and counts its requests.
type chain struct {
	client *Client
	leaf   atomic.Int64
}

func startChain(t *testing.T, fail func(context.Context) error, opts ...Option) *chain {
	t.Helper()
	cfg := mustConfig(t, chainPolicy)
	ch := &chain{}
	newCh := func(name string) *Channel {
		c, err := New(name, append([]Option{WithServiceConfig(cfg)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	serve := func(c *Channel, h RawHandler) string {
		if err := c.RegisterRaw("work", h); err != nil {
			t.Fatal(err)
		}
		if err := c.ListenAndServe("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		return c.HostPort()
	}
	next := serve(newCh("leaf"), func(ctx context.Context, req *RawRequest) (*RawResponse, error) {
		ch.leaf.Add(1)
		if err := fail(ctx); err != nil {
			return nil, err
		}
		return &RawResponse{Arg3: req.Arg3}, nil
	})
	for _, layer := range []struct{ name, calls string }{{"b", "leaf"}, {"a", "b"}} {
		c := newCh(layer.name)
		down, err := c.NewClient(layer.calls)
		if err != nil {
			t.Fatal(err)
		}
		if err := down.AddPeer(next); err != nil {
			t.Fatal(err)
		}
		next = serve(c, func(ctx context.Context, req *RawRequest) (*RawResponse, error) {
			res, err := down.CallRaw(ctx, "work", nil, req.Arg3)
			if err != nil {
				return nil, err
			}
			return &RawResponse{Arg3: res.Arg3}, nil
		})
	}
	c := newCh("client")
	cl, err := c.NewClient("a")
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.AddPeer(next); err != nil {
		t.Fatal(err)
	}
	ch.client = cl
	return ch
}

// run makes n calls, from 8 goroutines, and returns the leaf's requests
// per call and the calls that failed.
func (ch *chain) run(t *testing.T, n int) (perCall float64, failed int) {
	t.Helper()
	var (
		wg    sync.WaitGroup
		next  atomic.Int64
		fails atomic.Int64
	)
	for range 8 {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if _, err := ch.client.CallRaw(ctxTimeout(t), "work", nil, []byte("x")); err != nil {
					fails.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return float64(ch.leaf.Load()) / float64(n), int(fails.Load())
}

var errBroken = tchannel.NewSystemError(tchannel.ErrCodeUnexpected, "broken")

func alwaysBroken(context.Context) error { return errBroken }

// With every layer retrying a broken leaf three times, the leaf sees at
// most 1.2 requests per client call by default: the layers below a retry
// do not retry again, and every Client's retries, its share of the
// retries above included, stay within 20% of its first attempts (after a
// floor of 100, which 1000 calls pass).
func TestChainAmplificationBounded(t *testing.T) {
	ch := startChain(t, alwaysBroken)
	perCall, failed := ch.run(t, 1000)
	if failed != 1000 {
		t.Errorf("%d calls failed, want all 1000", failed)
	}
	t.Logf("leaf requests per call: %.3f", perCall)
	if perCall > 1.2 {
		t.Errorf("leaf requests per call = %.3f, want <= 1.2", perCall)
	}
}

// The retries the bounds stopped are counted: a layer's calls for an
// inbound retry that failed after their one attempt
// (attempt.skipped.chained), and retries and calls the retry budget
// refused (attempt.skipped.budget); with the bounds off neither counts.
func TestChainStopsCounted(t *testing.T) {
	sum := func(scope tally.TestScope, name string) int64 {
		var n int64
		for _, c := range scope.Snapshot().Counters() {
			if c.Name() == name {
				n += c.Value()
			}
		}
		return n
	}
	bounded := tally.NewTestScope("", nil)
	startChain(t, alwaysBroken, WithScope(bounded)).run(t, 300)
	budget, chained := sum(bounded, stats.AttemptsSkippedBudget), sum(bounded, stats.AttemptsSkippedChained)
	if budget == 0 || chained == 0 {
		t.Errorf("bounded chain: attempt.skipped.budget %d, attempt.skipped.chained %d; want both > 0", budget, chained)
	}
	naive := tally.NewTestScope("", nil)
	startChain(t, alwaysBroken, WithScope(naive),
		WithRetries(RetryConfig{Chained: true, Budget: retry.BudgetConfig{Disabled: true}})).run(t, 20)
	if b, c := sum(naive, stats.AttemptsSkippedBudget), sum(naive, stats.AttemptsSkippedChained); b != 0 || c != 0 {
		t.Errorf("naive chain: attempt.skipped.budget %d, attempt.skipped.chained %d; want 0 and 0", b, c)
	}
}

// attempt.skipped.chained counts only the retries the chain stopped: a
// call serving a retry whose one attempt failed with a code its policy
// does not retry would have stopped there anyway, and is not counted.
// Calls run one at a time, and the leaf answers each one's requests in
// turn: b's first attempt and its two retries fail UNEXPECTED; a retries
// b, and b's one attempt for that retry fails BAD_REQUEST.
func TestChainStopCountsOnlyRetryableFailures(t *testing.T) {
	var n atomic.Int64
	scope := tally.NewTestScope("", nil)
	ch := startChain(t, func(ctx context.Context) error {
		if n.Add(1)%4 == 0 {
			if _, _, retry := classctx.Lookup(ctx); !retry {
				t.Error("the leaf's 4th request of a call is not marked as serving a retry")
			}
			return tchannel.NewSystemError(tchannel.ErrCodeBadRequest, "refused")
		}
		return errBroken
	}, WithScope(scope))
	const calls = 20
	for range calls {
		_, err := ch.client.CallRaw(ctxTimeout(t), "work", nil, []byte("x"))
		if ce := (*CallError)(nil); !errors.As(err, &ce) || ce.Code != codes.BadRequest {
			t.Fatalf("err = %v; want BAD_REQUEST", err)
		}
	}
	if got := n.Load(); got != 4*calls {
		t.Fatalf("the leaf served %d requests, want %d (4 per call)", got, 4*calls)
	}
	for _, c := range scope.Snapshot().Counters() {
		if c.Name() == stats.AttemptsSkippedChained && c.Value() != 0 {
			t.Errorf("%s %v = %d; want 0: every call serving a retry failed BAD_REQUEST, which the policy does not retry", c.Name(), c.Tags(), c.Value())
		}
	}
}

// With the bounds off (Sluice before them), the same chain multiplies:
// 3 x 3 x 3 leaf requests per call.
func TestChainAmplificationNaive(t *testing.T) {
	ch := startChain(t, alwaysBroken, WithRetries(RetryConfig{Chained: true, Budget: retry.BudgetConfig{Disabled: true}}))
	perCall, failed := ch.run(t, 20)
	if failed != 20 || perCall != 27 {
		t.Errorf("%d of 20 calls failed, %.2f leaf requests per call; want all, 27", failed, perCall)
	}
}

// A leaf that fails one request in ten: the chain's one retrying layer
// (the lowest, with its budget to spare) saves nearly every call.
func TestChainFlakyLeafSucceeds(t *testing.T) {
	var n atomic.Int64
	ch := startChain(t, func(context.Context) error {
		if n.Add(1)%10 == 0 {
			return errBroken
		}
		return nil
	})
	perCall, failed := ch.run(t, 500)
	if failed > 0 || perCall > 1.15 {
		t.Errorf("%d of 500 calls failed, %.3f leaf requests per call; want 0, <= 1.15", failed, perCall)
	}
}

// A middle tier whose downstream call failed Busy answers Busy, saying
// not to retry: its caller, which retries BUSY, makes one attempt.
func TestOverloadPassesUpward(t *testing.T) {
	ch := startChain(t, func(context.Context) error { return Busy("leaf overloaded") }, WithRetries(RetryConfig{Budget: retry.BudgetConfig{Disabled: true}}))
	_, err := ch.client.CallRaw(ctxTimeout(t), "work", nil, []byte("x"))
	var ce *CallError
	if !errors.As(err, &ce) || ce.Code != codes.Busy || ce.Attempts != 1 || ce.Stop != retry.StopPushback {
		t.Fatalf("err = %v; want BUSY after 1 attempt, stopped by pushback", err)
	}
	// b retried the leaf (up to 3 requests: its busy limiter may refuse
	// the last), and a did not retry b: 9 if it had.
	if got := ch.leaf.Load(); got < 1 || got > 3 {
		t.Errorf("leaf requests = %d, want 1 to 3 (only the layer above it retries)", got)
	}
}

// markServer is a real server of "kv" that records, for each request,
// whether its handler's context says it is a retry.
type markServer struct {
	ch   *Channel
	mu   sync.Mutex
	seen []bool
	// fail answers the nth request (0-based) with an error, or nil.
	fail func(n int) error
}

func (m *markServer) record(ctx context.Context) error {
	_, _, r := classctx.Lookup(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen = append(m.seen, r)
	return m.fail(len(m.seen) - 1)
}

func (m *markServer) marks() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return fmt.Sprint(m.seen)
}

func startMarkServer(t *testing.T, fail func(n int) error) *markServer {
	t.Helper()
	ch, err := New("kv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.Close)
	m := &markServer{ch: ch, fail: fail}
	if err := ch.RegisterRaw("echo", func(ctx context.Context, req *RawRequest) (*RawResponse, error) {
		return &RawResponse{}, m.record(ctx)
	}); err != nil {
		t.Fatal(err)
	}
	if err := ch.RegisterJSON(map[string]any{"get": func(ctx tjson.Context, req *echoReq) (*echoRes, error) {
		return &echoRes{}, m.record(ctx)
	}}); err != nil {
		t.Fatal(err)
	}
	if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	return m
}

// A Sluice client's retries reach the handler marked, raw and JSON, in
// any class; first attempts do not.
func TestRetryMarkReachesHandler(t *testing.T) {
	for _, class := range []criticality.Class{criticality.Critical, criticality.Sheddable} {
		for _, format := range []string{"raw", "json"} {
			t.Run(class.String()+"/"+format, func(t *testing.T) {
				m := startMarkServer(t, func(n int) error {
					if n == 0 {
						return errBroken
					}
					return nil
				})
				c, err := New("client", WithServiceConfig(mustConfig(t, `{"methodConfig":[{"name":[{"service":"kv"}],
					"retryPolicy":{"maxAttempts":3,"initialBackoff":"0.001s","maxBackoff":"0.001s","backoffMultiplier":1,"retryableStatusCodes":["UNEXPECTED"]}}]}`)))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(c.Close)
				if err := to(c, "kv").AddPeer(m.ch.HostPort()); err != nil {
					t.Fatal(err)
				}
				ctx := criticality.WithClass(ctxTimeout(t), class)
				if format == "raw" {
					_, err = to(c, "kv").CallRaw(ctx, "echo", nil, nil)
				} else {
					err = to(c, "kv").CallJSON(ctx, "get", &echoReq{Key: "k"}, &echoRes{})
				}
				if err != nil {
					t.Fatal(err)
				}
				if got := m.marks(); got != "[false true]" {
					t.Errorf("retry marks seen = %s, want [false true]", got)
				}
			})
		}
	}
}

// A plain tchannel-go client's calls are first attempts, even when its
// routing delegate holds what a Sluice client's retry mark looks like.
func TestPlainClientCallsAreFirstAttempts(t *testing.T) {
	m := startMarkServer(t, func(int) error { return nil })
	plain, err := tchannel.NewChannel("plain-client", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plain.Close)
	for _, rd := range []string{"", "\x00c", "x\x00a"} {
		ctx, cancel := tchannel.NewContextBuilder(2 * time.Second).SetRoutingDelegate(rd).Build()
		_, _, _, err := raw.Call(ctx, plain, m.ch.HostPort(), "kv", "echo", nil, nil)
		cancel()
		if err != nil {
			t.Fatalf("routing delegate %q: %v", rd, err)
		}
	}
	if got := m.marks(); got != "[false false false]" {
		t.Errorf("retry marks seen = %s, want [false false false]", got)
	}
}

func TestUnmarkClass(t *testing.T) {
	for _, tc := range []struct {
		rd, want string
		class    criticality.Class
		retry    bool
	}{
		{"", "", 0, false},
		{"svc", "svc", 0, false},
		{"\x001", "", criticality.Sheddable, false},
		{"svc\x00c", "svc", criticality.Critical, true},
		{"\x00b", "", criticality.SheddablePlus, true},
		{"\x00d", "", criticality.CriticalPlus, true},
		{"\x00e", "", 0, false},
		{"\x009", "", 0, false},
		{"\x003r", "", 0, false},
	} {
		rd, c, r := unmarkClass(tc.rd)
		if rd != tc.want || c != tc.class || r != tc.retry {
			t.Errorf("unmarkClass(%q) = %q, %v, %v; want %q, %v, %v", tc.rd, rd, c, r, tc.want, tc.class, tc.retry)
		}
		if tc.class != 0 {
			m := markClass(nil, tchannel.Raw, tc.class, tc.retry)
			if rd, c, r := unmarkClass(tc.want + m.RoutingDelegate); rd != tc.want || c != tc.class || r != tc.retry {
				t.Errorf("markClass(%v, %v) does not read back: %q, %v, %v", tc.class, tc.retry, rd, c, r)
			}
		}
	}
}

// A hedged call made for an inbound retry sends one attempt, no hedges;
// made for a first attempt, it hedges as its policy says.
func TestCallServingARetryDoesNotHedge(t *testing.T) {
	var leaf atomic.Int64
	newServer := func(name string) *Channel {
		c, err := New(name, WithServiceConfig(mustConfig(t, `{"methodConfig":[
			{"name":[{"service":"leaf"}],"hedgingPolicy":{"maxAttempts":3,"hedgingDelay":"0s","nonFatalStatusCodes":["UNEXPECTED"]}},
			{"name":[{"service":"mid"}],"retryPolicy":{"maxAttempts":2,"initialBackoff":"0.001s","maxBackoff":"0.001s","backoffMultiplier":1,"retryableStatusCodes":["UNEXPECTED"]}}]}`)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	lc := newServer("leaf")
	if err := lc.RegisterRaw("work", func(ctx context.Context, req *RawRequest) (*RawResponse, error) {
		leaf.Add(1)
		return nil, errBroken
	}); err != nil {
		t.Fatal(err)
	}
	mid := newServer("mid")
	var down *Client
	if err := mid.RegisterRaw("work", func(ctx context.Context, req *RawRequest) (*RawResponse, error) {
		_, err := down.CallRaw(ctx, "work", nil, nil)
		return nil, err
	}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*Channel{lc, mid} {
		if err := c.ListenAndServe("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if down, err = mid.NewClient("leaf"); err != nil {
		t.Fatal(err)
	}
	// Three leaf peers (the same server three times over is one peer):
	// the hedges need distinct peers.
	for range 2 {
		extra := newServer("leaf")
		if err := extra.RegisterRaw("work", func(ctx context.Context, req *RawRequest) (*RawResponse, error) {
			leaf.Add(1)
			return nil, errBroken
		}); err != nil {
			t.Fatal(err)
		}
		if err := extra.ListenAndServe("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if err := down.AddPeer(extra.HostPort()); err != nil {
			t.Fatal(err)
		}
	}
	if err := down.AddPeer(lc.HostPort()); err != nil {
		t.Fatal(err)
	}
	if err := down.Connect(ctxTimeout(t)); err != nil {
		t.Fatal(err)
	}
	top := newServer("top")
	cl, err := top.NewClient("mid")
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.AddPeer(mid.HostPort()); err != nil {
		t.Fatal(err)
	}
	// The first attempt's call hedges 3 times; the retry's sends 1.
	if _, err := cl.CallRaw(ctxTimeout(t), "work", nil, nil); err == nil {
		t.Fatal("the call succeeded; want the leaf's failure")
	}
	if got := leaf.Load(); got != 4 {
		t.Errorf("leaf requests = %d, want 4 (3 hedges for the first attempt, 1 for the retry)", got)
	}
}
