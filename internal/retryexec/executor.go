package retryexec

import (
	"context"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/sluice-rpc/sluice/internal/ctxerr"

	"github.com/sluice-rpc/sluice/backoff"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/criticality"
	"github.com/sluice-rpc/sluice/internal/config"
	"github.com/sluice-rpc/sluice/internal/latency"
	"github.com/sluice-rpc/sluice/retry"
)

// Attempt describes the try an AttemptFunc is asked to make.
type Attempt struct {
	// Number is how many counted attempts preceded this one: 0 for the
	// original, 1 for the first retry, and so on. It is the value of the
	// previous-rpc-attempts header (absent when 0). Transparent retries do
	// not advance it.
	Number int
	// Index is how many tries of any kind preceded this one, transparent
	// retries included: 0 for the first.
	Index int
	// Transparent reports that this try repeats one that a server declined
	// before any handler ran (Outcome.DeclinedEarly).
	Transparent bool
}

// Outcome is what an attempt reports back to the Executor.
type Outcome struct {
	// Err is the attempt's error; nil means success. An application error
	// (a Thrift exception, a JSON app error) is a success here: it is never
	// retried and never counted as a failure.
	Err error
	// Code is the TChannel code of a failure; it decides whether the
	// failure is retryable. OK (or any code outside the policy's set) makes
	// the failure final.
	Code codes.Code
	// Pushback is the server's retry instruction, if any.
	Pushback retry.Pushback
	// DeclinedEarly reports that the server refused the request before any
	// handler ran. The first such attempt of a call is retried at once and
	// not counted; a second is handled by the policy like any failure.
	DeclinedEarly bool
	// Committed reports that the response had reached the application
	// before the failure: the call is never retried after that.
	Committed bool
	// Local reports that the attempt was not made at all: nothing could
	// take it (no peer ready or reachable, every peer throttled, no peers,
	// the client closed). It ends the call; when an earlier attempt failed
	// remotely, that failure is the call's error (with StopThrottled), not
	// the local one. An attempt whose connection failed before anything
	// was sent is the AttemptFunc's to move to another peer (the channel
	// does, once per peer); the executors never loop on it.
	Local bool
}

// Transparent reports whether o never reached the server's application
// and may go again without counting as an attempt or in the Throttle (the
// retry design's transparent retry): it was declined early and the call
// has not yet used its one such re-send (declinedBefore). A committed
// outcome or a "do not retry" pushback never is. The retry and hedge
// executors both decide with it.
func (o Outcome) Transparent(declinedBefore bool) bool {
	return o.Err != nil && !o.Committed && o.Pushback.Kind != retry.PushbackStop && o.DeclinedEarly && !declinedBefore
}

// AttemptFunc makes one attempt of a call. It must honour ctx and must not
// keep ctx or a after it returns.
type AttemptFunc func(ctx context.Context, a Attempt) Outcome

// Result is how a call ended.
type Result struct {
	// Outcome is the last attempt's outcome. Outcome.Err is the call's
	// error: nil on success, else the last attempt's failure (also when the
	// context ended the call while waiting to retry).
	Outcome Outcome
	// Attempts is the number of tries made, transparent retries included.
	Attempts int
	// Counted is the number of tries counted toward MaxAttempts.
	Counted int
	// Stop says why no further attempt was made.
	Stop retry.StopReason
	// CtxErr is the context's error when Stop is retry.StopContext, else nil.
	CtxErr error
}

// Err returns the call's error: Outcome.Err.
func (r Result) Err() error { return r.Outcome.Err }

