package channel

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	require.NoError(t, err)
	s := &hedgeServer{ch: ch, behave: behave}
	require.NoError(t, ch.RegisterJSON(map[string]any{
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
	}))
	require.NoError(t, ch.ListenAndServe("127.0.0.1:0"))
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
	require.NoError(t, err)
	t.Cleanup(c.Close)
	for _, s := range servers {
		require.NoError(t, c.AddPeer("kv", s.ch.HostPort()))
	}
	// Hedges go to distinct peers among those ready: have them all ready,
	// so that the first hedges do not share the first peer to connect.
	require.NoError(t, c.Connect(ctxTimeout(t), "kv"))
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
	res, err := c.Call(ctxTimeout(t), "kv", "get", &Request{Format: "json", Arg3: []byte(`{"Key":"k"}`)})
	require.NoError(t, err)
	assert.Equal(t, 3, res.Attempts)
	require.Len(t, res.Peers, 3)
	assert.NotEqual(t, res.Peers[0], res.Peers[1])
	assert.NotEqual(t, res.Peers[1], res.Peers[2])
	assert.NotEqual(t, res.Peers[0], res.Peers[2])
	for _, s := range servers {
		assert.EqualValues(t, 1, s.received.Load())
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
	err := c.CallJSON(ctxTimeout(t), "kv", "get", &echoReq{Key: "k"}, nil)
	var ce *CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, codes.Unexpected, ce.Code)
	assert.Less(t, time.Since(start), time.Second, "the call waited for the slow attempt")
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
	require.NoError(t, c.CallJSON(ctxTimeout(t), "kv", "get", &echoReq{Key: "k"}, nil))
	assert.Less(t, time.Since(start), time.Second, "the hedge waited for hedgingDelay after a BUSY")
	received, _ := sum(servers...)
	assert.EqualValues(t, 2, received)
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
	require.NoError(t, c.CallJSON(ctxTimeout(t), "kv", "get", &echoReq{Key: "k"}, nil))
	assert.EqualValues(t, 3, arrived.Load())
}

func TestNegativePushbackStopsHedging(t *testing.T) {
	servers := []*hedgeServer{
		startHedgeServer(t, func(context.Context) error { return BusyAfter(-1, "stop") }),
		startHedgeServer(t, func(context.Context) error { return BusyAfter(-1, "stop") }),
		startHedgeServer(t, func(context.Context) error { return BusyAfter(-1, "stop") }),
	}
	c := hedgeClient(t, fmt.Sprintf(hedgeCfg, 3, "0.05s", ""), servers...)
	err := c.CallJSON(ctxTimeout(t), "kv", "get", &echoReq{Key: "k"}, nil)
	var ce *CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, retry.StopPushback, ce.Stop)
	received, _ := sum(servers...)
	assert.EqualValues(t, 1, received)
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
		c.CallJSON(ctxTimeout(t), "kv", "get", &echoReq{Key: "k"}, nil)
	}
	busy.Store(false)
	before, _ := sum(servers...)
	res, err := c.Call(ctxTimeout(t), "kv", "get", &Request{Format: "json", Arg3: []byte(`{"Key":"k"}`)})
	require.NoError(t, err, "the first attempt must still go out")
	assert.Equal(t, 1, res.Attempts, "a hedge went out with the bucket at or below half")
	after, _ := sum(servers...)
	assert.EqualValues(t, 1, after-before)
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
		require.NoError(t, c.CallJSON(ctxTimeout(t), "kv", "get", &echoReq{Key: "k"}, nil))
	}
	// With the learned delay (a few ms) slow requests are hedged; with the
	// fixed 1s fallback, 6 slow calls would take 1.8s.
	assert.Less(t, time.Since(start), 1500*time.Millisecond)
	p, err := c.policyFor("kv", "get")
	require.NoError(t, err)
	assert.Less(t, p.est.Delay(), 100*time.Millisecond)
}

// A hedged call that runs out of time reports TIMEOUT, not the CANCELLED of
// the attempts the executor cancelled on its way out.
func TestHedgedDeadlineIsTimeout(t *testing.T) {
	servers := []*hedgeServer{startHedgeServer(t, slow(time.Second)), startHedgeServer(t, slow(time.Second))}
	c := hedgeClient(t, fmt.Sprintf(hedgeCfg, 2, "0.005s", ""), servers...)
	for i := 0; i < 20; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		err := c.CallJSON(ctx, "kv", "get", &echoReq{Key: "k"}, nil)
		cancel()
		var ce *CallError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, codes.Timeout, ce.Code, "call %d: %v", i, err)
	}
}
