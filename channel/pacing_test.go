package channel

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/pacing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	tjson "github.com/uber/tchannel-go/json"
)

// quotaServer is a real server of "kv" with a quota of limit requests per
// fixed window (pacing.Quota), shared by all callers. It attaches quota
// headers to its answers and answers Busy, with the window's time left as
// pushback, once the quota is spent.
type quotaServer struct {
	ch     *Channel
	window time.Duration
	start  time.Time

	mu  sync.Mutex
	log []quotaArrival
}

type quotaArrival struct {
	who    string
	window int64
	busy   bool
}

func startQuotaServer(t *testing.T, limit int, window time.Duration) *quotaServer {
	t.Helper()
	ch, err := New("kv")
	require.NoError(t, err)
	quota, err := pacing.NewQuota(pacing.QuotaConfig{Limit: int64(limit), Window: window, Dimension: pacing.DimensionUser})
	require.NoError(t, err)
	q := &quotaServer{ch: ch, window: window, start: time.Now()}
	require.NoError(t, ch.RegisterJSON(map[string]any{
		"get": func(ctx tjson.Context, req *echoReq) (*echoRes, error) {
			sig, ok := quota.Take()
			q.mu.Lock()
			// The window index, from the time left: windows are aligned to
			// the quota's start.
			idx := int64((time.Since(q.start) + sig.TimeLeft - q.window/2) / q.window)
			q.log = append(q.log, quotaArrival{who: ctx.Headers()["who"], window: idx, busy: !ok})
			q.mu.Unlock()
			if !ok {
				return nil, BusyAfter(sig.TimeLeft, "rate limited")
			}
			h := map[string]string{}
			pacing.SetHeaders(h, sig)
			ctx.SetResponseHeaders(h)
			return &echoRes{Key: req.Key}, nil
		},
	}))
	require.NoError(t, ch.ListenAndServe("127.0.0.1:0"))
	t.Cleanup(ch.Close)
	return q
}

func (q *quotaServer) arrivals(who string) []quotaArrival {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []quotaArrival
	for _, a := range q.log {
		if who == "" || a.who == who {
			out = append(out, a)
		}
	}
	return out
}

func pacedClient(t *testing.T, q *quotaServer, maxDelay time.Duration) (*Channel, tally.TestScope) {
	t.Helper()
	scope := tally.NewTestScope("", nil)
	c, err := New("client", WithScope(scope), WithPacing("kv", PacingConfig{MaxDelay: maxDelay}),
		WithServiceConfig(mustConfig(t, fmt.Sprintf(retryBusy, 3, "0.001s", ""))))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	require.NoError(t, c.AddPeer("kv", q.ch.HostPort()))
	return c, scope
}

func callAs(t *testing.T, c *Channel, who string) (*Response, error) {
	return c.Call(ctxTimeout(t), "kv", "get", &Request{Format: "json", Headers: map[string]string{"who": who}, Arg3: []byte(`{"Key":"k"}`)})
}

// The client learns from the quota headers that the window's quota is
// spent and holds its next calls back until the window ends: the server
// never has to answer it Busy.
func TestPacingHoldsNewCallsBackDuringTheWindow(t *testing.T) {
	q := startQuotaServer(t, 3, 300*time.Millisecond)
	c, scope := pacedClient(t, q, time.Second)
	for i := 0; i < 7; i++ {
		res, err := callAs(t, c, "a")
		require.NoError(t, err, "call %d", i)
		assert.Equal(t, 1, res.Attempts)
	}
	log := q.arrivals("a")
	require.Len(t, log, 7)
	perWindow := map[int64]int{}
	for _, a := range log {
		assert.False(t, a.busy, "a request was sent while the quota was spent")
		perWindow[a.window]++
	}
	assert.GreaterOrEqual(t, len(perWindow), 3, "7 calls at 3 per window span at least 3 windows")
	held := scope.Snapshot().Counters()["ratelimit.held+service=kv"]
	require.NotNil(t, held)
	assert.GreaterOrEqual(t, held.Value(), int64(2))
}

// Another caller spent the quota: this one's first attempt gets Busy with
// the window's time left, its retry waits the window out (nothing is sent
// meanwhile) and succeeds in the next window.
func TestPacingRetryWaitsOutTheWindow(t *testing.T) {
	q := startQuotaServer(t, 3, 300*time.Millisecond)
	other, _ := pacedClient(t, q, time.Second)
	c, _ := pacedClient(t, q, time.Second)
	for {
		// Spend the quota early in a window so the retry has a window to wait out.
		_, err := callAs(t, other, "other")
		require.NoError(t, err)
		if len(q.arrivals("other"))%3 == 0 {
			break
		}
	}
	res, err := callAs(t, c, "b")
	require.NoError(t, err)
	log := q.arrivals("b")
	require.Len(t, log, 2, "want the busy attempt and one retry")
	assert.Equal(t, 2, res.Attempts)
	assert.True(t, log[0].busy)
	assert.False(t, log[1].busy)
	assert.Greater(t, log[1].window, log[0].window, "the retry was sent inside the throttled window")
}

// A window longer than MaxDelay fails the call at once with an error saying
// how long the window still runs, and new calls fail fast without sending.
func TestPacingFailsFastPastMaxDelay(t *testing.T) {
	q := startQuotaServer(t, 1, 3*time.Second)
	other, _ := pacedClient(t, q, time.Second)
	_, err := callAs(t, other, "other") // spends the quota for ~3s
	require.NoError(t, err)

	c, scope := pacedClient(t, q, 100*time.Millisecond)
	start := time.Now()
	_, err = callAs(t, c, "b")
	require.Error(t, err)
	assert.ErrorIs(t, err, pacing.ErrRateLimited)
	var we *pacing.WindowError
	require.True(t, errors.As(err, &we), "got %v", err)
	assert.Greater(t, we.Remaining, time.Second)
	assert.Contains(t, err.Error(), "rate limited")
	assert.Len(t, q.arrivals("b"), 1, "the call retried past its maximum delay")

	_, err = callAs(t, c, "b")
	assert.ErrorIs(t, err, pacing.ErrRateLimited)
	assert.Len(t, q.arrivals("b"), 1, "a new call was sent during the window")
	assert.Less(t, time.Since(start), time.Second, "failing fast took too long")
	cn := scope.Snapshot().Counters()
	assert.EqualValues(t, 2, cn["ratelimit.rejected+service=kv"].Value())
	assert.EqualValues(t, 1, cn["call.errors+code=RATE_LIMITED,method=_other,service=kv"].Value())
}

func TestPacingOptionValidated(t *testing.T) {
	_, err := New("c", WithPacing("kv", PacingConfig{}))
	assert.ErrorContains(t, err, "MaxDelay is 0s")
	_, err = New("c", WithPacing("kv", PacingConfig{MaxDelay: time.Second, Pacer: pacing.Config{Strategy: "nope"}}))
	assert.ErrorContains(t, err, "Pacer")
}
