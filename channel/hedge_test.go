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
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/uber/tchannel-go"
	tjson "github.com/uber/tchannel-go/json"
)

// hedgeServer is a real server of "kv" whose JSON "get" runs behave. It
// counts requests, and requests whose context was cancelled (cancel frames
// reach it: Sluice turns cancel propagation on).
type hedgeServer struct {
	ch                  *Channel
	received, cancelled atomic.Int64
	behave              func(ctx context.Context) error
}

func startHedgeServer(t *testing.T, behave func(ctx context.Context) error) *hedgeServer {
	t.Helper()
	ch, err := New("kv")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	s := &hedgeServer{ch: ch, behave: behave}
	if err2 := ch.RegisterJSON(map[string]any{
		"get": func(ctx tjson.Context, req *echoReq) (*echoRes, error) {
			s.received.Add(1)
			err := s.behave(ctx)
			if ctx.Err() == context.Canceled {
				s.cancelled.Add(1)
			}
			if err != nil {
				return nil, err
			}
			return &echoRes{Key: req.Key, Server: ch.HostPort()}, nil
		},
	}); err2 != nil {
		t.Fatalf("RegisterJSON: %v", err2)
	}
	if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatalf("ListenAndServe: %v", err)
	}
	t.Cleanup(ch.Close)
	return s
}

