package channel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/balance"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/raw"
)

// A response whose arguments pass WithMaxResponseSize fails the call
// UNEXPECTED, naming the limit, without a retry; one of exactly the limit
// is read; the connection serves on, at once even while the call of a
// response far over the limit could still read the rest.
func TestMaxResponseSize(t *testing.T) {
	const limit = 1 << 20
	srv, err := New("kv")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.RegisterRaw("big", func(ctx context.Context, req *RawRequest) (*RawResponse, error) {
		n := len(req.Arg3) // the size asked for, as the body's length
		return &RawResponse{Arg3: bytes.Repeat([]byte("x"), n)}, nil
	})
	if err := srv.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	cfg := mustConfig(t, `{"methodConfig":[{"name":[{"service":"kv"}],"retryPolicy":{"maxAttempts":3,
	  "initialBackoff":"0.01s","maxBackoff":"0.1s","backoffMultiplier":2,"retryableStatusCodes":["UNEXPECTED"]}}]}`)
	c, err := New("client", WithMaxResponseSize(limit), WithServiceConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := to(c, "kv").AddPeer(srv.HostPort()); err != nil {
		t.Fatal(err)
	}
	ask := func(n int) (*RawResponse, error) {
		return to(c, "kv").CallRaw(ctxTimeout(t), "big", nil, bytes.Repeat([]byte("."), n))
	}
	res, err := ask(limit)
	if err != nil || len(res.Arg3) != limit {
		t.Fatalf("a response of the limit: %v", err)
	}
	_, err = ask(limit + 1)
	var ce *CallError
	if !errors.As(err, &ce) || ce.Code != codes.Unexpected || ce.Attempts != 1 || !strings.Contains(err.Error(), "WithMaxResponseSize") {
		t.Fatalf("a response over the limit: %v, want UNEXPECTED after 1 attempt, naming WithMaxResponseSize", err)
	}
	if res, err := ask(10); err != nil || len(res.Arg3) != 10 {
		t.Fatalf("a call after the large response: %v", err)
	}
	// A response far over the limit, whose call's context lasts the
	// test, as a caller's may: the rest of it, dropped as it comes, does
	// not hold up the connection's next response until that context ends.
	long, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := to(c, "kv").CallRaw(long, "big", nil, bytes.Repeat([]byte("."), 4*limit)); !errors.As(err, &ce) || ce.Code != codes.Unexpected {
		t.Fatalf("a response of 4 times the limit: %v, want UNEXPECTED", err)
	}
	if res, err := ask(10); err != nil || len(res.Arg3) != 10 {
		t.Fatalf("a call after a response of 4 times the limit: %v", err)
	}
	if _, err := New("client", WithMaxResponseSize(0)); err == nil || !strings.Contains(err.Error(), "WithMaxResponseSize is 0") {
		t.Errorf("WithMaxResponseSize(0): %v", err)
	}
}

// budgetServer is a tchannel-go server whose method "get" answers a body
// of the size arg3 names (decimal), in arg3, or in arg2 if the request's
// arg2 is "in2". With arg2 "hold" it sends the first part bytes of arg3,
// flushed, and the rest only once release is closed.
func budgetServer(t *testing.T, part int, release <-chan struct{}) *tchannel.Channel {
	t.Helper()
	ch, err := tchannel.NewChannel("kv", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.Close)
	ch.Register(tchannel.HandlerFunc(func(ctx context.Context, call *tchannel.InboundCall) {
		args, err := raw.ReadArgs(call)
		if err != nil {
			return
		}
		n, err := strconv.Atoi(string(args.Arg3))
		if err != nil {
			_ = call.Response().SendSystemError(err)
			return
		}
		body := bytes.Repeat([]byte("x"), n)
		arg2, arg3 := []byte(nil), body
		if string(args.Arg2) == "in2" {
			arg2, arg3 = body, nil
		}
		if err := tchannel.NewArgWriter(call.Response().Arg2Writer()).Write(arg2); err != nil {
			return
		}
		w, err := call.Response().Arg3Writer()
		if err != nil {
			return
		}
		if string(args.Arg2) == "hold" {
			if _, err := w.Write(arg3[:part]); err != nil || w.Flush() != nil {
				return
			}
			select {
			case <-release:
			case <-ctx.Done():
				return
			}
			arg3 = arg3[part:]
		}
		if _, err := w.Write(arg3); err == nil {
			w.Close()
		}
	}), "get")
	if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	return ch
}

// The responses a Channel's calls hold at once stay within
// WithResponseBudget: while one call holds most of it, a response that
// would pass it fails UNEXPECTED wrapping ErrResponseBudget and naming the
// option, after one attempt although the policy retries UNEXPECTED
// (whether its bytes are in arg2 or arg3), and the connection serves the
// next call at once (the refused response's rest is dropped as it comes);
// refusals do not count against the peer's health; the held response is read whole, and every call gives its budget back
// when it returns.
func TestResponseBudget(t *testing.T) {
	const (
		limit = 1 << 20
		part  = 700 << 10 // the held response's bytes before it waits
		other = 600_000   // more than the budget leaves beside the held one
	)
	release := make(chan struct{})
	srv := budgetServer(t, part, release)
	cfg := mustConfig(t, `{"methodConfig":[{"name":[{"service":"kv"}],"retryPolicy":{"maxAttempts":3,
	  "initialBackoff":"0.01s","maxBackoff":"0.1s","backoffMultiplier":2,"retryableStatusCodes":["UNEXPECTED"]}}]}`)
	c, err := New("client", WithMaxResponseSize(limit), WithResponseBudget(limit), WithServiceConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := to(c, "kv").AddPeer(srv.PeerInfo().HostPort); err != nil {
		t.Fatal(err)
	}
	ask := func(ctx context.Context, arg2 string, n int) (*RawResponse, error) {
		return to(c, "kv").CallRaw(ctx, "get", []byte(arg2), []byte(strconv.Itoa(n)))
	}

	type result struct {
		res *RawResponse
		err error
	}
	held := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := ask(ctx, "hold", limit)
		held <- result{res, err}
	}()
	testwait.Until(t, "the held response's first part to take budget", func() bool { return c.responses.held.Load() >= part })

	for _, in := range []string{"arg3", "in2"} {
		// The refused call's context lasts the test, as a caller's
		// may: tchannel-go would hold the connection for the rest of
		// the response until it ends.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		t.Cleanup(cancel)
		_, err := ask(ctx, in, other)
		var ce *CallError
		if !errors.Is(err, ErrResponseBudget) || !errors.As(err, &ce) || ce.Code != codes.Unexpected || ce.Attempts != 1 ||
			!strings.Contains(err.Error(), "WithResponseBudget") {
			t.Fatalf("a %d-byte response (%s) beside the held one: %v, want UNEXPECTED after 1 attempt, wrapping ErrResponseBudget and naming WithResponseBudget",
				other, in, err)
		}
		if res, err := ask(ctxTimeout(t), "", 10); err != nil || len(res.Arg3) != 10 {
			t.Fatalf("a small call on the connection after the refused response (%s): %v", in, err)
		}
	}
	// Refusals say nothing against the peer: other peers' responses may
	// hold the budget.
	for range balance.DefaultConsecutiveErrors {
		if _, err := ask(ctxTimeout(t), "", other); !errors.Is(err, ErrResponseBudget) {
			t.Fatalf("a %d-byte response beside the held one: %v, want ErrResponseBudget", other, err)
		}
	}
	if ps := to(c, "kv").Peers(); len(ps) != 1 || ps[0].Ejections != 0 {
		t.Fatalf("the peer after %d refused responses in a row: %+v, want it never ejected", balance.DefaultConsecutiveErrors, ps)
	}

	close(release)
	r := testwait.Recv(t, held, "the held call")
	if r.err != nil || len(r.res.Arg3) != limit {
		t.Fatalf("the held call: %v", r.err)
	}
	if h := c.responses.held.Load(); h != 0 {
		t.Fatalf("%d bytes of budget held once every call returned, want 0", h)
	}
	for _, in := range []string{"arg3", "in2"} {
		res, err := ask(ctxTimeout(t), in, other)
		if err != nil || len(res.Arg2)+len(res.Arg3) != other {
			t.Fatalf("a %d-byte response (%s) alone: %v", other, in, err)
		}
	}
	if h := c.responses.held.Load(); h != 0 {
		t.Fatalf("%d bytes of budget held once every call returned, want 0", h)
	}
}

// WithResponseBudget cannot be below WithMaxResponseSize; by default it
// is defaultResponseBudget, or WithMaxResponseSize if that is larger.
func TestResponseBudgetOption(t *testing.T) {
	if _, err := New("client", WithMaxResponseSize(1<<20), WithResponseBudget(1<<20-1)); err == nil ||
		!strings.Contains(err.Error(), "WithResponseBudget is 1048575, must be >= WithMaxResponseSize's 1048576") {
		t.Errorf("a budget below the response limit: %v", err)
	}
	for _, tt := range []struct {
		opts []Option
		want int64
	}{
		{nil, defaultResponseBudget},
		{[]Option{WithMaxResponseSize(defaultResponseBudget * 2)}, defaultResponseBudget * 2},
		{[]Option{WithResponseBudget(5 << 20), WithMaxResponseSize(1 << 20)}, 5 << 20},
	} {
		c, err := New("client", tt.opts...)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.responses.limit; got != tt.want {
			t.Errorf("budget %d, want %d", got, tt.want)
		}
		c.Close()
	}
}

// TestResponsesOwnTheirArguments: a response's arguments are the caller's
// alone, whatever their size around the buffer a call reads them into
// first (firstArgCap), whether the call's state is recycled for the next
// call or hedged attempts read at once: later calls, sequential or
// concurrent, never change them. Read by sequential attempts, a small
// argument holds about its own size, not firstArgCap bytes.
func TestResponsesOwnTheirArguments(t *testing.T) {
	// Two servers of "fill": Arg3 is a byte and a decimal size; both
	// answered arguments are that many of that byte.
	var served atomic.Int64
	fillServer := func() string {
		srv, err := New("kv")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Close)
		if err := srv.RegisterRaw("fill", func(ctx context.Context, req *RawRequest) (*RawResponse, error) {
			served.Add(1)
			n, err := strconv.Atoi(string(req.Arg3[1:]))
			if err != nil {
				return nil, err
			}
			b := bytes.Repeat(req.Arg3[:1], n)
			return &RawResponse{Arg2: b, Arg3: b}, nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := srv.ListenAndServe("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		return srv.HostPort()
	}
	hps := []string{fillServer(), fillServer()}
	// Every call hedged at once to the other server (no retry budget to
	// hold hedges back): its two attempts read their responses at once.
	hedged := []Option{WithServiceConfig(mustConfig(t, `{"methodConfig":[{"name":[{"service":"kv"}],
	  "hedgingPolicy":{"maxAttempts":2,"hedgingDelay":"0s","nonFatalStatusCodes":["BUSY"]}}]}`)),
		WithRetries(RetryConfig{Budget: retry.BudgetConfig{Disabled: true}})}
	for _, tc := range []struct {
		name   string
		opts   []Option
		hedged bool // every call sends two attempts; else small arguments hold about their own size
	}{{"sequential attempts", nil, false}, {"hedged attempts", hedged, true}} {
		t.Run(tc.name, func(t *testing.T) {
			kv := to(sluiceClient(t, hps[0], tc.opts...), "kv")
			if err := kv.AddPeer(hps[1]); err != nil {
				t.Fatal(err)
			}
			before := served.Load()
			var calls atomic.Int64
			call := func(fill byte, n int) *RawResponse {
				calls.Add(1)
				res, err := kv.CallRaw(ctxTimeout(t), "fill", nil, []byte(fmt.Sprintf("%c%d", fill, n)))
				if err != nil {
					t.Errorf("a response of %d bytes: %v", n, err)
					return nil
				}
				return res
			}
			check := func(res *RawResponse, fill byte, n int) {
				if res == nil {
					return
				}
				for _, arg := range [][]byte{res.Arg2, res.Arg3} {
					if len(arg) != n || bytes.Count(arg, []byte{fill}) != n {
						t.Errorf("a response of %d bytes of %q reads %q after later calls", n, fill, arg)
					}
				}
			}
			sizes := []int{0, 1, 5, firstArgCap - 1, firstArgCap, firstArgCap + 1, 5000}
			var kept []*RawResponse
			for i, n := range sizes {
				kept = append(kept, call(byte('a'+i), n))
			}
			for i, n := range sizes {
				check(kept[i], byte('a'+i), n)
			}
			if res := kept[2]; !tc.hedged && res != nil && cap(res.Arg3) >= 64 {
				t.Errorf("a 5-byte argument holds %d bytes", cap(res.Arg3))
			}
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					for i := range 50 {
						n := sizes[(g+i)%len(sizes)]
						fill := byte('A' + g)
						check(call(fill, n), fill, n)
					}
				})
			}
			wg.Wait()
			if got, n := served.Load()-before, calls.Load(); tc.hedged && got < n*3/2 {
				t.Errorf("%d calls reached the servers %d times: the hedges were not sent", n, got)
			}
		})
	}
}
