package retryexec

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/backoff"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/testkit/testctx"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/retry"
)

var (
	errBusy     = errors.New("busy")
	errBad      = errors.New("bad request")
	errDeclined = errors.New("declined")
	errNoPeer   = errors.New("no connection")
)

var (
	okO       = Outcome{}
	busyO     = Outcome{Err: errBusy, Code: codes.Busy}
	badO      = Outcome{Err: errBad, Code: codes.BadRequest}
	declEarly = Outcome{Err: errDeclined, Code: codes.Declined, DeclinedEarly: true}
)

const ms = time.Millisecond

func with(o Outcome, edit func(*Outcome)) Outcome { edit(&o); return o }

func pb(d time.Duration) func(*Outcome) {
	return func(o *Outcome) { o.Pushback = retry.PushbackAfter(d) }
}

// autoClock is a clock.Fake whose timers fire as soon as they are made, the
// fake time moving forward by their duration: a synchronous Do then runs
// to its end on the test's goroutine, and each attempt can read the fake
// time at which it was made.
type autoClock struct{ *clock.Fake }

func (c autoClock) NewTimer(d time.Duration) clock.Timer {
	t := c.Fake.NewTimer(d)
	c.Fake.Add(d)
	return t
}

func (c autoClock) NewTimerAt(deadline time.Time) clock.Timer {
	return c.NewTimer(deadline.Sub(c.Now()))
}

var epoch = time.Unix(1_700_000_000, 0)

func half() float64 { return 0.5 }

