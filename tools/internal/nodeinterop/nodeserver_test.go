package nodeinterop

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/uber-go/tally/v4"
	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/raw"

	"github.com/sluice-rpc/sluice/busy"
	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/criticality"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/sluice-rpc/sluice/serviceconfig"
)

// nodeService is the service server.js serves.
const nodeService = "nodekv"

// ctxFor returns a context for one test's calls.
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	return ctx
}

// sluiceClient returns a Sluice Channel named "sluice-client" with a
// Client of nodeService whose one peer is hostPort.
func sluiceClient(t *testing.T, hostPort string, opts ...channel.Option) *channel.Client {
	t.Helper()
	ch, err := channel.New("sluice-client", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.Close)
	cl, err := ch.NewClient(nodeService)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.AddPeer(hostPort); err != nil {
		t.Fatal(err)
	}
	return cl
}

// rawSeen is what server.js's echo reports of a raw call.
type rawSeen struct {
	Arg3 string  `json:"arg3"`
	RD   *string `json:"rd"`
	CN   string  `json:"cn"`
	As   string  `json:"as"`
}

// jsonSeen is what server.js's echo reports of a JSON call.
type jsonSeen struct {
	Body map[string]any `json:"body"`
	RD   *string        `json:"rd"`
	CN   string         `json:"cn"`
	As   string         `json:"as"`
}

// rdOf shows a routing delegate the Node server saw, for messages.
func rdOf(rd *string) string {
	if rd == nil {
		return "none"
	}
	return strconv.Quote(*rd)
}

// checkRD fails unless the Node server saw routing delegate want ("":
// none, as tchannel-go sends no rd header for an empty one).
func checkRD(t *testing.T, what string, got *string, want string) {
	t.Helper()
	switch {
	case want == "" && got != nil:
		t.Errorf("%s: the Node server saw routing delegate %q, want none", what, *got)
	case want != "" && (got == nil || *got != want):
		t.Errorf("%s: the Node server saw routing delegate %s, want %q", what, rdOf(got), want)
	}
}

// TestSluiceClientNodeServer: a Sluice client's raw and JSON calls reach a
// Node server with their arguments, caller name and headers, and come back
// with the server's; a class other than Critical, or a routing delegate of
// the caller's, reaches it as the caller's routing delegate (or none),
// never with Sluice's mark.
func TestSluiceClientNodeServer(t *testing.T) {
	cl := sluiceClient(t, startNodeServer(t))
	ctx := ctxFor(t)

	t.Run("raw", func(t *testing.T) {
		res, err := cl.CallRaw(ctx, "echo", []byte("raw-arg2"), []byte("raw-arg3"))
		if err != nil {
			t.Fatalf("CallRaw: %v", err)
		}
		if string(res.Arg2) != "raw-arg2" {
			t.Errorf("arg2 came back as %q, want %q", res.Arg2, "raw-arg2")
		}
		var seen rawSeen
		if err := json.Unmarshal(res.Arg3, &seen); err != nil {
			t.Fatalf("arg3 %q: %v", res.Arg3, err)
		}
		if seen.Arg3 != "raw-arg3" || seen.CN != "sluice-client" || seen.As != "raw" {
			t.Errorf("the Node server saw arg3 %q, caller %q, as %q; want %q, %q, %q", seen.Arg3, seen.CN, seen.As, "raw-arg3", "sluice-client", "raw")
		}
		checkRD(t, "a Critical call", seen.RD, "")
	})

	t.Run("json", func(t *testing.T) {
		var (
			got     jsonSeen
			headers map[string]string
		)
		err := cl.CallJSON(ctx, "echo", map[string]any{"key": "k", "n": 7}, &got,
			channel.WithHeaders(map[string]string{"tenant": "blue", "trace-me": "yes"}),
			channel.ResponseHeaders(&headers))
		if err != nil {
			t.Fatalf("CallJSON: %v", err)
		}
		if got.Body["key"] != "k" || got.Body["n"] != float64(7) {
			t.Errorf("the Node server saw body %v, want key k and n 7", got.Body)
		}
		if got.CN != "sluice-client" || got.As != "json" {
			t.Errorf("the Node server saw caller %q, as %q; want %q, %q", got.CN, got.As, "sluice-client", "json")
		}
		if headers["tenant"] != "blue" || headers["trace-me"] != "yes" {
			t.Errorf("response headers (the Node server echoes the request's): got %v, want tenant=blue and trace-me=yes", headers)
		}
		checkRD(t, "a Critical call", got.RD, "")
	})

	// A class other than Critical is marked in the routing delegate only on
	// a connection to a Sluice peer: the Node server sees the caller's.
	for _, cls := range []criticality.Class{criticality.Sheddable, criticality.SheddablePlus, criticality.CriticalPlus} {
		for _, rd := range []string{"", "relay"} {
			t.Run(cls.String()+"/rd="+rd, func(t *testing.T) {
				cctx := criticality.WithClass(ctx, cls)
				var opts []channel.CallOption
				if rd != "" {
					opts = append(opts, channel.WithRoutingDelegate(rd))
				}
				res, err := cl.CallRaw(cctx, "echo", nil, []byte("x"), opts...)
				if err != nil {
					t.Fatalf("CallRaw: %v", err)
				}
				var seen rawSeen
				if err := json.Unmarshal(res.Arg3, &seen); err != nil {
					t.Fatalf("arg3 %q: %v", res.Arg3, err)
				}
				checkRD(t, "a raw "+cls.String()+" call", seen.RD, rd)

				var got jsonSeen
				if err := cl.CallJSON(cctx, "echo", map[string]any{}, &got, opts...); err != nil {
					t.Fatalf("CallJSON: %v", err)
				}
				checkRD(t, "a JSON "+cls.String()+" call", got.RD, rd)
			})
		}
	}
}

