package channel

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/leasing"
	"github.com/sluice-rpc/sluice/leasing/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
)

// startDoorman starts a real Doorman-compatible server on 127.0.0.1 whose
// resource "kv-rps" has capacity 100 and returns a client's resource on it
// wanting 500.
func startDoorman(t *testing.T, scope tally.Scope) *leasing.Resource {
	t.Helper()
	repo, err := server.ParseRepository([]byte(`
resources:
- identifier_glob: "kv-rps"
  capacity: 100
  algorithm:
    kind: STATIC
    lease_length: 60
    refresh_interval: 15
    learning_mode_duration: 0 # a fresh server hands out capacity at once
`))
	require.NoError(t, err)
	srv, err := server.New(server.Config{Repository: repo})
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); testwait.Recv(t, done, "Serve to return") })

	cl, err := leasing.NewClient(leasing.ClientConfig{Addr: lis.Addr().String(), ID: "channel-test", Scope: scope, ManualRefresh: true})
	require.NoError(t, err)
	t.Cleanup(func() { cl.Close() })
	res, err := cl.Resource("kv-rps", leasing.ResourceConfig{Wants: 500, Mode: leasing.Pessimistic})
	require.NoError(t, err)
	require.NoError(t, cl.Refresh(ctxTimeout(t)))
	require.Equal(t, 100.0, res.Capacity())
	return res
}

// A channel bound to a resource of capacity 100, asked for 500 requests per
// second, sends 100 per second (+/- 5%) to a real TChannel server; the rest
// fail fast as rate limited and are never sent.
func TestLeaseGateHoldsTheLeasedRate(t *testing.T) {
	s := startServer(t)
	scope := tally.NewTestScope("", nil)
	res := startDoorman(t, scope)
	c, err := New("client", WithLease("kv", leasing.NewRateLimiter(res)), WithScope(scope))
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.AddPeer("kv", s.ch.HostPort()))

	const offered, seconds = 500, 2
	var (
		wg          sync.WaitGroup
		mu          sync.Mutex
		ok, limited int
	)
	tick := time.NewTicker(time.Second / offered)
	defer tick.Stop()
	start := time.Now()
	for i := 0; i < offered*seconds; i++ {
		<-tick.C
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A call may wait for the gate up to half its time left: with
			// 1 s, callers queue 500 ms ahead, and a stall of the test
			// machine shorter than that costs the gate no admission.
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err := c.CallRaw(ctx, "kv", "echo", nil, nil)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errors.Is(err, ErrRateLimited):
				limited++
				var ce *CallError
				if !errors.As(err, &ce) || ce.Code != codes.RateLimited || !errors.Is(err, leasing.ErrRateLimited) {
					t.Errorf("a refused call's error %v: want a CallError with code RATE_LIMITED wrapping leasing.ErrRateLimited", err)
				}
			default:
				t.Errorf("call: %v", err)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	rate := float64(s.received.Load()) / elapsed
	t.Logf("offered %d/s for %.2fs: server saw %d (%.1f/s), %d ok, %d rate limited", offered, elapsed, s.received.Load(), rate, ok, limited)
	assert.InDelta(t, 100, rate, 5, "server-side rate")
	assert.EqualValues(t, ok, s.received.Load(), "a rate-limited call reached the server")
	assert.Greater(t, limited, offered*seconds/2)
	assert.EqualValues(t, limited, scope.Snapshot().Counters()["call.errors+code=RATE_LIMITED,method=_other,service=kv"].Value())
}

func TestLeaseOptionValidated(t *testing.T) {
	_, err := New("c", WithLease("", nil))
	assert.ErrorContains(t, err, "WithLease")
}

// gateFunc is a Gate of the test's own.
type gateFunc func(ctx context.Context) error

func (f gateFunc) Admit(ctx context.Context) error { return f(ctx) }

// Any Gate plugs in: a refusal fails the call with RATE_LIMITED (matching
// ErrRateLimited and the Gate's own error) and sends nothing; a Gate still
// waiting when the caller's deadline passes fails it as TIMEOUT; an
// admission lets the call through.
func TestLeaseGateOfOnesOwn(t *testing.T) {
	s := startServer(t)
	errQuota := errors.New("quota spent")
	var admit atomic.Int32 // 0 refuse, 1 wait for ctx, 2 admit
	g := gateFunc(func(ctx context.Context) error {
		switch admit.Load() {
		case 0:
			return errQuota
		case 1:
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	c, err := New("client", WithLease("kv", g))
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.AddPeer("kv", s.ch.HostPort()))

	_, err = c.CallRaw(ctxTimeout(t), "kv", "echo", nil, nil)
	var ce *CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, codes.RateLimited, ce.Code)
	assert.ErrorIs(t, err, ErrRateLimited)
	assert.ErrorIs(t, err, errQuota)
	assert.Zero(t, ce.Attempts)

	admit.Store(1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = c.CallRaw(ctx, "kv", "echo", nil, nil)
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, codes.Timeout, ce.Code)
	assert.NotErrorIs(t, err, ErrRateLimited)
	assert.Zero(t, s.received.Load(), "a call its gate did not admit reached the server")

	admit.Store(2)
	_, err = c.CallRaw(ctxTimeout(t), "kv", "echo", nil, nil)
	require.NoError(t, err)
	assert.EqualValues(t, 1, s.received.Load())
}
