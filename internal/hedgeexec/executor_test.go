package hedgeexec

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/hedge"
	"github.com/sluice-rpc/sluice/internal/retryexec"
	"github.com/sluice-rpc/sluice/internal/testkit/testctx"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/retry"
)

const ms = time.Millisecond

var (
	errBusy = errors.New("busy")
	errBad  = errors.New("bad request")
	busyO   = retryexec.Outcome{Err: errBusy, Code: codes.Busy}
	badO    = retryexec.Outcome{Err: errBad, Code: codes.BadRequest}
	okO     = retryexec.Outcome{}
)

// harness runs a hedged call whose attempts block until the test answers
// them (or their context is cancelled).
type harness struct {
	t         *testing.T
	fake      *clock.Fake
	made      chan time.Duration // the duration of every timer the executor makes
	started   chan int
	replies   [10]chan retryexec.Outcome
	mu        sync.Mutex
	cancelled []int
	done      chan Result
}

func start(t *testing.T, cfg ExecutorConfig, ctx context.Context) *harness {
	t.Helper()
	h := &harness{t: t, fake: clock.NewFake(time.Unix(1_700_000_000, 0)), made: make(chan time.Duration, 100),
		started: make(chan int, 10), done: make(chan Result, 1)}
	for i := range h.replies {
		h.replies[i] = make(chan retryexec.Outcome, 1)
	}
	cfg.Clock = signalClock{h.fake, h.made}
	e, err := NewExecutor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		h.done <- e.Do(ctx, func(ctx context.Context, a retryexec.Attempt) retryexec.Outcome {
			if a.Number != a.Index {
				t.Errorf("attempt Number %d Index %d", a.Number, a.Index)
			}
			h.started <- a.Number
			select {
			case o := <-h.replies[a.Number]:
				return o
			case <-ctx.Done():
				h.mu.Lock()
				h.cancelled = append(h.cancelled, a.Number)
				h.mu.Unlock()
				return retryexec.Outcome{Err: ctx.Err(), Code: codes.Cancelled}
			}
		})
	}()
	return h
}

// signalClock is a clock.Fake that reports each timer it makes.
type signalClock struct {
	*clock.Fake
	made chan<- time.Duration
}

func (c signalClock) NewTimer(d time.Duration) clock.Timer {
	t := c.Fake.NewTimer(d)
	c.made <- d
	return t
}

func (c signalClock) NewTimerAt(deadline time.Time) clock.Timer {
	return c.NewTimer(deadline.Sub(c.Now()))
}

// expectTimer waits for the executor to make a timer and checks its duration.
func (h *harness) expectTimer(d time.Duration) {
	h.t.Helper()
	select {
	case got := <-h.made:
		if got != d {
			h.t.Fatalf("timer of %v, want %v", got, d)
		}
	case <-time.After(10 * time.Second):
		h.t.Fatalf("no timer of %v made", d)
	}
}

// expectStarted waits for the attempts ns to start, in any order.
func (h *harness) expectStarted(ns ...int) {
	h.t.Helper()
	want := map[int]bool{}
	for _, n := range ns {
		want[n] = true
	}
	for range ns {
		select {
		case n := <-h.started:
			if !want[n] {
				h.t.Fatalf("attempt %d started, want %v", n, ns)
			}
			delete(want, n)
		case <-time.After(10 * time.Second):
			h.t.Fatalf("attempts %v did not start", want)
		}
	}
}

// expectQuiet checks that no attempt has started. It is only called when
// nothing can start one (no due timer, no reply sent).
func (h *harness) expectQuiet() {
	h.t.Helper()
	select {
	case n := <-h.started:
		h.t.Fatalf("attempt %d started unexpectedly", n)
	default:
	}
}

// expectNotFired checks, just before a timer's deadline, that it is still
// pending (Fake.Add fires due timers before it returns) and that no attempt
// started.
func (h *harness) expectNotFired() {
	h.t.Helper()
	if n := h.fake.Timers(); n != 1 {
		h.t.Fatalf("%d timers pending before the deadline, want 1: it fired early", n)
	}
	h.expectQuiet()
}