// TestSluiceClientClassifiesNodeErrors: a Node server's error frames are
// classified by their code: Busy is BUSY, and feeds the peer's busy
// throttling; UnexpectedError is UNEXPECTED.
func TestSluiceClientClassifiesNodeErrors(t *testing.T) {
	hostPort := startNodeServer(t)
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	scope := tally.NewTestScope("", nil)
	cl := sluiceClient(t, hostPort, channel.WithClock(clk), channel.WithScope(scope))
	ctx := ctxFor(t)

	call := func(method string) *channel.CallError {
		t.Helper()
		_, err := cl.CallRaw(ctx, method, nil, nil)
		var ce *channel.CallError
		if !errors.As(err, &ce) {
			t.Fatalf("%s: got %v, want a *channel.CallError", method, err)
		}
		return ce
	}

	ce := call("unexpected")
	if ce.Code != codes.Unexpected || ce.Message != "node server failed" || ce.Attempts != 1 {
		t.Errorf("unexpected: got code %v, message %q, %d attempts; want %v, %q, 1", ce.Code, ce.Message, ce.Attempts, codes.Unexpected, "node server failed")
	}
	if ce.Overloaded() {
		t.Errorf("unexpected: Overloaded() = true, want false")
	}

	// A window of Busy answers (20: the default MaxHalvings) cuts the
	// peer's limit from the ceiling at the next window, as a Sluice
	// server's Busy does, and the calls past it are throttled on the client.
	const busyCalls = busy.DefaultMaxHalvings
	for i := 0; i < busyCalls; i++ {
		ce := call("busy")
		if ce.Code != codes.Busy || ce.Message != "node server is busy" {
			t.Fatalf("busy, call %d: got code %v, message %q; want %v, %q", i, ce.Code, ce.Message, codes.Busy, "node server is busy")
		}
		if !ce.Overloaded() {
			t.Errorf("busy, call %d: Overloaded() = false, want true", i)
		}
	}
	if got := scope.Snapshot().Counters()["peer.busy+peer="+hostPort+",service="+nodeService].Value(); got != busyCalls {
		t.Errorf("peer.busy: got %d, want %d", got, busyCalls)
	}
	clk.Add(busy.DefaultWindow)
	peers := cl.Peers()
	if len(peers) != 1 {
		t.Fatalf("%d peers, want 1", len(peers))
	}
	limit := peers[0].Limit
	if limit >= busy.DefaultCeiling || limit < 1 {
		t.Fatalf("the peer's busy limit after a window of %d Busy answers: %v, want below the ceiling %d and at least 1", busyCalls, limit, busy.DefaultCeiling)
	}
	allowed := int(limit)
	for i := 0; i < allowed; i++ {
		if ce := call("busy"); ce.Code != codes.Busy {
			t.Fatalf("busy, call %d of the %d the limit allows: got code %v, want %v", i, allowed, ce.Code, codes.Busy)
		}
	}
	if ce := call("busy"); ce.Code != codes.Throttled || !errors.Is(ce, channel.ErrThrottled) {
		t.Errorf("the call past the limit %v: got code %v (%v), want %v, channel.ErrThrottled", limit, ce.Code, ce, codes.Throttled)
	}
	// Only the allowed calls reached the Node server.
	if got := nodeCount(t, hostPort, "busy"); got != busyCalls+allowed {
		t.Errorf("the Node server counted %d busy calls, want %d", got, busyCalls+allowed)
	}
}