// ExecutorConfig configures an Executor. Every field is optional.
type ExecutorConfig struct {
	// Policy is the retry policy; nil means no retries (one counted attempt
	// per call; the transparent retry of an early decline still happens, as
	// the gRPC design says).
	Policy *retry.Policy
	// MaxAttemptsCap is the client-side cap on Policy.MaxAttempts; 0 means
	// retry.MaxAttemptsCap (5). It must be >= 0.
	MaxAttemptsCap int
	// Throttle is the service's retry-throttling bucket; nil means none.
	Throttle *Throttle
	// Buffer bounds the bytes held for retries; DoSized reserves from it.
	// nil means no limit.
	Buffer *Buffer
	// Clock makes the timers of every wait; nil means clock.Real.
	Clock clock.Clock
	// Rand returns uniform numbers in [0, 1) for the backoff jitter; nil
	// means math/rand/v2's Float64. It must be safe for concurrent use if
	// the Executor is shared by concurrent calls.
	Rand func() float64
	// OnRetry, if set, is called before each wait for a retry (counted or
	// transparent) with the attempt about to be made and the wait.
	OnRetry func(next Attempt, wait time.Duration)
	// Latency, if set, is the method's expected latency: no attempt after
	// the first is sent when the time left before the context's deadline
	// is shorter (see Doomed; Result.Stop is retry.StopDeadline and the
	// call's error the last attempt's). nil means no such check.
	Latency *latency.Low
}

// Validate reports the first rule c breaks, as a *retry.FieldError, or nil.
func (c ExecutorConfig) Validate() error {
	if c.Policy != nil {
		if err := c.Policy.Validate(); err != nil {
			return config.Nest(err, "retry", "ExecutorConfig.Policy")
		}
	}
	if c.MaxAttemptsCap < 0 {
		return fieldError("ExecutorConfig.MaxAttemptsCap", strconv.Itoa(c.MaxAttemptsCap), "must be >= 0")
	}
	return nil
}

// Executor runs a call's attempts one after another under a retry policy
// (gRPC's retry design, gRFC A6). It never starts a goroutine: Do runs every
// attempt and every wait on the caller's goroutine and returns when the
// call is over. An Executor is immutable and safe for concurrent use by any
// number of calls (given a concurrency-safe Rand).
//
// The rules, for each attempt's Outcome:
//   - success (Err nil): return it; the Throttle gets a success.
//   - DeclinedEarly, the first time in the call: try again at once (or
//     after its pushback delay), not counted; afterwards, or with a "do not
//     retry" pushback, it is an ordinary failure.
//   - Local (the attempt could not be made): stop; the call's error is the
//     last remote failure if there was one (StopContext if ctx has ended,
//     else StopThrottled), else this one.
//   - otherwise the attempt is counted. A failure with a retryable code or
//     a "do not retry" pushback is a Throttle failure. The call stops when
//     the outcome is Committed, the pushback says stop, the code is not
//     retryable, MaxAttempts have been counted (this wins over a pushback
//     delay), the request was not buffered, or the Throttle refuses (the
//     failure is returned at once, nothing blocks).
//   - the retry waits exactly the pushback delay if there is one, and the
//     backoff restarts from InitialBackoff after it; else the policy's
//     backoff Delay for the number of retries since the start or the last
//     pushback.
//
// When the context ends during a wait, Do returns at once with the last
// attempt's outcome and StopContext. A call makes at most MaxAttempts
// counted attempts and one transparent one.
type Executor struct {
	backoff     backoff.Exponential
	retryable   codes.Set
	maxAttempts int
	throttle    *Throttle
	buffer      *Buffer
	clock       clock.Clock
	rand        func() float64
	onRetry     func(Attempt, time.Duration)
	latency     *latency.Low
}

// NewExecutor returns an Executor configured by c, or c's validation error.
func NewExecutor(c ExecutorConfig) (*Executor, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	e := &Executor{
		maxAttempts: 1,
		throttle:    c.Throttle,
		buffer:      c.Buffer,
		clock:       c.Clock,
		rand:        c.Rand,
		onRetry:     c.OnRetry,
		latency:     c.Latency,
	}
	if p := c.Policy; p != nil {
		e.backoff = p.Backoff()
		e.retryable = p.RetryableCodes
		e.maxAttempts = p.Attempts(c.MaxAttemptsCap)
	}
	if e.clock == nil {
		e.clock = clock.Real
	}
	if e.rand == nil {
		e.rand = rand.Float64
	}
	return e, nil
}

// MaxAttempts returns the attempts a call may make: the policy's
// MaxAttempts under the client-side cap, or 1 without a policy.
func (e *Executor) MaxAttempts() int { return e.maxAttempts }

// Retries reports whether the policy retries a failure with code c (when
// its attempts, budget and deadline allow).
func (e *Executor) Retries(c codes.Code) bool { return e.maxAttempts > 1 && e.retryable.Has(c) }