// waitTimers waits until n timers are pending: the executor is waiting.
func (h *harness) waitTimers(n int) {
	h.t.Helper()
	testwait.Timers(h.t, h.fake, n)
}

func (h *harness) reply(n int, o retryexec.Outcome) { h.replies[n] <- o }

func (h *harness) result() Result {
	h.t.Helper()
	select {
	case r := <-h.done:
		return r
	case <-time.After(10 * time.Second):
		h.t.Fatal("Do did not return")
	}
	return Result{}
}

func policy(delay time.Duration) hedge.Policy {
	return hedge.Policy{MaxAttempts: 4, HedgingDelay: delay, NonFatalCodes: codes.NewSet(codes.Busy)}
}

func TestHedgeSendsEveryDelayAndFirstSuccessWins(t *testing.T) {
	h := start(t, ExecutorConfig{Policy: policy(500 * ms)}, context.Background())
	h.expectStarted(0)
	h.waitTimers(1)
	h.fake.Add(499 * ms)
	h.expectNotFired()
	h.fake.Add(ms)
	h.expectStarted(1)
	h.waitTimers(1)
	h.fake.Add(500 * ms)
	h.expectStarted(2)
	h.waitTimers(1)
	h.reply(1, okO)
	r := h.result()
	if r.Stop != retry.StopSucceeded || r.Winner != 1 || r.Sent != 3 || r.Cancelled != 2 || r.Err() != nil {
		t.Fatalf("Result %+v", r)
	}
	if len(h.cancelled) != 2 {
		t.Fatalf("cancelled attempts %v, want 0 and 2", h.cancelled)
	}
	if h.fake.Timers() != 0 {
		t.Fatal("the hedging timer was left running")
	}
}

func TestHedgeZeroDelaySendsAllAtOnce(t *testing.T) {
	p := policy(0)
	p.MaxAttempts = 10 // capped at 5
	h := start(t, ExecutorConfig{Policy: p}, context.Background())
	h.expectStarted(0, 1, 2, 3, 4)
	if h.fake.Timers() != 0 {
		t.Fatal("a timer with nothing left to send")
	}
	for n := range 5 {
		h.reply(n, busyO)
	}
	r := h.result()
	if r.Stop != retry.StopExhausted || r.Sent != 5 || r.Err() != errBusy || r.Cancelled != 0 {
		t.Fatalf("Result %+v", r)
	}
}

func TestHedgeNonFatalSendsNextAtOnce(t *testing.T) {
	h := start(t, ExecutorConfig{Policy: policy(time.Hour)}, context.Background())
	h.expectStarted(0)
	h.waitTimers(1)
	h.reply(0, busyO)
	h.expectStarted(1) // no clock movement
	// Later hedges resume hedgingDelay after the shortcut.
	h.waitTimers(1)
	h.fake.Add(time.Hour - 1)
	h.expectNotFired()
	h.fake.Add(1)
	h.expectStarted(2)
	h.reply(2, okO)
	r := h.result()
	if r.Stop != retry.StopSucceeded || r.Winner != 2 || r.Sent != 3 || r.Cancelled != 1 {
		t.Fatalf("Result %+v", r)
	}
}

func TestHedgeFatalEndsTheCall(t *testing.T) {
	h := start(t, ExecutorConfig{Policy: policy(100 * ms)}, context.Background())
	h.expectStarted(0)
	h.waitTimers(1)
	h.fake.Add(100 * ms)
	h.expectStarted(1)
	h.reply(1, badO)
	r := h.result()
	if r.Stop != retry.StopNotRetryable || r.Err() != errBad || r.Winner != 1 || r.Cancelled != 1 || r.Sent != 2 {
		t.Fatalf("Result %+v", r)
	}
	if len(h.cancelled) != 1 || h.cancelled[0] != 0 {
		t.Fatalf("cancelled %v, want [0]", h.cancelled)
	}
}