// nodeCount asks server.js, through a plain tchannel-go channel, how many
// calls method has had.
func nodeCount(t *testing.T, hostPort, method string) int {
	t.Helper()
	ch, err := tchannel.NewChannel("counter", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ch.Close() // and wait for its connections to close: goleak checks
		testwait.Recv(t, ch.ClosedChan(), "the counting channel to close")
	}()
	ctx, cancel := tchannel.NewContext(waitLimit)
	defer cancel()
	_, arg3, _, err := raw.Call(ctx, ch, hostPort, nodeService, "count", nil, []byte(method))
	if err != nil {
		t.Fatalf("count %s: %v", method, err)
	}
	var n int
	if err := json.Unmarshal(arg3, &n); err != nil {
		t.Fatalf("count %s: %q: %v", method, arg3, err)
	}
	return n
}

// flakyAttempt is what server.js's flaky records of one attempt.
type flakyAttempt struct {
	Head map[string]string `json:"head"`
	RD   *string           `json:"rd"`
}

// TestSluiceClientRetriesNodeServer: a Sluice client's retry policy
// (WithServiceConfig) retries a Node server's UNEXPECTED answers; each
// retried JSON attempt carries the previous-rpc-attempts header, and no
// attempt carries Sluice's retry mark in its routing delegate.
func TestSluiceClientRetriesNodeServer(t *testing.T) {
	hostPort := startNodeServer(t)
	cfg, err := serviceconfig.Parse([]byte(`{"methodConfig":[{"name":[{"service":"` + nodeService + `","method":"flaky"}],
 "retryPolicy":{"maxAttempts":3,"initialBackoff":"0.01s","maxBackoff":"0.05s","backoffMultiplier":2,"retryableStatusCodes":["UNEXPECTED"]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	cl := sluiceClient(t, hostPort, channel.WithServiceConfig(cfg))
	ctx := ctxFor(t)

	for _, tc := range []struct {
		name string
		ctx  context.Context
		rd   string
	}{
		{"critical", ctx, ""},
		{"sheddable/rd=relay", criticality.WithClass(ctx, criticality.Sheddable), "relay"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := []channel.CallOption{channel.WithHeaders(map[string]string{"tenant": "blue"})}
			if tc.rd != "" {
				opts = append(opts, channel.WithRoutingDelegate(tc.rd))
			}
			var info channel.CallInfo
			var attempts []flakyAttempt
			err := cl.CallJSON(tc.ctx, "flaky", map[string]any{"key": tc.name, "fails": 2}, &attempts,
				append(opts, channel.ReportCallInfo(&info))...)
			if err != nil {
				t.Fatalf("CallJSON: %v", err)
			}
			if info.Attempts != 3 || len(attempts) != 3 {
				t.Fatalf("the call took %d attempts and the Node server saw %d, want 3 and 3", info.Attempts, len(attempts))
			}
			for i, a := range attempts {
				want := ""
				if i > 0 {
					want = string(rune('0' + i))
				}
				if got := a.Head[retry.AttemptsHeader]; got != want {
					t.Errorf("attempt %d: %s header %q, want %q", i+1, retry.AttemptsHeader, got, want)
				}
				if a.Head["tenant"] != "blue" {
					t.Errorf("attempt %d: headers %v, want tenant=blue", i+1, a.Head)
				}
				checkRD(t, "attempt "+string(rune('1'+i)), a.RD, tc.rd)
			}
		})
	}

	// Without a policy for it, an UNEXPECTED answer is not retried.
	_, err = cl.CallRaw(ctx, "unexpected", nil, nil)
	var ce *channel.CallError
	if !errors.As(err, &ce) || ce.Code != codes.Unexpected || ce.Attempts != 1 {
		t.Errorf("unexpected, no retry policy: got %v, want one UNEXPECTED attempt", err)
	}
}
