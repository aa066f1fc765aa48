package channel

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/criticality"
	"github.com/sluice-rpc/sluice/internal/peerlist"
	"github.com/sluice-rpc/sluice/internal/retryexec"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/uber/tchannel-go"
)

// classServer is a real Sluice server of "kv" whose raw "echo" counts the
// requests that reach it by class, and answers each as answer says for
// its class (nil: answers OK).
type classServer struct {
	ch       *Channel
	received [criticality.CriticalPlus + 1]atomic.Int64
	answer   atomic.Pointer[func(context.Context, criticality.Class) error]
}

func startClassServer(t *testing.T, answer func(context.Context, criticality.Class) error) *classServer {
	t.Helper()
	ch, err := New("kv")
	if err != nil {
		t.Fatal(err)
	}
	s := &classServer{ch: ch}
	s.setAnswer(answer)
	if err := ch.RegisterRaw("echo", func(ctx context.Context, req *RawRequest) (*RawResponse, error) {
		c := criticality.FromContext(ctx)
		s.received[c].Add(1)
		if err := (*s.answer.Load())(ctx, c); err != nil {
			return nil, err
		}
		return &RawResponse{Arg3: req.Arg3}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.Close)
	return s
}

func (s *classServer) setAnswer(f func(context.Context, criticality.Class) error) {
	s.answer.Store(&f)
}

// got returns how many requests of class c reached s.
func (s *classServer) got(c criticality.Class) int64 { return s.received[c].Load() }

// busyRefusing is a Sluice server's Busy answer refusing class c and
// below, with pushback hint d if d > 0: the note before the hint, as the
// server's shedding writes it.
func busyRefusing(c criticality.Class, d time.Duration) error {
	msg := appendRefusing("server overloaded", c)
	if d > 0 {
		msg = retryexec.AppendPushback(msg, retry.PushbackAfter(d))
	}
	return tchannel.NewSystemError(tchannel.ErrCodeBusy, "%s", msg)
}

// classClient is a client of the servers' "kv" whose busy windows and
// refusals run on a fake clock, every peer connected. opts are its
// Channel's, after the clock.
func classClient(t *testing.T, servers []*classServer, opts ...Option) (*Client, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	return classClientOn(t, servers, append([]Option{WithClock(clk)}, opts...)...), clk
}

// classClientOn is a client of the servers' "kv" made with opts, every
// peer connected.
func classClientOn(t *testing.T, servers []*classServer, opts ...Option) *Client {
	t.Helper()
	ch, err := New("client", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.Close)
	kv := to(ch, "kv", WithMethods("echo"))
	for _, s := range servers {
		if err := kv.AddPeer(s.ch.HostPort()); err != nil {
			t.Fatal(err)
		}
	}
	if err := kv.Connect(ctxTimeout(t)); err != nil {
		t.Fatal(err)
	}
	return kv
}

// callOfClass makes a raw call of class c through kv.
func callOfClass(t *testing.T, kv *Client, c criticality.Class) error {
	_, err := kv.CallRaw(criticality.WithClass(ctxTimeout(t), c), "echo", nil, []byte("hi"))
	return err
}

// A Busy naming the class its server refuses has the client refuse that
// class and those below to the peer, locally, nothing sent, with an error
// naming the class: for the answer's pushback hint, or
// peerlist.DefaultRefusal without one. Critical calls still reach the
// server meanwhile; once the refusal is over the sheddable calls are sent
// again.
func TestLocalRefusalAfterBusyNamingClass(t *testing.T) {
	for _, tc := range []struct {
		name     string
		refusing criticality.Class
		hint     time.Duration
		refusal  time.Duration
	}{
		{"no hint", criticality.Sheddable, 0, peerlist.DefaultRefusal},
		{"hint", criticality.SheddablePlus, 50 * time.Millisecond, 50 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startClassServer(t, func(_ context.Context, c criticality.Class) error {
				if c <= tc.refusing {
					return busyRefusing(tc.refusing, tc.hint)
				}
				return nil
			})
			kv, clk := classClient(t, []*classServer{s})
			var ce *CallError
			if err := callOfClass(t, kv, criticality.Sheddable); !errors.As(err, &ce) || ce.Code != codes.Busy {
				t.Fatalf("the first sheddable call: %v, want the server's Busy", err)
			}
			if got := s.got(criticality.Sheddable); got != 1 {
				t.Fatalf("sheddable requests at the server: %d, want 1", got)
			}
			for i := range 5 {
				err := callOfClass(t, kv, criticality.Sheddable)
				if !errors.As(err, &ce) || ce.Code != codes.Throttled || ce.Attempts != 0 || !errors.Is(err, ErrThrottled) ||
					!strings.Contains(err.Error(), "refusing class "+tc.refusing.String()+" and below") {
					t.Fatalf("sheddable call %d during the refusal: %v, want a local THROTTLED naming %s", i, err, tc.refusing)
				}
			}
			if tc.refusing >= criticality.SheddablePlus {
				if err := callOfClass(t, kv, criticality.SheddablePlus); !errors.As(err, &ce) || ce.Code != codes.Throttled {
					t.Errorf("sheddable_plus call refused by a server refusing sheddable_plus: %v, want THROTTLED", err)
				}
			}
			for range 5 {
				if err := callOfClass(t, kv, criticality.Critical); err != nil {
					t.Fatalf("critical call during the refusal: %v", err)
				}
			}
			if got := s.got(criticality.Critical); got != 5 {
				t.Errorf("critical requests at the server: %d, want 5", got)
			}
			if got := s.got(criticality.Sheddable) + s.got(criticality.SheddablePlus); got != 1 {
				t.Errorf("lower-class requests at the server during the refusal: %d, want 1", got)
			}

			clk.Add(tc.refusal - time.Millisecond)
			if err := callOfClass(t, kv, criticality.Sheddable); !errors.As(err, &ce) || ce.Code != codes.Throttled {
				t.Fatalf("sheddable call just before the refusal's end: %v, want THROTTLED", err)
			}
			clk.Add(time.Millisecond)
			s.setAnswer(func(context.Context, criticality.Class) error { return nil })
			if err := callOfClass(t, kv, criticality.Sheddable); err != nil {
				t.Fatalf("sheddable call after the refusal: %v", err)
			}
			if got := s.got(criticality.Sheddable); got != 2 {
				t.Errorf("sheddable requests at the server after the refusal: %d, want 2", got)
			}
		})
	}
}

