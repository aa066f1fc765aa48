package channel

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/pacing"
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
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	quota, err := pacing.NewQuota(pacing.QuotaConfig{Limit: int64(limit), Window: window, Dimension: pacing.DimensionUser})
	if err != nil {
		t.Fatalf("pacing.NewQuota: %v", err)
	}
	q := &quotaServer{ch: ch, window: window, start: time.Now()}
	err = ch.RegisterJSON(map[string]any{
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
	})
	if err != nil {
		t.Fatalf("RegisterJSON: %v", err)
	}
	if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatalf("ListenAndServe: %v", err)
	}
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
	c, err := New("client", WithScope(scope),
		WithServiceConfig(mustConfig(t, fmt.Sprintf(retryBusy, 3, "0.001s", ""))))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	if err := to(c, "kv", WithPacing(PacingConfig{MaxDelay: maxDelay})).AddPeer(q.ch.HostPort()); err != nil {
		t.Fatalf("AddPeer: %v", err)
	}
	return c, scope
}

func callAs(t *testing.T, c *Channel, who string) (*Response, error) {
	return to(c, "kv").Call(ctxTimeout(t), "get", &Request{Format: "json", Headers: map[string]string{"who": who}, Arg3: []byte(`{"Key":"k"}`)})
}

// The client learns from the quota headers that the window's quota is
// spent and holds its next calls back until the window ends: the server
// never has to answer it Busy.
func TestPacingHoldsNewCallsBackDuringTheWindow(t *testing.T) {
	q := startQuotaServer(t, 3, 300*time.Millisecond)
	c, scope := pacedClient(t, q, time.Second)
	for i := 0; i < 7; i++ {
		res, err := callAs(t, c, "a")
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if res.Attempts != 1 {
			t.Errorf("res.Attempts = %v, want %v", res.Attempts, 1)
		}
	}
	log := q.arrivals("a")
	if len(log) != 7 {
		t.Fatalf("len(log) = %d, want %d", len(log), 7)
	}
	perWindow := map[int64]int{}
	for _, a := range log {
		if a.busy {
			t.Error("a request was sent while the quota was spent")
		}
		perWindow[a.window]++
	}
	if len(perWindow) < 3 {
		t.Errorf("7 calls at 3 per window span at least 3 windows: got %v, want >= %v", len(perWindow), 3)
	}
	held := scope.Snapshot().Counters()["ratelimit.held+service=kv"]
	if held == nil {
		t.Fatal("no ratelimit.held counter for kv")
	}
	if got := held.Value(); got < int64(2) {
		t.Errorf("held.Value() = %v, want >= %v", got, int64(2))
	}
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
		if err != nil {
			t.Fatalf("callAs: %v", err)
		}
		if len(q.arrivals("other"))%3 == 0 {
			break
		}
	}
	res, err := callAs(t, c, "b")
	if err != nil {
		t.Fatalf("callAs: %v", err)
	}
	log := q.arrivals("b")
	if len(log) != 2 {
		t.Fatalf("want the busy attempt and one retry: got length %d, want %d", len(log), 2)
	}
	if res.Attempts != 2 {
		t.Errorf("res.Attempts = %v, want %v", res.Attempts, 2)
	}
	if !log[0].busy {
		t.Error("log[0].busy = false, want true")
	}
	if log[1].busy {
		t.Error("log[1].busy = true, want false")
	}
	if log[1].window <= log[0].window {
		t.Errorf("the retry was sent inside the throttled window: got %v, want > %v", log[1].window, log[0].window)
	}
}

// A window longer than MaxDelay fails the call at once with an error saying
// how long the window still runs, and new calls fail fast without sending.
func TestPacingFailsFastPastMaxDelay(t *testing.T) {
	q := startQuotaServer(t, 1, 3*time.Second)
	other, _ := pacedClient(t, q, time.Second)
	_, err := callAs(t, other, "other") // spends the quota for ~3s
	if err != nil {
		t.Fatalf("callAs: %v", err)
	}

	c, scope := pacedClient(t, q, 100*time.Millisecond)
	start := time.Now()
	_, err = callAs(t, c, "b")
	if err == nil {
		t.Fatal("callAs succeeded, want an error")
	}
	if !errors.Is(err, pacing.ErrRateLimited) {
		t.Errorf("callAs error = %v, want %v", err, pacing.ErrRateLimited)
	}
	var we *pacing.WindowError
	if !errors.As(err, &we) {
		t.Fatalf("got %v: errors.As(err, &we) = false, want true", err)
	}
	if we.Remaining <= time.Second {
		t.Errorf("we.Remaining = %v, want > %v", we.Remaining, time.Second)
	}
	if !strings.Contains(err.Error(), "rate limited") {
		t.Errorf("err.Error() = %q, want it to contain %q", err.Error(), "rate limited")
	}
	if got := len(q.arrivals("b")); got != 1 {
		t.Errorf("the call retried past its maximum delay: got length %d, want %d", got, 1)
	}

	_, err = callAs(t, c, "b")
	if !errors.Is(err, pacing.ErrRateLimited) {
		t.Errorf("callAs error = %v, want %v", err, pacing.ErrRateLimited)
	}
	if got := len(q.arrivals("b")); got != 1 {
		t.Errorf("a new call was sent during the window: got length %d, want %d", got, 1)
	}
	if got := time.Since(start); got >= time.Second {
		t.Errorf("failing fast took too long: got %v, want < %v", got, time.Second)
	}
	cn := scope.Snapshot().Counters()
	if got := cn["ratelimit.rejected+service=kv"].Value(); got != 2 {
		t.Errorf("got %v, want %v", got, 2)
	}
	if got := cn["call.errors+code=RATE_LIMITED,method=get,service=kv"].Value(); got != 1 {
		t.Errorf("got %v, want %v", got, 1)
	}
}

func TestPacingOptionValidated(t *testing.T) {
	ch, err := New("c")
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	_, err = ch.NewClient("kv", WithPacing(PacingConfig{MaxDelay: -time.Second}))
	if want := "channel: PacingConfig.MaxDelay is -1s, must be >= 0"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("NewClient error = %v, want an error containing %q", err, want)
	}
	// The zero PacingConfig is the null pacer with defaultPacingMaxDelay.
	kv, err := ch.NewClient("kv", WithPacing(PacingConfig{}))
	if err != nil {
		t.Fatalf("NewClient(WithPacing(PacingConfig{})) = %v, want nil", err)
	}
	kv.Close()
	_, err = ch.NewClient("kv", WithPacing(PacingConfig{MaxDelay: time.Second, Pacer: pacing.Config{Strategy: "nope"}}))
	if err == nil || !strings.Contains(err.Error(), "Pacer") {
		t.Errorf("NewClient error = %v, want an error containing %q", err, "Pacer")
	}
}