func TestHedgeCommittedIsFatal(t *testing.T) {
	h := start(t, ExecutorConfig{Policy: policy(100 * ms)}, context.Background())
	h.expectStarted(0)
	h.reply(0, retryexec.Outcome{Err: errBusy, Code: codes.Busy, Committed: true})
	if r := h.result(); r.Stop != retry.StopCommitted || r.Sent != 1 {
		t.Fatalf("Result %+v", r)
	}
}

func TestHedgePushbackDelaysNextHedge(t *testing.T) {
	h := start(t, ExecutorConfig{Policy: policy(time.Second)}, context.Background())
	h.expectStarted(0)
	h.expectTimer(time.Second)
	h.reply(0, retryexec.Outcome{Err: errBusy, Code: codes.Busy, Pushback: retry.PushbackAfter(300 * ms)})
	h.expectTimer(300 * ms) // the pushback timer replaced the hedging timer
	if h.fake.Timers() != 1 {
		t.Fatalf("%d timers pending, want only the pushback's", h.fake.Timers())
	}
	h.fake.Add(299 * ms)
	h.expectNotFired()
	h.fake.Add(ms)
	h.expectStarted(1)
	h.expectTimer(time.Second) // and then hedgingDelay again
	h.fake.Add(time.Second)
	h.expectStarted(2)
	h.reply(1, okO)
	if r := h.result(); r.Stop != retry.StopSucceeded || r.Winner != 1 {
		t.Fatalf("Result %+v", r)
	}
}

func TestHedgePushbackStopStopsHedging(t *testing.T) {
	th, _ := retryexec.NewThrottle(retry.ThrottleConfig{MaxTokens: 10, TokenRatio: 0.1})
	h := start(t, ExecutorConfig{Policy: policy(100 * ms), Throttle: th}, context.Background())
	h.expectStarted(0)
	h.waitTimers(1)
	h.fake.Add(100 * ms)
	h.expectStarted(1)
	h.waitTimers(1)
	h.reply(0, retryexec.Outcome{Err: errBusy, Code: codes.Busy, Pushback: retry.PushbackStopped()})
	h.waitTimers(0)
	h.fake.Add(time.Hour)
	h.expectQuiet()
	h.reply(1, busyO)
	r := h.result()
	if r.Stop != retry.StopPushback || r.Sent != 2 || r.Err() != errBusy {
		t.Fatalf("Result %+v", r)
	}
	if th.Tokens() != 8 {
		t.Fatalf("tokens %v, want 8 (two counted failures)", th.Tokens())
	}
}

func TestHedgeThrottle(t *testing.T) {
	newThrottle := func(failures int) *retryexec.Throttle {
		th, _ := retryexec.NewThrottle(retry.ThrottleConfig{MaxTokens: 2, TokenRatio: 0.5})
		for range failures {
			th.RecordFailure()
		}
		return th
	}
	t.Run("refusal never stops the first attempt", func(t *testing.T) {
		th := newThrottle(1) // 1 token of 2: at the threshold
		h := start(t, ExecutorConfig{Policy: policy(100 * ms), Throttle: th}, context.Background())
		h.expectStarted(0)
		h.waitTimers(1)
		h.fake.Add(100 * ms) // the hedge is refused
		h.waitTimers(0)
		h.expectQuiet()
		h.reply(0, okO)
		r := h.result()
		if r.Stop != retry.StopSucceeded || r.Sent != 1 || th.Tokens() != 1.5 {
			t.Fatalf("Result %+v, tokens %v", r, th.Tokens())
		}
	})
	t.Run("refused after a non-fatal failure returns it", func(t *testing.T) {
		th := newThrottle(0)
		h := start(t, ExecutorConfig{Policy: policy(100 * ms), Throttle: th}, context.Background())
		h.expectStarted(0)
		h.reply(0, busyO) // 2 -> 1 token: the next hedge is refused
		r := h.result()
		if r.Stop != retry.StopThrottled || r.Sent != 1 || r.Err() != errBusy || th.Tokens() != 1 {
			t.Fatalf("Result %+v, tokens %v", r, th.Tokens())
		}
	})
	t.Run("zero delay stops at the threshold", func(t *testing.T) {
		th := newThrottle(1)
		h := start(t, ExecutorConfig{Policy: policy(0), Throttle: th}, context.Background())
		h.expectStarted(0)
		h.reply(0, badO)
		if r := h.result(); r.Sent != 1 || r.Stop != retry.StopNotRetryable || th.Tokens() != 1 {
			t.Fatalf("Result %+v, tokens %v", r, th.Tokens())
		}
	})
}

