package channel

import (
	"context"
	"errors"
	"math"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/leasing"
	"github.com/sluice-rpc/sluice/leasing/server"
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
	if err != nil {
		t.Fatalf("server.ParseRepository: %v", err)
	}
	srv, err := server.New(server.Config{Repository: repo})
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("net.Listen: %v", err)
	}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); testwait.Recv(t, done, "Serve to return") })

	cl, err := leasing.NewClient(leasing.ClientConfig{Addr: lis.Addr().String(), ID: "channel-test", Scope: scope, ManualRefresh: true})
	if err != nil {
		t.Fatalf("leasing.NewClient: %v", err)
	}
	t.Cleanup(func() { cl.Close() })
	res, err := cl.Resource("kv-rps", leasing.ResourceConfig{Wants: 500, Mode: leasing.Pessimistic})
	if err != nil {
		t.Fatalf("Resource: %v", err)
	}
	if err := cl.Refresh(ctxTimeout(t)); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if got := res.Capacity(); got != 100.0 {
		t.Fatalf("res.Capacity() = %v, want %v", got, 100.0)
	}
	return res
}

// A channel bound to a resource of capacity 100, asked for 500 requests per
// second, sends 100 per second (+/- 5%) to a real TChannel server; the rest
// fail fast as rate limited and are never sent.
func TestLeaseGateHoldsTheLeasedRate(t *testing.T) {
	s := startServer(t)
	scope := tally.NewTestScope("", nil)
	res := startDoorman(t, scope)
	c, err := New("client", WithScope(scope))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer c.Close()
	if err := to(c, "kv", WithLease(leasing.NewRateLimiter(res))).AddPeer(s.ch.HostPort()); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}

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
			_, err := to(c, "kv").CallRaw(ctx, "echo", nil, nil)
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
	if math.Abs(rate-100) > 5 {
		t.Errorf("server-side rate %.1f/s, want 100 ± 5", rate)
	}
	if got := s.received.Load(); int(got) != ok {
		t.Errorf("a rate-limited call reached the server: got %v, want %v", got, ok)
	}
	if limited <= offered*seconds/2 {
		t.Errorf("limited = %v, want > %v", limited, offered*seconds/2)
	}
	if got := scope.Snapshot().Counters()["call.errors+code=RATE_LIMITED,method=echo,service=kv"].Value(); int(got) != limited {
		t.Errorf("got %v, want %v", got, limited)
	}
}

func TestLeaseOptionValidated(t *testing.T) {
	ch, err := New("c")
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	_, err = ch.NewClient("kv", WithLease(nil))
	if err == nil || !strings.Contains(err.Error(), "WithLease is nil") {
		t.Errorf("NewClient error = %v, want an error containing %q", err, "WithLease is nil")
	}
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
	c, err := New("client")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer c.Close()
	if err := to(c, "kv", WithLease(g)).AddPeer(s.ch.HostPort()); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}

	_, err = to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil)
	var ce *CallError
	if !errors.As(err, &ce) {
		t.Fatalf("CallRaw error = %v, want a %T", err, ce)
	}
	if ce.Code != codes.RateLimited {
		t.Errorf("ce.Code = %v, want %v", ce.Code, codes.RateLimited)
	}
	if !errors.Is(err, ErrRateLimited) {
		t.Errorf("CallRaw error = %v, want %v", err, ErrRateLimited)
	}
	if !errors.Is(err, errQuota) {
		t.Errorf("CallRaw error = %v, want %v", err, errQuota)
	}
	if ce.Attempts != 0 {
		t.Errorf("ce.Attempts = %v, want 0", ce.Attempts)
	}

	admit.Store(1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = to(c, "kv").CallRaw(ctx, "echo", nil, nil)
	if !errors.As(err, &ce) {
		t.Fatalf("CallRaw error = %v, want a %T", err, ce)
	}
	if ce.Code != codes.Timeout {
		t.Errorf("ce.Code = %v, want %v", ce.Code, codes.Timeout)
	}
	if errors.Is(err, ErrRateLimited) {
		t.Errorf("CallRaw error = %v, want an error that is not %v", err, ErrRateLimited)
	}
	if got := s.received.Load(); got != 0 {
		t.Errorf("a call its gate did not admit reached the server: got %v, want 0", got)
	}

	admit.Store(2)
	_, err = to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil)
	if err != nil {
		t.Fatalf("CallRaw: %v", err)
	}
	if got := s.received.Load(); got != 1 {
		t.Errorf("s.received.Load() = %v, want %v", got, 1)
	}
}