func TestExecutorRules(t *testing.T) {
	type att struct {
		number, index int
		transparent   bool
		at            time.Duration // fake time since the start
	}
	pol := func(edit func(*retry.Policy)) *retry.Policy {
		p := validPolicy() // 4 attempts, 100ms, 1s, x2, BUSY
		if edit != nil {
			edit(&p)
		}
		return &p
	}
	tests := []struct {
		name        string
		policy      *retry.Policy
		cfg         func(*ExecutorConfig)
		throttle    *retry.ThrottleConfig // nil: {10, 0.1}
		outcomes    []Outcome             // the last one repeats
		want        []att
		wantStop    retry.StopReason
		wantErr     error
		wantCounted int
		wantTokens  float64
	}{
		{
			name: "success at once", policy: pol(nil), outcomes: []Outcome{okO},
			want: []att{{0, 0, false, 0}}, wantStop: retry.StopSucceeded, wantCounted: 1, wantTokens: 10,
		},
		{
			name: "retryable failures then success, full jitter", policy: pol(nil),
			outcomes: []Outcome{busyO, busyO, okO},
			want:     []att{{0, 0, false, 0}, {1, 1, false, 50 * ms}, {2, 2, false, 150 * ms}},
			wantStop: retry.StopSucceeded, wantCounted: 3, wantTokens: 8.1,
		},
		{
			name: "equal jitter", policy: pol(func(p *retry.Policy) { p.Jitter = backoff.EqualJitter }),
			outcomes: []Outcome{busyO, busyO, okO},
			want:     []att{{0, 0, false, 0}, {1, 1, false, 75 * ms}, {2, 2, false, 225 * ms}},
			wantStop: retry.StopSucceeded, wantCounted: 3, wantTokens: 8.1,
		},
		{
			name: "non-retryable code is final and not a throttle failure", policy: pol(nil),
			outcomes: []Outcome{badO},
			want:     []att{{0, 0, false, 0}}, wantStop: retry.StopNotRetryable, wantErr: errBad, wantCounted: 1, wantTokens: 10,
		},
		{
			name: "local error without a code is final", policy: pol(nil),
			outcomes: []Outcome{{Err: errNoPeer}},
			want:     []att{{0, 0, false, 0}}, wantStop: retry.StopNotRetryable, wantErr: errNoPeer, wantCounted: 1, wantTokens: 10,
		},
		{
			name: "maxAttempts exhausted", policy: pol(nil), outcomes: []Outcome{busyO},
			want:     []att{{0, 0, false, 0}, {1, 1, false, 50 * ms}, {2, 2, false, 150 * ms}, {3, 3, false, 350 * ms}},
			wantStop: retry.StopExhausted, wantErr: errBusy, wantCounted: 4, wantTokens: 6,
		},
		{
			name: "maxAttempts 10 is capped at 5", policy: pol(func(p *retry.Policy) { p.MaxAttempts = 10 }),
			outcomes: []Outcome{busyO},
			want: []att{{0, 0, false, 0}, {1, 1, false, 50 * ms}, {2, 2, false, 150 * ms}, {3, 3, false, 350 * ms},
				{4, 4, false, 750 * ms}},
			wantStop: retry.StopExhausted, wantErr: errBusy, wantCounted: 5, wantTokens: 5,
		},
		{
			name: "a raised cap, backoff capped at maxBackoff", policy: pol(func(p *retry.Policy) { p.MaxAttempts = 10 }),
			cfg:      func(c *ExecutorConfig) { c.MaxAttemptsCap = 7; c.Throttle = nil },
			outcomes: []Outcome{busyO},
			want: []att{{0, 0, false, 0}, {1, 1, false, 50 * ms}, {2, 2, false, 150 * ms}, {3, 3, false, 350 * ms},
				{4, 4, false, 750 * ms}, {5, 5, false, 1250 * ms}, {6, 6, false, 1750 * ms}},
			wantStop: retry.StopExhausted, wantErr: errBusy, wantCounted: 7,
		},
		{
			name: "throttle refuses the retry at once", policy: pol(nil),
			throttle: &retry.ThrottleConfig{MaxTokens: 3, TokenRatio: 0.1}, outcomes: []Outcome{busyO},
			want:     []att{{0, 0, false, 0}, {1, 1, false, 50 * ms}},
			wantStop: retry.StopThrottled, wantErr: errBusy, wantCounted: 2, wantTokens: 1,
		},
		{
			name: "pushback waits exactly, then backoff restarts from initial", policy: pol(func(p *retry.Policy) { p.MaxAttempts = 5 }),
			outcomes: []Outcome{busyO, busyO, with(busyO, pb(300*ms)), busyO, okO},
			want: []att{{0, 0, false, 0}, {1, 1, false, 50 * ms}, {2, 2, false, 150 * ms}, {3, 3, false, 450 * ms},
				{4, 4, false, 500 * ms}},
			wantStop: retry.StopSucceeded, wantCounted: 5, wantTokens: 6.1,
		},
		{
			name: "pushback zero retries at once", policy: pol(nil),
			outcomes: []Outcome{with(busyO, pb(0)), okO},
			want:     []att{{0, 0, false, 0}, {1, 1, false, 0}}, wantStop: retry.StopSucceeded, wantCounted: 2, wantTokens: 9.1,
		},
		{
			name: "pushback stop ends the call and counts as a failure", policy: pol(nil),
			outcomes: []Outcome{with(busyO, pb(-1))},
			want:     []att{{0, 0, false, 0}}, wantStop: retry.StopPushback, wantErr: errBusy, wantCounted: 1, wantTokens: 9,
		},
		{
			name: "pushback stop counts even with a non-retryable code", policy: pol(nil),
			outcomes: []Outcome{with(badO, pb(-1))},
			want:     []att{{0, 0, false, 0}}, wantStop: retry.StopPushback, wantErr: errBad, wantCounted: 1, wantTokens: 9,
		},
		{
			name: "maxAttempts wins over a pushback delay", policy: pol(func(p *retry.Policy) { p.MaxAttempts = 2 }),
			outcomes: []Outcome{busyO, with(busyO, pb(10*ms))},
			want:     []att{{0, 0, false, 0}, {1, 1, false, 50 * ms}},
			wantStop: retry.StopExhausted, wantErr: errBusy, wantCounted: 2, wantTokens: 8,
		},
		{
			name: "committed failure is never retried", policy: pol(nil),
			outcomes: []Outcome{with(busyO, func(o *Outcome) { o.Committed = true })},
			want:     []att{{0, 0, false, 0}}, wantStop: retry.StopCommitted, wantErr: errBusy, wantCounted: 1, wantTokens: 9,
		},
		{
			name: "committed beats an early decline and pushback", policy: pol(nil),
			outcomes: []Outcome{with(declEarly, func(o *Outcome) { o.Committed = true; o.Pushback = retry.PushbackAfter(ms) })},
			want:     []att{{0, 0, false, 0}}, wantStop: retry.StopCommitted, wantErr: errDeclined, wantCounted: 1, wantTokens: 10,
		},
		{
			name: "an early decline uses neither maxAttempts nor tokens", policy: pol(func(p *retry.Policy) { p.MaxAttempts = 2 }),
			outcomes: []Outcome{busyO, declEarly, busyO},
			want:     []att{{0, 0, false, 0}, {1, 1, false, 50 * ms}, {1, 2, true, 50 * ms}},
			wantStop: retry.StopExhausted, wantErr: errBusy, wantCounted: 2, wantTokens: 8,
		},
		{
			name: "declined early is retried once at once", policy: pol(nil),
			outcomes: []Outcome{declEarly, okO},
			want:     []att{{0, 0, false, 0}, {0, 1, true, 0}}, wantStop: retry.StopSucceeded, wantCounted: 1, wantTokens: 10,
		},
		{
			name: "a second early decline is an ordinary failure", policy: pol(nil),
			outcomes: []Outcome{declEarly, declEarly},
			want:     []att{{0, 0, false, 0}, {0, 1, true, 0}},
			wantStop: retry.StopNotRetryable, wantErr: errDeclined, wantCounted: 1, wantTokens: 10,
		},
		{
			name: "later early declines follow the policy", policy: pol(func(p *retry.Policy) { p.RetryableCodes = codes.NewSet(codes.Busy, codes.Declined) }),
			outcomes: []Outcome{declEarly, declEarly, declEarly, okO},
			want:     []att{{0, 0, false, 0}, {0, 1, true, 0}, {1, 2, false, 50 * ms}, {2, 3, false, 150 * ms}},
			wantStop: retry.StopSucceeded, wantCounted: 3, wantTokens: 8.1,
		},
		{
			name: "no policy: one counted attempt", policy: nil, outcomes: []Outcome{busyO},
			want: []att{{0, 0, false, 0}}, wantStop: retry.StopNotRetryable, wantErr: errBusy, wantCounted: 1, wantTokens: 10,
		},
		{
			name: "no policy: the early decline's transparent retry still happens", policy: nil, outcomes: []Outcome{declEarly, okO},
			want:     []att{{0, 0, false, 0}, {0, 1, true, 0}},
			wantStop: retry.StopSucceeded, wantCounted: 1, wantTokens: 10,
		},
		{
			name: "no policy: an ordinary decline ends the call", policy: nil,
			outcomes: []Outcome{{Err: errDeclined, Code: codes.Declined}, okO},
			want:     []att{{0, 0, false, 0}}, wantStop: retry.StopNotRetryable, wantErr: errDeclined, wantCounted: 1, wantTokens: 10,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := clock.NewFake(epoch)
			tc := retry.ThrottleConfig{MaxTokens: 10, TokenRatio: 0.1}
			if tt.throttle != nil {
				tc = *tt.throttle
			}
			th, err := NewThrottle(tc)
			if err != nil {
				t.Fatal(err)
			}
			cfg := ExecutorConfig{Policy: tt.policy, Throttle: th, Clock: autoClock{fake}, Rand: half}
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			e, err := NewExecutor(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var got []att
			res := e.Do(context.Background(), func(ctx context.Context, a Attempt) Outcome {
				got = append(got, att{a.Number, a.Index, a.Transparent, fake.Now().Sub(epoch)})
				return tt.outcomes[min(len(got), len(tt.outcomes))-1]
			})
			if len(got) != len(tt.want) {
				t.Fatalf("attempts %+v, want %+v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("attempt %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
			if res.Stop != tt.wantStop || res.Err() != tt.wantErr || res.Attempts != len(tt.want) || res.Counted != tt.wantCounted {
				t.Errorf("Result{Stop: %v, Err: %v, Attempts: %d, Counted: %d}, want {%v, %v, %d, %d}",
					res.Stop, res.Err(), res.Attempts, res.Counted, tt.wantStop, tt.wantErr, len(tt.want), tt.wantCounted)
			}
			if res.CtxErr != nil {
				t.Errorf("CtxErr = %v", res.CtxErr)
			}
			if cfg.Throttle != nil && th.Tokens() != tt.wantTokens {
				t.Errorf("tokens = %v, want %v", th.Tokens(), tt.wantTokens)
			}
			if fake.Timers() != 0 {
				t.Errorf("%d timers left behind", fake.Timers())
			}
		})
	}
}

func TestExecutorOnRetry(t *testing.T) {
	type call struct {
		next Attempt
		wait time.Duration
	}
	var calls []call
	p := validPolicy()
	e, err := NewExecutor(ExecutorConfig{Policy: &p, Clock: autoClock{clock.NewFake(epoch)}, Rand: half,
		OnRetry: func(next Attempt, wait time.Duration) { calls = append(calls, call{next, wait}) }})
	if err != nil {
		t.Fatal(err)
	}
	script := []Outcome{busyO, declEarly, with(busyO, pb(70*ms)), okO}
	n := 0
	e.Do(context.Background(), func(context.Context, Attempt) Outcome { n++; return script[n-1] })
	want := []call{
		{Attempt{Number: 1, Index: 1}, 50 * ms},
		{Attempt{Number: 1, Index: 2, Transparent: true}, 0},
		{Attempt{Number: 2, Index: 3}, 70 * ms},
	}
	if len(calls) != len(want) {
		t.Fatalf("OnRetry calls %+v, want %+v", calls, want)
	}
	for i := range want {
		if calls[i] != want[i] {
			t.Errorf("OnRetry call %d = %+v, want %+v", i, calls[i], want[i])
		}
	}
}

func TestExecutorDoSized(t *testing.T) {
	p := validPolicy()
	buf := NewBuffer(BufferConfig{Total: 100, PerCall: 10})
	e, err := NewExecutor(ExecutorConfig{Policy: &p, Buffer: buf, Clock: autoClock{clock.NewFake(epoch)}, Rand: half})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		size         int64
		script       []Outcome
		wantAttempts int
		wantStop     retry.StopReason
		wantUsed     int64 // during the attempts
	}{
		{"fits: retried", 10, []Outcome{busyO, okO}, 2, retry.StopSucceeded, 10},
		{"too big: sent once", 11, []Outcome{busyO, okO}, 1, retry.StopUnbuffered, 0},
		{"too big: no transparent retry either", 11, []Outcome{declEarly, okO}, 1, retry.StopUnbuffered, 0},
		{"too big: success is still a success", 11, []Outcome{okO}, 1, retry.StopSucceeded, 0},
		{"too big and not retryable", 11, []Outcome{badO}, 1, retry.StopNotRetryable, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := 0
			res := e.DoSized(context.Background(), tt.size, func(context.Context, Attempt) Outcome {
				if buf.Used() != tt.wantUsed {
					t.Errorf("buffer used %d during attempt, want %d", buf.Used(), tt.wantUsed)
				}
				n++
				return tt.script[n-1]
			})
			if res.Attempts != tt.wantAttempts || res.Stop != tt.wantStop {
				t.Errorf("Attempts %d Stop %v, want %d %v", res.Attempts, res.Stop, tt.wantAttempts, tt.wantStop)
			}
			if buf.Used() != 0 {
				t.Errorf("buffer still holds %d after the call", buf.Used())
			}
		})
	}
}