// A call of a class every peer refuses fails locally; one peer refusing
// leaves the calls to the others.
func TestLocalRefusalPassesToOtherPeers(t *testing.T) {
	refusing := startClassServer(t, func(context.Context, criticality.Class) error {
		return busyRefusing(criticality.Sheddable, 0)
	})
	other := startClassServer(t, func(context.Context, criticality.Class) error { return nil })
	kv, _ := classClient(t, []*classServer{refusing, other})
	// Until the refusing server has answered a sheddable call, the calls
	// spread over both.
	testwait.Until(t, "a sheddable call to the refusing server", func() bool {
		_ = callOfClass(t, kv, criticality.Sheddable)
		return refusing.got(criticality.Sheddable) == 1
	})
	before := other.got(criticality.Sheddable)
	for i := range 20 {
		if err := callOfClass(t, kv, criticality.Sheddable); err != nil {
			t.Fatalf("sheddable call %d with one peer refusing: %v", i, err)
		}
	}
	if got := refusing.got(criticality.Sheddable); got != 1 {
		t.Errorf("sheddable requests at the refusing server: %d, want 1", got)
	}
	if got := other.got(criticality.Sheddable) - before; got != 20 {
		t.Errorf("sheddable requests at the other server: %d, want 20", got)
	}
}

// A Busy answered to sheddable calls throttles the sheddable calls to
// the peer (20 halvings in a window: 38 calls the next), not the
// critical ones.
func TestBusyToSheddableDoesNotThrottleCritical(t *testing.T) {
	s := startClassServer(t, func(_ context.Context, c criticality.Class) error {
		if c == criticality.Sheddable {
			return Busy("no room for sheddable calls")
		}
		return nil
	})
	kv, clk := classClient(t, []*classServer{s})
	for i := range 30 {
		var ce *CallError
		if err := callOfClass(t, kv, criticality.Sheddable); !errors.As(err, &ce) || ce.Code != codes.Busy {
			t.Fatalf("sheddable call %d: %v, want Busy", i, err)
		}
	}
	clk.Add(time.Second) // the window closes: the busy answers halve the limit
	for i := range 100 {
		if err := callOfClass(t, kv, criticality.Critical); err != nil {
			t.Fatalf("critical call %d after Busy answers to sheddable ones: %v", i, err)
		}
	}
	if got := s.got(criticality.Critical); got != 100 {
		t.Errorf("critical requests at the server: %d, want 100", got)
	}
	throttled := 0
	for range 100 {
		var ce *CallError
		if err := callOfClass(t, kv, criticality.Sheddable); errors.As(err, &ce) && ce.Code == codes.Throttled {
			throttled++
		}
	}
	if throttled != 62 || s.got(criticality.Sheddable) != 30+38 {
		t.Errorf("sheddable calls after 30 Busy: %d throttled, %d at the server; want 62 and 68", throttled, s.got(criticality.Sheddable))
	}
}