// slow answers after d, or when the call is cancelled.
func slow(d time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		select {
		case <-time.After(d):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

const hedgeCfg = `{"methodConfig":[{"name":[{"service":"kv"}],
 "hedgingPolicy":{"maxAttempts":%d,"hedgingDelay":"%s","nonFatalStatusCodes":["BUSY"]}}]%s}`

func hedgeClient(t *testing.T, cfg string, servers ...*hedgeServer) *Channel {
	t.Helper()
	c, err := New("client", WithServiceConfig(mustConfig(t, cfg)))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	for _, s := range servers {
		if err := to(c, "kv").AddPeer(s.ch.HostPort()); err != nil {
			t.Fatalf("AddPeer: %v", err)
		}
	}
	// Hedges go to distinct peers among those ready: have them all ready,
	// so that the first hedges do not share the first peer to connect.
	if err := to(c, "kv").Connect(ctxTimeout(t)); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	return c
}

func sum(servers ...*hedgeServer) (received, cancelled int64) {
	for _, s := range servers {
		received += s.received.Load()
		cancelled += s.cancelled.Load()
	}
	return
}

// Hedges go out every 20ms, each to a server not used yet; the first
// answer wins and the servers still working see the cancellation. The
// first two requests to arrive wait for their cancellation, the third
// answers at once: no timing decides who wins or whether a loser finishes
// before its cancel frame arrives.
func TestHedgesOnDistinctPeersAndLosersCancelled(t *testing.T) {
	var arrivals atomic.Int64
	behave := func(ctx context.Context) error {
		if arrivals.Add(1) == 3 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(testwait.Limit): // no cancel frame came: the test fails below
			return nil
		}
	}
	servers := []*hedgeServer{startHedgeServer(t, behave), startHedgeServer(t, behave), startHedgeServer(t, behave)}
	c := hedgeClient(t, fmt.Sprintf(hedgeCfg, 3, "0.02s", ""), servers...)
	res, err := to(c, "kv").Call(ctxTimeout(t), "get", &Request{Format: "json", Arg3: []byte(`{"Key":"k"}`)})
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	if res.Attempts != 3 {
		t.Errorf("res.Attempts = %v, want %v", res.Attempts, 3)
	}
	if len(res.Peers) != 3 {
		t.Fatalf("len(res.Peers) = %d, want %d", len(res.Peers), 3)
	}
	if res.Peers[1] == res.Peers[0] {
		t.Errorf("res.Peers[1] = %q, want a different value", res.Peers[1])
	}
	if res.Peers[2] == res.Peers[1] {
		t.Errorf("res.Peers[2] = %q, want a different value", res.Peers[2])
	}
	if res.Peers[2] == res.Peers[0] {
		t.Errorf("res.Peers[2] = %q, want a different value", res.Peers[2])
	}
	for _, s := range servers {
		if got := s.received.Load(); got != 1 {
			t.Errorf("s.received.Load() = %v, want %v", got, 1)
		}
	}
	// The two losers are cancelled; their servers observe it (cancel frames
	// travel asynchronously, so wait for them, bounded).
	testwait.Until(t, "the servers to see both cancellations", func() bool { _, cancelled := sum(servers...); return cancelled == 2 })
}

func TestFatalCodeEndsHedgedCallAtOnce(t *testing.T) {
	fatal := startHedgeServer(t, func(context.Context) error {
		return tchannel.NewSystemError(tchannel.ErrCodeUnexpected, "handler crashed")
	})
	slowOK := startHedgeServer(t, slow(2*time.Second))
	c := hedgeClient(t, fmt.Sprintf(hedgeCfg, 2, "0s", ""), fatal, slowOK)
	start := time.Now()
	err := to(c, "kv").CallJSON(ctxTimeout(t), "get", &echoReq{Key: "k"}, nil)
	var ce *CallError
	if !errors.As(err, &ce) {
		t.Fatalf("CallJSON error = %v, want a %T", err, ce)
	}
	if ce.Code != codes.Unexpected {
		t.Errorf("ce.Code = %v, want %v", ce.Code, codes.Unexpected)
	}
	if got := time.Since(start); got >= time.Second {
		t.Errorf("the call waited for the slow attempt: got %v, want < %v", got, time.Second)
	}
}

func TestNonFatalFailureSendsNextHedgeAtOnce(t *testing.T) {
	var n atomic.Int64
	behave := func(ctx context.Context) error {
		if n.Add(1) == 1 {
			return Busy("first one is busy")
		}
		return nil
	}
	servers := []*hedgeServer{startHedgeServer(t, behave), startHedgeServer(t, behave)}
	c := hedgeClient(t, fmt.Sprintf(hedgeCfg, 2, "10s", ""), servers...)
	start := time.Now()
	if err := to(c, "kv").CallJSON(ctxTimeout(t), "get", &echoReq{Key: "k"}, nil); err != nil {
		t.Fatalf("CallJSON: %v", err)
	}
	if got := time.Since(start); got >= time.Second {
		t.Errorf("the hedge waited for hedgingDelay after a BUSY: got %v, want < %v", got, time.Second)
	}
	received, _ := sum(servers...)
	if received != 2 {
		t.Errorf("received = %v, want %v", received, 2)
	}
}

func TestZeroDelaySendsAllAtOnce(t *testing.T) {
	var arrived atomic.Int64
	all := make(chan struct{})
	behave := func(ctx context.Context) error {
		if arrived.Add(1) == 3 {
			close(all)
		}
		select { // nobody answers before all three arrived
		case <-all:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	servers := []*hedgeServer{startHedgeServer(t, behave), startHedgeServer(t, behave), startHedgeServer(t, behave)}
	c := hedgeClient(t, fmt.Sprintf(hedgeCfg, 3, "0s", ""), servers...)
	if err := to(c, "kv").CallJSON(ctxTimeout(t), "get", &echoReq{Key: "k"}, nil); err != nil {
		t.Fatalf("CallJSON: %v", err)
	}
	if got := arrived.Load(); got != 3 {
		t.Errorf("arrived.Load() = %v, want %v", got, 3)
	}
}

func TestNegativePushbackStopsHedging(t *testing.T) {
	servers := []*hedgeServer{
		startHedgeServer(t, func(context.Context) error { return BusyAfter(-1, "stop") }),
		startHedgeServer(t, func(context.Context) error { return BusyAfter(-1, "stop") }),
		startHedgeServer(t, func(context.Context) error { return BusyAfter(-1, "stop") }),
	}
	c := hedgeClient(t, fmt.Sprintf(hedgeCfg, 3, "0.05s", ""), servers...)
	err := to(c, "kv").CallJSON(ctxTimeout(t), "get", &echoReq{Key: "k"}, nil)
	var ce *CallError
	if !errors.As(err, &ce) {
		t.Fatalf("CallJSON error = %v, want a %T", err, ce)
	}
	if ce.Stop != retry.StopPushback {
		t.Errorf("ce.Stop = %v, want %v", ce.Stop, retry.StopPushback)
	}
	received, _ := sum(servers...)
	if received != 1 {
		t.Errorf("received = %v, want %v", received, 1)
	}
}

// An empty retry-throttling bucket suppresses hedges, never the first
// attempt.
func TestEmptyBucketSuppressesHedgesNotTheFirstAttempt(t *testing.T) {
	var busy atomic.Bool
	busy.Store(true)
	behave := func(ctx context.Context) error {
		if busy.Load() {
			return Busy("drain the bucket")
		}
		return slow(50 * time.Millisecond)(ctx)
	}
	servers := []*hedgeServer{startHedgeServer(t, behave), startHedgeServer(t, behave), startHedgeServer(t, behave)}
	c := hedgeClient(t, fmt.Sprintf(hedgeCfg, 3, "0.005s", `,"retryThrottling":{"maxTokens":4,"tokenRatio":0.001}`), servers...)
	for i := 0; i < 3; i++ { // each BUSY costs a token: 4 -> at most 2
		to(c, "kv").CallJSON(ctxTimeout(t), "get", &echoReq{Key: "k"}, nil)
	}
	busy.Store(false)
	before, _ := sum(servers...)
	res, err := to(c, "kv").Call(ctxTimeout(t), "get", &Request{Format: "json", Arg3: []byte(`{"Key":"k"}`)})
	if err != nil {
		t.Fatalf("the first attempt must still go out: %v", err)
	}
	if res.Attempts != 1 {
		t.Errorf("a hedge went out with the bucket at or below half: got %v, want %v", res.Attempts, 1)
	}
	after, _ := sum(servers...)
	if after-before != 1 {
		t.Errorf("after-before = %v, want %v", after-before, 1)
	}
}

func TestAdaptiveHedgingLearnsTheDelay(t *testing.T) {
	var n atomic.Int64
	behave := func(ctx context.Context) error {
		if n.Add(1)%10 == 0 { // every 10th request is slow
			return slow(300 * time.Millisecond)(ctx)
		}
		return nil
	}
	servers := []*hedgeServer{startHedgeServer(t, behave), startHedgeServer(t, behave), startHedgeServer(t, behave)}
	cfg := `{"methodConfig":[{"name":[{"service":"kv"}],"hedgingPolicy":{"maxAttempts":2,"hedgingDelay":"1s",
	  "nonFatalStatusCodes":["BUSY"],"adaptiveDelay":{"quantile":0.8,"window":20,"floor":"0.002s","cap":"0.1s","budget":0.5}}}]}`
	c := hedgeClient(t, cfg, servers...)
	start := time.Now()
	for i := 0; i < 60; i++ {
		if err := to(c, "kv").CallJSON(ctxTimeout(t), "get", &echoReq{Key: "k"}, nil); err != nil {
			t.Fatalf("CallJSON: %v", err)
		}
	}
	// With the learned delay (a few ms) slow requests are hedged; with the
	// fixed 1s fallback, 6 slow calls would take 1.8s.
	if got := time.Since(start); got >= 1500*time.Millisecond {
		t.Errorf("time.Since(start) = %v, want < %v", got, 1500*time.Millisecond)
	}
	p, err := policyOf(c, "kv", "get")
	if err != nil {
		t.Fatalf("policyFor: %v", err)
	}
	if got := p.est.Delay(); got >= 100*time.Millisecond {
		t.Errorf("p.est.Delay() = %v, want < %v", got, 100*time.Millisecond)
	}
}

// A first attempt cut off by the deadline (TIMEOUT) or by its caller
// (CANCELLED) is a cut-off for the adaptive delay, one that finished is a
// latency: of 7 fast calls, 2 cut off at 20ms and 1 that took 100ms, the
// 90th percentile is 100ms. Observed as finished, the cut-offs would put it
// at 20ms.
func TestAdaptiveHedgingCountsCutOffsAsLonger(t *testing.T) {
	const (
		fast = iota
		stuck
		slowFirst // the first request of the call takes 100ms, the others 1s
	)
	var (
		mode      atomic.Int64
		firstTook atomic.Bool
		held      = make(chan struct{}, 1) // a stuck server holds a first attempt
	)
	behave := func(ctx context.Context) error {
		switch mode.Load() {
		case stuck:
			// Only a first attempt (no attempts header) signals: a hedge
			// arriving after the signal was taken would otherwise leave
			// it for the next call, cut off before its own first attempt
			// was sent.
			if _, hedged := ctx.(tjson.Context).Headers()[retry.AttemptsHeader]; !hedged {
				select {
				case held <- struct{}{}:
				default:
				}
			}
			return slow(time.Second)(ctx)
		case slowFirst:
			if firstTook.CompareAndSwap(false, true) {
				return slow(100 * time.Millisecond)(ctx)
			}
			return slow(time.Second)(ctx)
		}
		return nil
	}
	servers := []*hedgeServer{startHedgeServer(t, behave), startHedgeServer(t, behave)}
	// Window 10: the quantile is recomputed at every observation.
	cfg := `{"methodConfig":[{"name":[{"service":"kv"}],"hedgingPolicy":{"maxAttempts":2,"hedgingDelay":"1s",
	  "nonFatalStatusCodes":["BUSY"],"adaptiveDelay":{"quantile":0.9,"window":10,"floor":"0.001s","cap":"1s"}}}]}`
	c := hedgeClient(t, cfg, servers...)
	call := func(ctx context.Context) error { return to(c, "kv").CallJSON(ctx, "get", &echoReq{Key: "k"}, nil) }
	for range 7 {
		if err := call(ctxTimeout(t)); err != nil {
			t.Fatalf("a fast call: %v", err)
		}
	}
	// Each stuck call is cut off 20ms after a server holds its first
	// attempt: cut off on a timer instead, a loaded machine can end a call
	// before its first attempt is sent, leaving nothing to observe. The
	// buffer of held takes the one first attempt of each call.
	mode.Store(stuck)
	for _, want := range []error{context.DeadlineExceeded, context.Canceled} {
		ctx := newCutContext()
		go func() {
			<-held
			time.Sleep(20 * time.Millisecond)
			ctx.cut(want)
		}()
		err := call(ctx)
		code := codes.Timeout
		if want == context.Canceled {
			code = codes.Cancelled
		}
		if ce := (*CallError)(nil); !errors.As(err, &ce) || ce.Code != code {
			t.Fatalf("a call cut off with %v: %v, want a %v *CallError", want, err, code)
		}
	}
	mode.Store(slowFirst)
	if err := call(ctxTimeout(t)); err != nil {
		t.Fatalf("the slow call: %v", err)
	}
	p, err := policyOf(c, "kv", "get")
	if err != nil {
		t.Fatalf("policyFor: %v", err)
	}
	if n := p.est.Samples(); n != 10 {
		t.Fatalf("%d first attempts observed, want 10", n)
	}
	if got := p.est.Delay(); got < 100*time.Millisecond {
		t.Errorf("delay %v after 7 fast calls, 2 cut off at 20ms and 1 of 100ms; want the 100ms call's latency", got)
	}
}

// A first attempt cut off after its peer was chosen but before its call
// began (a hedge won, or the deadline came, while a loaded client was
// beginning it) is a cut-off for the adaptive delay as well: left out, the
// estimate would forget exactly the attempts that were slowest to start.
// An attempt middleware cancels, 50ms into the call, the context it passes
// on, which ends the attempt in tchannel-go's BeginCall. With 8 fast calls
// and one of 100ms after it, the 90th percentile is 100ms; counted as a
// latency of 50ms, the cut-off would put it at 50ms.
func TestAdaptiveHedgingCountsUnsentCutOffs(t *testing.T) {
	var cutNext, slowNow atomic.Bool
	cutNext.Store(true)
	cut := func(ctx context.Context, a *Attempt, next AttemptInvoker) (*Response, error) {
		if a.Number > 0 || !cutNext.CompareAndSwap(true, false) {
			return next(ctx, a)
		}
		time.Sleep(50 * time.Millisecond) // time the call has taken when it is cut off
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		return next(cctx, a)
	}
	server := startHedgeServer(t, func(ctx context.Context) error {
		if slowNow.Load() {
			return slow(100 * time.Millisecond)(ctx)
		}
		return nil
	})
	cfg := `{"methodConfig":[{"name":[{"service":"kv"}],"hedgingPolicy":{"maxAttempts":2,"hedgingDelay":"1s",
	  "nonFatalStatusCodes":["BUSY"],"adaptiveDelay":{"quantile":0.9,"window":10,"floor":"0.001s","cap":"1s"}}}]}`
	c, err := New("client", WithServiceConfig(mustConfig(t, cfg)), WithAttemptMiddleware(cut))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	if err := to(c, "kv").AddPeer(server.ch.HostPort()); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}
	if err := to(c, "kv").Connect(ctxTimeout(t)); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	call := func() error { return to(c, "kv").CallJSON(ctxTimeout(t), "get", &echoReq{Key: "k"}, nil) }
	// The first call's attempt is cut off before it is sent; no hedge
	// is due within the fallback delay of 1s.
	if err, ce := call(), (*CallError)(nil); !errors.As(err, &ce) || ce.Code != codes.Cancelled {
		t.Fatalf("a call whose first attempt was cancelled: %v, want a CANCELLED *CallError", err)
	}
	if got := server.received.Load(); got != 0 {
		t.Fatalf("the server received %d requests, want 0: the attempt was to be cut off before it was sent", got)
	}
	for range 8 {
		if err := call(); err != nil {
			t.Fatalf("a fast call: %v", err)
		}
	}
	slowNow.Store(true)
	if err := call(); err != nil {
		t.Fatalf("the slow call: %v", err)
	}
	p, err := policyOf(c, "kv", "get")
	if err != nil {
		t.Fatalf("policyFor: %v", err)
	}
	if n := p.est.Samples(); n != 10 {
		t.Fatalf("%d first attempts observed, want 10 with the one cut off before it was sent", n)
	}
	if got := p.est.Delay(); got < 100*time.Millisecond {
		t.Errorf("delay %v after a call cut off at 50ms, 8 fast calls and 1 of 100ms; want the 100ms call's latency", got)
	}
}

// A hedged call that runs out of time reports TIMEOUT, not the CANCELLED of
// the attempts the executor cancelled on its way out.
func TestHedgedDeadlineIsTimeout(t *testing.T) {
	t.Parallel() // each call waits out its deadline
	servers := []*hedgeServer{startHedgeServer(t, slow(time.Second)), startHedgeServer(t, slow(time.Second))}
	c := hedgeClient(t, fmt.Sprintf(hedgeCfg, 2, "0.005s", ""), servers...)
	for i := 0; i < 20; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		err := to(c, "kv").CallJSON(ctx, "get", &echoReq{Key: "k"}, nil)
		cancel()
		var ce *CallError
		if !errors.As(err, &ce) {
			t.Fatalf("CallJSON error = %v, want a %T", err, ce)
		}
		if ce.Code != codes.Timeout {
			t.Fatalf("call %d: %v: got %v, want %v", i, err, ce.Code, codes.Timeout)
		}
	}
}

// cutContext is a context without a deadline that ends, with the error
// its cut gives (context.DeadlineExceeded for a deadline passing), when
// the test says so rather than on a timer.
type cutContext struct {
	context.Context
	done chan struct{}
	once sync.Once
	err  atomic.Value
}

func newCutContext() *cutContext {
	return &cutContext{Context: context.Background(), done: make(chan struct{})}
}

func (c *cutContext) cut(err error) {
	c.once.Do(func() { c.err.Store(err); close(c.done) })
}

func (c *cutContext) Done() <-chan struct{} { return c.done }

func (c *cutContext) Err() error {
	select {
	case <-c.done:
		return c.err.Load().(error)
	default:
		return nil
	}
}