func TestNewExecutorValidates(t *testing.T) {
	bad := validPolicy()
	bad.MaxAttempts = 1
	tests := []struct {
		cfg  ExecutorConfig
		want string
	}{
		{ExecutorConfig{}, ""},
		{ExecutorConfig{Policy: &bad}, "retry: ExecutorConfig.Policy.MaxAttempts is 1, must be >= 2"},
		{ExecutorConfig{MaxAttemptsCap: -1}, "retry: ExecutorConfig.MaxAttemptsCap is -1, must be >= 0"},
	}
	for _, tt := range tests {
		e, err := NewExecutor(tt.cfg)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("NewExecutor(%+v) error %q, want %q", tt.cfg, got, tt.want)
		}
		if err == nil && e.MaxAttempts() != 1 {
			t.Errorf("no policy: MaxAttempts() = %d, want 1", e.MaxAttempts())
		}
	}
	p := validPolicy()
	p.MaxAttempts = 9
	e, _ := NewExecutor(ExecutorConfig{Policy: &p})
	if e.MaxAttempts() != retry.MaxAttemptsCap {
		t.Errorf("MaxAttempts() = %d, want the cap %d", e.MaxAttempts(), retry.MaxAttemptsCap)
	}
}

func TestExecutorWaitsForTheClock(t *testing.T) {
	fake := clock.NewFake(epoch)
	p := validPolicy()
	e, _ := NewExecutor(ExecutorConfig{Policy: &p, Clock: fake, Rand: half})
	script := []Outcome{busyO, okO}
	n := 0
	done := make(chan Result)
	go func() {
		done <- e.Do(context.Background(), func(context.Context, Attempt) Outcome { n++; return script[n-1] })
	}()
	testwait.Timers(t, fake, 1)
	fake.Add(50*ms - 1)
	select {
	case res := <-done:
		t.Fatalf("returned before the backoff elapsed: %+v", res)
	default:
	}
	if fake.Timers() != 1 {
		t.Fatal("the backoff timer fired early")
	}
	fake.Add(1)
	res := testwait.Recv(t, done, "Do to return")
	if res.Stop != retry.StopSucceeded || res.Attempts != 2 {
		t.Fatalf("Result %+v", res)
	}
}