// Under a hedging policy a sheddable call is sent once, unhedged; a
// critical one hedges. The hedging delay is 0: a hedged call starts all
// its attempts at once, and the servers answer a critical request only
// once all three have arrived.
func TestSheddableCallNeverHedges(t *testing.T) {
	var arrived atomic.Int64
	all := make(chan struct{})
	answer := func(ctx context.Context, c criticality.Class) error {
		if c != criticality.Critical {
			return nil
		}
		if arrived.Add(1) == 3 {
			close(all)
		}
		select {
		case <-all:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	servers := []*classServer{startClassServer(t, answer), startClassServer(t, answer), startClassServer(t, answer)}
	cfg := mustConfig(t, `{"methodConfig":[{"name":[{"service":"kv"}],
 "hedgingPolicy":{"maxAttempts":3,"hedgingDelay":"0s","nonFatalStatusCodes":["BUSY"]}}]}`)
	kv, _ := classClient(t, servers, WithServiceConfig(cfg))
	for _, c := range []criticality.Class{criticality.Sheddable, criticality.Critical} {
		res, err := kv.Call(criticality.WithClass(ctxTimeout(t), c), "echo", &Request{Format: tchannel.Raw, Arg3: []byte("hi")})
		if err != nil {
			t.Fatalf("%s call: %v", c, err)
		}
		want := 3
		if c == criticality.Sheddable {
			want = 1
		}
		var got int64
		for _, s := range servers {
			got += s.got(c)
		}
		if res.Attempts != want || got != int64(want) {
			t.Errorf("%s call under a hedging policy: %d attempts, %d at the servers; want %d", c, res.Attempts, got, want)
		}
	}
}

// The retry-throttling bucket keeps a reserve for the higher classes:
// with it between their thresholds (13 of 20 tokens once the failure is
// counted: sheddable calls retry above 15, critical ones above 10), a
// sheddable call stops after its first failure, throttled, and a
// critical one retries.
func TestRetryBudgetStopsSheddableFirst(t *testing.T) {
	busyAll := func(context.Context, criticality.Class) error { return Busy("overloaded") }
	servers := []*classServer{startClassServer(t, busyAll), startClassServer(t, busyAll), startClassServer(t, busyAll)}
	cfg := mustConfig(t, fmt.Sprintf(retryBusy, 3, "0.001s", `,"retryThrottling":{"maxTokens":20,"tokenRatio":1}`))
	kv := classClientOn(t, servers, WithServiceConfig(cfg)) // the wall clock: the backoffs are real waits
	attempts := func(c criticality.Class) (int, retry.StopReason) {
		t.Helper()
		var ce *CallError
		if err := callOfClass(t, kv, c); !errors.As(err, &ce) || ce.Code != codes.Busy {
			t.Fatalf("%s call: %v, want Busy", c, err)
		}
		return ce.Attempts, ce.Stop
	}
	// Two critical calls of 3 failed attempts each: 20 -> 14 tokens.
	for range 2 {
		if n, stop := attempts(criticality.Critical); n != 3 || stop != retry.StopExhausted {
			t.Fatalf("critical call with a full bucket: %d attempts, %v; want 3, exhausted", n, stop)
		}
	}
	if n, stop := attempts(criticality.Sheddable); n != 1 || stop != retry.StopThrottled {
		t.Errorf("sheddable call at 13 tokens of 20: %d attempts, %v; want 1, throttled", n, stop)
	}
	if n, stop := attempts(criticality.Critical); n != 3 || stop != retry.StopExhausted {
		t.Errorf("critical call at 12 tokens of 20: %d attempts, %v; want 3, exhausted", n, stop)
	}
	var sent int64
	for _, s := range servers {
		sent += s.got(criticality.Sheddable)
	}
	if sent != 1 {
		t.Errorf("sheddable requests at the servers: %d, want 1", sent)
	}
}

// Hedges go by the class's share of the retry budget too: with the bucket
// at 10 of 16 tokens (sheddable_plus hedges need more than 10, critical
// ones more than 8), a sheddable_plus call under a hedging policy sends
// one attempt and a critical one all three. The hedging delay is 0: each
// call starts its attempts at once, before any answer takes a token.
func TestHedgeBudgetByClass(t *testing.T) {
	busyAll := func(context.Context, criticality.Class) error { return Busy("overloaded") }
	servers := []*classServer{startClassServer(t, busyAll), startClassServer(t, busyAll), startClassServer(t, busyAll)}
	cfg := mustConfig(t, `{"methodConfig":[{"name":[{"service":"kv"}],
 "hedgingPolicy":{"maxAttempts":3,"hedgingDelay":"0s","nonFatalStatusCodes":["BUSY"]}}],
 "retryThrottling":{"maxTokens":16,"tokenRatio":1}}`)
	kv, _ := classClient(t, servers, WithServiceConfig(cfg))
	attempts := func(c criticality.Class) int {
		t.Helper()
		var ce *CallError
		if err := callOfClass(t, kv, c); !errors.As(err, &ce) || ce.Code != codes.Busy {
			t.Fatalf("%s call: %v, want Busy", c, err)
		}
		return ce.Attempts
	}
	for range 2 { // 16 -> 10 tokens
		if n := attempts(criticality.Critical); n != 3 {
			t.Fatalf("critical call with more than 10 tokens: %d attempts, want 3", n)
		}
	}
	if n := attempts(criticality.SheddablePlus); n != 1 {
		t.Errorf("sheddable_plus call at 10 tokens of 16: %d attempts, want 1", n)
	}
	if n := attempts(criticality.Critical); n != 3 { // at 9
		t.Errorf("critical call at 9 tokens of 16: %d attempts, want 3", n)
	}
}
