package channel

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/latency"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/uber-go/tally/v4"
	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/raw"
)

// slowWork is what the slow server's method takes by default: its
// handler's work. The tests of clients' retries take this long, for a
// margin: their first attempt must finish before its deadline.
const slowWork = 60 * time.Millisecond

// slowServer is a real Sluice server of "kv" whose method "slow" works for
// work, then answers, or fails UNEXPECTED while fail is set.
type slowServer struct {
	ch    *Channel
	work  time.Duration
	runs  atomic.Int64 // handler runs
	fail  atomic.Bool
	scope tally.TestScope
}

func startSlowServer(t *testing.T, work time.Duration, opts ...Option) *slowServer {
	t.Helper()
	s := &slowServer{scope: tally.NewTestScope("", nil), work: work}
	ch, err := New("kv", append([]Option{WithScope(s.scope)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.RegisterRaw("slow", func(ctx context.Context, req *RawRequest) (*RawResponse, error) {
		s.runs.Add(1)
		time.Sleep(work) // the method's work, not a wait for another goroutine
		if s.fail.Load() {
			return nil, tchannel.NewSystemError(tchannel.ErrCodeUnexpected, "failed")
		}
		return &RawResponse{Arg3: req.Arg3}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.Close)
	s.ch = ch
	return s
}

// estimate returns the server's expected service time of "slow".
func (s *slowServer) estimate() *latency.Low {
	return &s.ch.tch.GetSubChannel("kv").GetHandlers()["slow"].(*guarded).ttl.est
}

// requests returns the requests that reached the server (its guard),
// refused or not.
func (s *slowServer) requests() int64 { return serverCalls(s.scope) }

// refused returns the requests the server refused for their deadline.
func (s *slowServer) refused() int64 {
	if c, ok := s.scope.Snapshot().Counters()["server.refused+reason=deadline"]; ok {
		return c.Value()
	}
	return 0
}

// slowRetry retries "slow" on UNEXPECTED and BUSY, 3 attempts.
const slowRetry = `{"methodConfig":[{"name":[{"service":"kv","method":"slow"}],
 "retryPolicy":{"maxAttempts":3,"initialBackoff":"0.001s","maxBackoff":"0.01s","backoffMultiplier":2,"retryableStatusCodes":["UNEXPECTED","BUSY"]}}]}`

// slowClient is a client on the wall clock with a retry policy for
// "slow", calling s.
func slowClient(t *testing.T, s *slowServer) (*Channel, tally.TestScope) {
	t.Helper()
	scope := tally.NewTestScope("", nil)
	c, err := New("client", WithServiceConfig(mustConfig(t, slowRetry)), WithScope(scope))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := to(c, "kv", WithMethods("slow")).AddPeer(s.ch.HostPort()); err != nil {
		t.Fatal(err)
	}
	return c, scope
}

// warmUp makes calls enough for the server's and the client's estimates
// to end their cold start (latency.MinSamples each), 8 at a time, and
// waits until the server's has (it measures a request after answering it).
func warmUp(t *testing.T, c *Channel, s *slowServer) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < (latency.MinSamples+15)/8; i++ {
				if _, err := to(c, "kv").CallRaw(ctxTimeout(t), "slow", nil, []byte("w")); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("warm-up call: %v", err)
	}
	testwait.Until(t, "the server's estimate to end its cold start", s.estimate().Ready)
	if d, _ := s.estimate().Expected(); d < s.work {
		t.Fatalf("server's expected service time %v, want at least the work, %v", d, s.work)
	}
}

// A request sent with 5 ms left to a method that takes 20 ms is refused
// before its handler runs, and its Sluice caller, whose policy retries
// BUSY, does not retry it.
func TestDeadlineRefusedBeforeTheHandler(t *testing.T) {
	s := startSlowServer(t, 20*time.Millisecond)
	c, _ := slowClient(t, s)
	// The cold start: after one call (which connects), a request with 5 ms
	// left is served (and times out).
	if _, err := to(c, "kv").CallRaw(ctxTimeout(t), "slow", nil, []byte("x")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	_, err := to(c, "kv").CallRaw(ctx, "slow", nil, []byte("x"))
	cancel()
	if s.runs.Load() != 2 || err == nil {
		t.Fatalf("cold start: %d handler runs, error %v; want 2 runs and a timeout", s.runs.Load(), err)
	}
	testwait.Until(t, "the cold-start request's handler to end", func() bool { return s.estimate().Samples() == 2 })
	warmUp(t, c, s)

	// 15 ms left, under the 20 ms expected: refused, with room for the
	// refusal's round trip on a loaded machine.
	runs, reqs := s.runs.Load(), s.requests()
	ctx, cancel = context.WithTimeout(context.Background(), 15*time.Millisecond)
	defer cancel()
	_, err = to(c, "kv").CallRaw(ctx, "slow", nil, []byte("x"))
	var ce *CallError
	if !errors.As(err, &ce) || ce.Code != codes.Busy || !strings.Contains(ce.Message, "expected service time") {
		t.Fatalf("error %v, want BUSY saying the expected service time", err)
	}
	if got := s.runs.Load() - runs; got != 0 {
		t.Errorf("handler runs for the refused request: %d, want 0", got)
	}
	if got := s.requests() - reqs; got != 1 || ce.Attempts != 1 || ce.Stop != retry.StopPushback {
		t.Errorf("requests received %d, attempts %d, stop %v; want 1, 1, %v (not retried)", got, ce.Attempts, ce.Stop, retry.StopPushback)
	}
	if got := s.refused(); got != 1 {
		t.Errorf("server.refused{reason=deadline} = %d, want 1", got)
	}
	// A refusal says nothing of the server's load: the next call, with
	// time enough, is sent and served at once.
	if _, err := to(c, "kv").CallRaw(ctxTimeout(t), "slow", nil, []byte("y")); err != nil || s.runs.Load() != runs+1 {
		t.Fatalf("a call with time enough after a refusal: %v, %d runs; want served", err, s.runs.Load()-runs)
	}
}

// A client whose retry policy would retry a failure sends no retry when
// the time left is below the method's expected latency: the server
// receives one request, and the call ends with its error. With time
// enough, the retries go out.
func TestNoRetryWithTooLittleTimeLeft(t *testing.T) {
	s := startSlowServer(t, slowWork)
	c, scope := slowClient(t, s)
	warmUp(t, c, s)
	s.fail.Store(true)

	// The first attempt has slowWork + 40 ms: admitted, it fails after
	// slowWork, and leaves at most 40 ms, under the expected slowWork.
	reqs := s.requests()
	ctx, cancel := context.WithTimeout(context.Background(), slowWork+40*time.Millisecond)
	defer cancel()
	_, err := to(c, "kv").CallRaw(ctx, "slow", nil, []byte("x"))
	var ce *CallError
	if !errors.As(err, &ce) || ce.Code != codes.Unexpected || ce.Stop != retry.StopDeadline || ce.Attempts != 1 {
		t.Fatalf("error %v, want the attempt's UNEXPECTED after 1 attempt, stopped for the deadline", err)
	}
	if !strings.Contains(err.Error(), retry.StopDeadline.String()) {
		t.Errorf("error %q does not say why it stopped (%q)", err, retry.StopDeadline)
	}
	if got := s.requests() - reqs; got != 1 {
		t.Errorf("requests received: %d, want 1 (no retry sent)", got)
	}
	if got := scope.Snapshot().Counters()["attempt.skipped.deadline+method=slow,service=kv"]; got == nil || got.Value() != 1 {
		t.Errorf("attempt.skipped.deadline: %v, want 1", got)
	}

	// With time enough, all 3 attempts are sent.
	reqs = s.requests()
	_, err = to(c, "kv").CallRaw(ctxTimeout(t), "slow", nil, []byte("x"))
	if !errors.As(err, &ce) || ce.Stop != retry.StopExhausted || s.requests()-reqs != 3 {
		t.Fatalf("error %v, %d requests; want 3 attempts, exhausted", err, s.requests()-reqs)
	}
}

// Plain tchannel-go clients are served as before when their TTL is
// ample, and refused BUSY, handler not run, when it is too short.
func TestDeadlineAdmissionOfPlainClients(t *testing.T) {
	s := startSlowServer(t, 20*time.Millisecond)
	c, _ := slowClient(t, s)
	warmUp(t, c, s)
	runs := s.runs.Load()
	pc := plainClient(t, nil)
	plain := func(ctx context.Context, arg3 string) ([]byte, error) {
		call, err := pc.BeginCall(ctx, s.ch.HostPort(), "kv", "slow", &tchannel.CallOptions{Format: tchannel.Raw})
		if err != nil {
			return nil, err
		}
		_, res, _, err := raw.WriteArgs(call, nil, []byte(arg3))
		return res, err
	}
	res, err := plain(ctxTimeout(t), "plain")
	if err != nil || string(res) != "plain" || s.runs.Load() != runs+1 {
		t.Fatalf("plain call with an ample TTL: %q, %v; want served", res, err)
	}
	// Connected by the first call, the second is sent at once.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	_, err = plain(ctx, "short")
	msg := requireSystemError(t, err, tchannel.ErrCodeBusy)
	if !strings.Contains(msg, "retry-pushback-ms=-1") || s.runs.Load() != runs+1 {
		t.Errorf("plain call with 5 ms: %q, %d runs; want BUSY saying do not retry, handler not run", msg, s.runs.Load()-runs-1)
	}
}

// Deadline admission is no shedding limit: it is on without WithShedding
// and with any ShedConfig that leaves NoDeadlineRefusals unset.
func TestDeadlineAdmissionOnByDefault(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []Option
		on   bool
	}{
		{"no WithShedding", nil, true},
		{"zero ShedConfig", []Option{WithShedding(ShedConfig{})}, true},
		{"with limits", []Option{WithShedding(ShedConfig{MaxInFlight: 10})}, true},
		{"NoDeadlineRefusals", []Option{WithShedding(ShedConfig{MaxInFlight: 10, NoDeadlineRefusals: true})}, false},
	} {
		ch, err := New("kv", tt.opts...)
		if err != nil {
			t.Fatalf("%s: New: %v", tt.name, err)
		}
		if err := ch.RegisterRaw("slow", func(context.Context, *RawRequest) (*RawResponse, error) { return &RawResponse{}, nil }); err != nil {
			t.Fatalf("%s: RegisterRaw: %v", tt.name, err)
		}
		if on := ch.tch.GetSubChannel("kv").GetHandlers()["slow"].(*guarded).ttl != nil; on != tt.on {
			t.Errorf("%s: deadline admission on = %v, want %v", tt.name, on, tt.on)
		}
		ch.Close()
	}
}

// ShedConfig.NoDeadlineRefusals turns the admission off: the doomed
// request reaches its handler, as before.
func TestDeadlineRefusalsDisabled(t *testing.T) {
	s := startSlowServer(t, 20*time.Millisecond, WithShedding(ShedConfig{NoDeadlineRefusals: true}))
	if g := s.ch.tch.GetSubChannel("kv").GetHandlers()["slow"].(*guarded); g.ttl != nil {
		t.Fatal("deadline admission on despite ShedConfig.NoDeadlineRefusals")
	}
	c, _ := slowClient(t, s)
	for i := 0; i < latency.MinSamples+8; i++ {
		if _, err := to(c, "kv").CallRaw(ctxTimeout(t), "slow", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	runs := s.runs.Load()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	_, err := to(c, "kv").CallRaw(ctx, "slow", nil, nil)
	var ce *CallError
	if !errors.As(err, &ce) || ce.Code != codes.Timeout {
		t.Fatalf("error %v, want TIMEOUT", err)
	}
	testwait.Until(t, fmt.Sprintf("the handler to run (runs %d)", runs), func() bool { return s.runs.Load() == runs+1 })
	if s.refused() != 0 {
		t.Errorf("server.refused{reason=deadline} = %d, want 0", s.refused())
	}
}

// A ShedConfig without a limit puts no shedder in the requests' path, and
// is validated all the same; one with a limit does.
func TestSheddingWithoutLimit(t *testing.T) {
	for _, tt := range []struct {
		cfg     ShedConfig
		shedder bool
		err     string
	}{
		{ShedConfig{}, false, ""},
		{ShedConfig{NoDeadlineRefusals: true}, false, ""},
		{ShedConfig{NoRetry: true, Pushback: time.Second}, false, "Pushback"},
		{ShedConfig{MaxInFlight: 1}, true, ""},
	} {
		c, err := New("kv", WithShedding(tt.cfg))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%+v: New = %v, want an error naming %s", tt.cfg, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%+v: %v", tt.cfg, err)
		}
		if got := c.shed != nil; got != tt.shedder {
			t.Errorf("%+v: a shedder: %v, want %v", tt.cfg, got, tt.shedder)
		}
		if c.o.noDeadlineRefusals != tt.cfg.NoDeadlineRefusals {
			t.Errorf("%+v: deadline refusals off: %v", tt.cfg, c.o.noDeadlineRefusals)
		}
		c.Close()
	}
}