func TestExecutorContextEndsTheWaitAtOnce(t *testing.T) {
	for _, tt := range []struct {
		name   string
		script Outcome
	}{
		{"backoff", busyO},
		{"pushback", with(busyO, pb(time.Hour))},
		{"transparent", with(declEarly, pb(time.Hour))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fake := clock.NewFake(epoch)
			p := validPolicy()
			e, _ := NewExecutor(ExecutorConfig{Policy: &p, Clock: fake, Rand: half})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan Result)
			go func() {
				done <- e.Do(ctx, func(context.Context, Attempt) Outcome { return tt.script })
			}()
			testwait.Timers(t, fake, 1)
			cancel()
			res := testwait.Recv(t, done, "Do to return") // no clock movement needed
			if res.Stop != retry.StopContext || !errors.Is(res.CtxErr, context.Canceled) {
				t.Fatalf("Stop %v CtxErr %v, want retry.StopContext, Canceled", res.Stop, res.CtxErr)
			}
			if res.Err() != tt.script.Err || res.Attempts != 1 {
				t.Fatalf("Err %v Attempts %d, want the last attempt's error after 1 attempt", res.Err(), res.Attempts)
			}
			if fake.Timers() != 0 {
				t.Fatal("the wait's timer was not stopped")
			}
		})
	}
}