// An attempt declined before any handler ran is sent again in the same
// slot: no attempt used, no throttle token spent.
func TestHedgeTransparentOutcomesTakeNoSlot(t *testing.T) {
	th, _ := retryexec.NewThrottle(retry.ThrottleConfig{MaxTokens: 10, TokenRatio: 0.1})
	h := start(t, ExecutorConfig{Policy: policy(time.Hour), Throttle: th}, context.Background())
	h.expectStarted(0)
	h.expectTimer(time.Hour)
	h.reply(0, retryexec.Outcome{Err: errBad, Code: codes.Declined, DeclinedEarly: true})
	h.expectStarted(1) // declined before the handler: again at once, once, numbered anew
	h.reply(1, okO)
	if r := h.result(); r.Stop != retry.StopSucceeded || r.Winner != 1 || r.Sent != 1 || th.Tokens() != 10 {
		t.Fatalf("Result %+v, tokens %v", r, th.Tokens())
	}
}

// A transparent re-send never takes the number of an attempt still out:
// the original is declined early while the first hedge is out, and its
// re-send is attempt 2, not a second attempt 1.
func TestHedgeTransparentResendIsNumberedAnew(t *testing.T) {
	h := start(t, ExecutorConfig{Policy: policy(100 * ms)}, context.Background())
	h.expectStarted(0)
	h.expectTimer(100 * ms)
	h.fake.Add(100 * ms)
	h.expectStarted(1)
	h.expectTimer(100 * ms)
	h.reply(0, retryexec.Outcome{Err: errBad, Code: codes.Declined, DeclinedEarly: true})
	h.expectStarted(2)
	h.reply(2, okO)
	if r := h.result(); r.Stop != retry.StopSucceeded || r.Winner != 2 || r.Sent != 2 || r.Cancelled != 1 {
		t.Fatalf("Result %+v, want attempt 2 to win with 2 slots used and attempt 1 cancelled", r)
	}
}

// The first early decline goes again after the pause its server asked for,
// taking no slot; a second one is an ordinary failure, fatal for a code
// that is not non-fatal, as it is for retries.
func TestHedgeEarlyDeclineHonoursPushbackThenIsFatal(t *testing.T) {
	h := start(t, ExecutorConfig{Policy: policy(time.Hour)}, context.Background())
	h.expectStarted(0)
	h.expectTimer(time.Hour)
	declined := retryexec.Outcome{Err: errBad, Code: codes.Declined, DeclinedEarly: true}
	paused := declined
	paused.Pushback = retry.PushbackAfter(200 * ms)
	h.reply(0, paused)
	h.expectTimer(200 * ms)
	h.fake.Add(200*ms - 1)
	h.expectNotFired()
	h.fake.Add(1)
	h.expectStarted(1)
	h.reply(1, declined)
	if r := h.result(); r.Stop != retry.StopNotRetryable || r.Sent != 1 || r.Outcome.Code != codes.Declined {
		t.Fatalf("Result %+v, want the second decline to end the call (StopNotRetryable, 1 sent)", r)
	}
}

// A hedge nothing could take (every peer throttled) stops hedging but does
// not end the call while an attempt is still out.
func TestHedgeLocalOutcomeStopsHedgingOnly(t *testing.T) {
	h := start(t, ExecutorConfig{Policy: policy(100 * ms)}, context.Background())
	h.expectStarted(0)
	h.waitTimers(1)
	h.fake.Add(100 * ms)
	h.expectStarted(1)
	h.waitTimers(1) // the third attempt's timer: armed, so waitTimers(0) below means stopped
	h.reply(1, retryexec.Outcome{Err: errBad, Local: true})
	h.waitTimers(0)
	h.reply(0, okO)
	r := h.result()
	if r.Stop != retry.StopSucceeded || r.Winner != 0 || r.Sent != 1 {
		t.Fatalf("Result %+v", r)
	}
	h.expectQuiet()
}