// Do runs the call: attempt is called for the original attempt and for each
// retry, on the caller's goroutine, with ctx unchanged. Do returns when an
// attempt succeeds, the rules say stop, or ctx ends during a wait. It does
// not allocate unless it waits (each wait makes one timer).
func (e *Executor) Do(ctx context.Context, attempt AttemptFunc) Result {
	return e.run(ctx, true, criticality.Critical, attempt)
}

// DoSized is Do for a request of size bytes: it reserves them in the
// executor's Buffer for the duration of the call. A request that does not
// fit is attempted once and never retried, not even transparently
// (Result.Stop is retry.StopUnbuffered when a retry was refused for this reason).
func (e *Executor) DoSized(ctx context.Context, size int64, attempt AttemptFunc) Result {
	return e.DoSizedFor(ctx, size, criticality.Critical, attempt)
}

// DoSizedFor is DoSized for a call of criticality class c: its retries
// need the Throttle's permission for that class (Throttle.AllowFor), so
// that the lower classes stop retrying first.
func (e *Executor) DoSizedFor(ctx context.Context, size int64, c criticality.Class, attempt AttemptFunc) Result {
	r, ok := e.buffer.Reserve(size)
	res := e.run(ctx, ok, c, attempt)
	r.Release()
	return res
}

func (e *Executor) run(ctx context.Context, retries bool, class criticality.Class, attempt AttemptFunc) Result {
	var (
		res      Result
		a        Attempt
		declined bool // the one transparent retry of DeclinedEarly is used
		sinceP   int  // retries since the start or the last pushback
	)
	for {
		o := attempt(ctx, a)
		if o.Local {
			if res.Attempts == 0 {
				res.Outcome, res.Stop = o, retry.StopNotRetryable
			} else if err := ctxerr.Of(ctx); err != nil {
				// The attempt could not be made because the context had
				// ended, or its deadline had passed (as the backoff timer
				// fired): the context ended the call, not a throttle.
				res.Stop, res.CtxErr = retry.StopContext, err
			} else {
				res.Stop = retry.StopThrottled // keep the last remote failure
			}
			return res
		}
		res.Attempts++
		res.Outcome = o
		if o.Err == nil {
			res.Counted++
			e.throttle.RecordSuccess()
			res.Stop = retry.StopSucceeded
			return res
		}

		var wait time.Duration
		transparent := o.Transparent(declined)
		if transparent { // declined before any handler ran
			declined = true
			if o.Pushback.Kind == retry.PushbackDelay {
				wait = o.Pushback.Delay // the server asked for a pause
			}
		}

		if !transparent {
			res.Counted++
			if o.Pushback.Kind == retry.PushbackStop || e.retryable.Has(o.Code) {
				e.throttle.RecordFailure()
			}
			switch {
			case o.Committed:
				res.Stop = retry.StopCommitted
			case o.Pushback.Kind == retry.PushbackStop:
				res.Stop = retry.StopPushback
			case !e.retryable.Has(o.Code):
				res.Stop = retry.StopNotRetryable
			case res.Counted >= e.maxAttempts:
				res.Stop = retry.StopExhausted
			case !retries:
				res.Stop = retry.StopUnbuffered
			case !e.throttle.AllowFor(class):
				res.Stop = retry.StopThrottled
			}
			if res.Stop != 0 {
				return res
			}
			if o.Pushback.Kind == retry.PushbackDelay {
				wait, sinceP = o.Pushback.Delay, 0
			} else {
				sinceP++
				wait = e.backoff.Delay(sinceP, e.rand())
			}
		} else if !retries {
			res.Stop = retry.StopUnbuffered
			return res
		}

		a = Attempt{Number: res.Counted, Index: res.Attempts, Transparent: transparent}
		if e.onRetry != nil {
			e.onRetry(a, wait)
		}
		if err := clock.Sleep(ctx, e.clock, wait); err != nil {
			res.Stop, res.CtxErr = retry.StopContext, err
			return res
		}
		if Doomed(ctx, e.latency, e.clock) { // after the wait, which took some of the time left
			res.Stop = retry.StopDeadline
			return res
		}
	}
}