func TestExecutorDeadline(t *testing.T) {
	// A zero wait (pushback 0) still notices the ended context.
	fake := clock.NewFake(epoch)
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	p := validPolicy()
	e, _ := NewExecutor(ExecutorConfig{Policy: &p, Clock: fake})
	res := e.Do(ctx, func(context.Context, Attempt) Outcome { return with(busyO, pb(0)) })
	if res.Stop != retry.StopContext || res.Attempts != 1 {
		t.Fatalf("Result %+v", res)
	}
	// On the real clock, a deadline shorter than the backoff ends the call
	// at the deadline, not after the backoff.
	p.InitialBackoff, p.MaxBackoff = time.Hour, time.Hour
	e, _ = NewExecutor(ExecutorConfig{Policy: &p, Rand: half})
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*ms)
	defer cancel2()
	res = e.Do(ctx2, func(context.Context, Attempt) Outcome { return busyO })
	if res.Stop != retry.StopContext || !errors.Is(res.CtxErr, context.DeadlineExceeded) || res.Attempts != 1 {
		t.Fatalf("Result %+v", res)
	}
}

func BenchmarkExecutorSuccess(b *testing.B) {
	p := validPolicy()
	th, _ := NewThrottle(retry.ThrottleConfig{MaxTokens: 10, TokenRatio: 0.1})
	e, _ := NewExecutor(ExecutorConfig{Policy: &p, Throttle: th})
	ctx := context.Background()
	attempt := func(context.Context, Attempt) Outcome { return Outcome{} }
	b.ReportAllocs()
	for b.Loop() {
		if e.Do(ctx, attempt).Err() != nil {
			b.Fatal("failed")
		}
	}
}

// BenchmarkExecutorThirdAttempt: two BUSY failures, then success. The
// jitter source returns 0, so the waits are zero and no timer is made: this
// measures the loop itself.
func BenchmarkExecutorThirdAttempt(b *testing.B) {
	p := validPolicy()
	e, _ := NewExecutor(ExecutorConfig{Policy: &p, Rand: func() float64 { return 0 }})
	ctx := context.Background()
	attempt := func(_ context.Context, a Attempt) Outcome {
		if a.Number < 2 {
			return busyO
		}
		return Outcome{}
	}
	b.ReportAllocs()
	for b.Loop() {
		if res := e.Do(ctx, attempt); res.Attempts != 3 {
			b.Fatal(res)
		}
	}
}