// A hedge that could not be sent because the caller's deadline had passed
// ends the call with the context, even when its outcome reaches Do before
// ctx.Done is closed (the transport checks the deadline against the time,
// before the context's timer fires).
func TestHedgeLocalOutcomeAfterTheDeadlineReportsTheContext(t *testing.T) {
	e, err := NewExecutor(ExecutorConfig{Policy: policy(time.Hour), Clock: clock.NewFake(time.Unix(0, 0))})
	if err != nil {
		t.Fatal(err)
	}
	var late testctx.Late
	r := e.Do(&late, func(actx context.Context, a retryexec.Attempt) retryexec.Outcome {
		if a.Number == 0 {
			return retryexec.Outcome{Err: errBad, Code: codes.Busy}
		}
		late.Pass() // the deadline passes; the timer has not fired
		return retryexec.Outcome{Err: errors.New("timeout"), Code: codes.Timeout, Local: true}
	})
	if r.Stop != retry.StopContext || r.CtxErr != context.DeadlineExceeded {
		t.Fatalf("Result %+v, want StopContext with DeadlineExceeded", r)
	}
}

func TestHedgeContextCancelsEverything(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	h := start(t, ExecutorConfig{Policy: policy(100 * ms)}, ctx)
	h.expectStarted(0)
	h.waitTimers(1)
	h.fake.Add(100 * ms)
	h.expectStarted(1)
	h.waitTimers(1)
	cancel()
	r := h.result()
	if r.Stop != retry.StopContext || !errors.Is(r.CtxErr, context.Canceled) || r.Cancelled != 2 || r.Err() == nil {
		t.Fatalf("Result %+v", r)
	}
	if len(h.cancelled) != 2 || h.fake.Timers() != 0 {
		t.Fatalf("cancelled %v, timers %d", h.cancelled, h.fake.Timers())
	}
}

func TestHedgeContextKeepsLastFailure(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	h := start(t, ExecutorConfig{Policy: policy(time.Second)}, ctx)
	h.expectStarted(0)
	h.expectTimer(time.Second)
	h.reply(0, retryexec.Outcome{Err: errBusy, Code: codes.Busy, Pushback: retry.PushbackAfter(time.Hour)})
	h.expectTimer(time.Hour)
	cancel()
	r := h.result()
	if r.Stop != retry.StopContext || r.Err() != errBusy || r.Winner != 0 || r.Sent != 1 {
		t.Fatalf("Result %+v", r)
	}
}

func TestNewExecutorValidates(t *testing.T) {
	if _, err := NewExecutor(ExecutorConfig{}); err == nil || err.Error() != "hedge: ExecutorConfig.Policy.MaxAttempts is 0, must be >= 2" {
		t.Fatalf("zero config: %v", err)
	}
	if _, err := NewExecutor(ExecutorConfig{Policy: policy(0), MaxAttemptsCap: -1}); err == nil ||
		err.Error() != "hedge: ExecutorConfig.MaxAttemptsCap is -1, must be >= 0" {
		t.Fatalf("negative cap: %v", err)
	}
	p := policy(0)
	p.MaxAttempts = 9
	e, _ := NewExecutor(ExecutorConfig{Policy: p, MaxAttemptsCap: 7})
	if e.MaxAttempts() != 7 {
		t.Fatalf("MaxAttempts() = %d", e.MaxAttempts())
	}
}

func BenchmarkHedgeFirstSucceeds(b *testing.B) {
	e, _ := NewExecutor(ExecutorConfig{Policy: policy(time.Hour)})
	ctx := context.Background()
	attempt := func(context.Context, retryexec.Attempt) retryexec.Outcome { return retryexec.Outcome{} }
	b.ReportAllocs()
	for b.Loop() {
		if e.Do(ctx, attempt).Err() != nil {
			b.Fatal("failed")
		}
	}
}