// BenchmarkExecutorThirdAttemptTimers is the same with two real 1µs
// timers: the cost a wait adds.
func BenchmarkExecutorThirdAttemptTimers(b *testing.B) {
	p := validPolicy()
	p.InitialBackoff, p.MaxBackoff = time.Microsecond, time.Microsecond
	e, _ := NewExecutor(ExecutorConfig{Policy: &p, Rand: func() float64 { return 0.99 }})
	ctx := context.Background()
	attempt := func(_ context.Context, a Attempt) Outcome {
		if a.Number < 2 {
			return busyO
		}
		return Outcome{}
	}
	b.ReportAllocs()
	for b.Loop() {
		if res := e.Do(ctx, attempt); res.Attempts != 3 {
			b.Fatal(res)
		}
	}
}

func TestExecutorLocalOutcomeKeepsTheRemoteFailure(t *testing.T) {
	e, err := NewExecutor(ExecutorConfig{Policy: &retry.Policy{MaxAttempts: 3, InitialBackoff: time.Nanosecond, MaxBackoff: time.Nanosecond,
		BackoffMultiplier: 1, RetryableCodes: codes.NewSet(codes.Busy)}, Rand: func() float64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	remote := errors.New("busy")
	local := errors.New("every peer throttled")
	res := e.Do(context.Background(), func(ctx context.Context, a Attempt) Outcome {
		if a.Number == 0 {
			return Outcome{Err: remote, Code: codes.Busy}
		}
		return Outcome{Err: local, Local: true}
	})
	if res.Err() != remote || res.Stop != retry.StopThrottled || res.Attempts != 1 {
		t.Fatalf("got %+v; want the BUSY failure, retry.StopThrottled, 1 attempt", res)
	}
	res = e.Do(context.Background(), func(ctx context.Context, a Attempt) Outcome { return Outcome{Err: local, Local: true} })
	if res.Err() != local || res.Attempts != 0 {
		t.Fatalf("first attempt local: %+v", res)
	}
}

// An attempt that could not be made because the context had ended (the
// deadline passed as the backoff timer fired) ends the call with the
// context, not as throttled.
func TestExecutorLocalOutcomeAfterTheContextEndedReportsTheContext(t *testing.T) {
	e, err := NewExecutor(ExecutorConfig{Policy: &retry.Policy{MaxAttempts: 3, InitialBackoff: time.Nanosecond, MaxBackoff: time.Nanosecond,
		BackoffMultiplier: 1, RetryableCodes: codes.NewSet(codes.Busy)}, Rand: func() float64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	remote := errors.New("busy")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := e.Do(ctx, func(ctx context.Context, a Attempt) Outcome {
		if a.Number == 0 {
			return Outcome{Err: remote, Code: codes.Busy}
		}
		cancel() // the context ends while the retry is on its way out
		return Outcome{Err: errors.New("no peer before the deadline"), Local: true}
	})
	if res.Stop != retry.StopContext || res.CtxErr != context.Canceled || res.Err() != remote || res.Attempts != 1 {
		t.Fatalf("got %+v; want retry.StopContext with Canceled, the BUSY failure, 1 attempt", res)
	}

	// The deadline has passed but the context's timer has not fired yet:
	// the transport saw the deadline first (tchannel-go's BeginCall checks
	// it against the time).
	var late testctx.Late
	res = e.Do(&late, func(ctx context.Context, a Attempt) Outcome {
		if a.Number == 0 {
			return Outcome{Err: remote, Code: codes.Busy}
		}
		late.Pass() // the deadline passes; the timer has not fired
		return Outcome{Err: errors.New("timeout"), Code: codes.Timeout, Local: true}
	})
	if res.Stop != retry.StopContext || res.CtxErr != context.DeadlineExceeded || res.Err() != remote {
		t.Fatalf("deadline passed, its timer not fired: got %+v; want retry.StopContext with DeadlineExceeded", res)
	}
}

func TestExecutorDeclinedEarlyHonoursPushback(t *testing.T) {
	e, err := NewExecutor(ExecutorConfig{Policy: &retry.Policy{MaxAttempts: 3, InitialBackoff: time.Nanosecond, MaxBackoff: time.Nanosecond,
		BackoffMultiplier: 1, RetryableCodes: codes.NewSet(codes.Busy)}})
	if err != nil {
		t.Fatal(err)
	}
	tries := 0
	res := e.Do(context.Background(), func(ctx context.Context, a Attempt) Outcome {
		tries++
		return Outcome{Err: errors.New("declined"), Code: codes.Declined, DeclinedEarly: true, Pushback: retry.PushbackStopped()}
	})
	if tries != 1 || res.Stop != retry.StopPushback {
		t.Fatalf("tries %d, %+v; a declined answer saying do-not-retry was retried", tries, res)
	}
}
