package hedgeexec

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/sluice-rpc/sluice/internal/ctxerr"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/criticality"
	"github.com/sluice-rpc/sluice/hedge"
	"github.com/sluice-rpc/sluice/internal/config"
	"github.com/sluice-rpc/sluice/internal/latency"
	"github.com/sluice-rpc/sluice/internal/retryexec"
	"github.com/sluice-rpc/sluice/retry"
)

// BudgetBurst is the most hedges an Adaptive.Budget saves up, and what it
// starts with: after a quiet spell this many hedges may go out before the
// budget holds hedging to its fraction of calls (hedge.Adaptive.Budget
// says so).
const BudgetBurst = 10

// ExecutorConfig configures an Executor.
type ExecutorConfig struct {
	// Policy is the hedging policy. It must validate.
	Policy hedge.Policy
	// MaxAttemptsCap is the client-side cap on Policy.MaxAttempts; 0 means
	// MaxAttemptsCap (5). It must be >= 0.
	MaxAttemptsCap int
	// Throttle is the service's retry-throttling bucket; every attempt
	// after the first needs its permission. nil means none.
	Throttle *retryexec.Throttle
	// Clock makes the hedging timers; nil means clock.Real.
	Clock clock.Clock
	// Delay, if set, gives each call's hedging delay in place of
	// Policy.HedgingDelay. Without it, a Policy.Adaptive makes the
	// Executor build an Estimator whose Delay it uses (see Estimator).
	Delay func() time.Duration
	// Budget, if set, caps hedges at a fraction of calls: each call
	// deposits, each attempt after the first withdraws, and a refusal stops
	// hedging for that call as the Throttle's does. Without it, a
	// Policy.Adaptive with a Budget > 0 makes one (burst BudgetBurst).
	Budget *Budget
	// Latency, if set, is the method's expected latency: no attempt after
	// the first is sent when the time left before the caller's deadline
	// is shorter (retryexec.Doomed); hedging stops with
	// retry.StopDeadline, the attempts sent run on. nil means no check.
	Latency *latency.Low
}

// Validate reports the first rule c breaks, as a *retry.FieldError, or nil.
func (c ExecutorConfig) Validate() error {
	if err := c.Policy.Validate(); err != nil {
		return config.Nest(err, "hedge", "ExecutorConfig.Policy")
	}
	if c.MaxAttemptsCap < 0 {
		return fieldError("ExecutorConfig.MaxAttemptsCap", strconv.Itoa(c.MaxAttemptsCap), "must be >= 0")
	}
	return nil
}

// Result is how a hedged call ended.
type Result struct {
	// Outcome is the winning attempt's outcome, or the failure that ended
	// the call: the fatal one, else the last to arrive. Outcome.Err is the
	// call's error.
	Outcome retryexec.Outcome
	// Winner is the Number of the attempt whose Outcome is reported, or -1
	// when no attempt reported one (the context ended first and Outcome
	// holds the context's error).
	Winner int
	// Sent is the number of attempts started, the original included.
	Sent int
	// Cancelled is the number of attempts still outstanding when the call
	// was decided; they were cancelled.
	Cancelled int
	// Stop says why the call ended: StopSucceeded, StopNotRetryable (a
	// fatal code), StopCommitted, StopExhausted (every attempt failed and
	// none was left), StopThrottled, StopPushback or StopDeadline (every
	// sent attempt failed after the throttle, a pushback or too little
	// time left stopped hedging), or StopContext.
	Stop retry.StopReason
	// CtxErr is the caller's context error when Stop is StopContext.
	CtxErr error
}

// Err returns the call's error: Outcome.Err.
func (r Result) Err() error { return r.Outcome.Err }

// Executor runs hedged calls (gRPC's retry design, gRFC A6, "Hedging
// Policy"). Each attempt runs on its own goroutine with a context that is
// cancelled as soon as the call is decided; Do returns only after every
// attempt has returned, so no goroutine outlives the call. An Executor is
// immutable and safe for concurrent use.
//
// The rules:
//   - the original attempt (Number 0) starts at once; another starts every
//     HedgingDelay (all at once when it is 0) while none has succeeded, up
//     to MaxAttempts under the client-side cap.
//   - every attempt after the first needs the Throttle's permission; a
//     refusal stops hedging (the attempts already sent go on).
//   - a success ends the call and cancels the others; the Throttle gets a
//     success.
//   - a failure with a non-fatal code starts the next attempt at once, and
//     later ones resume HedgingDelay after it; with a pushback delay N the
//     next starts after N instead. Non-fatal codes count as Throttle
//     failures.
//   - the call's first attempt declined before any handler ran
//     (DeclinedEarly) is sent again transparently, at once or after its
//     pushback delay: it takes no attempt slot and needs no Throttle or
//     Budget permission.
//   - a Local outcome (nothing could take the attempt) stops hedging; the
//     attempts already sent go on.
//   - a pushback saying stop stops hedging and counts as a Throttle failure.
//   - any other failure, or a Committed one, is fatal: it ends the call and
//     cancels the others.
//   - when every sent attempt has failed and no more may be sent, the call
//     returns the last failure.
//   - when the caller's context ends, the attempts are cancelled and the
//     call returns the last failure seen (or the context's error).
type Executor struct {
	policy      hedge.Policy
	maxAttempts int
	throttle    *retryexec.Throttle
	clock       clock.Clock
	delayFn     func() time.Duration
	budget      *Budget
	est         *Estimator // built from Policy.Adaptive, if any
	latency     *latency.Low
}

// NewExecutor returns an Executor configured by c, or c's validation error.
func NewExecutor(c ExecutorConfig) (*Executor, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	e := &Executor{policy: c.Policy, maxAttempts: c.Policy.Attempts(c.MaxAttemptsCap), throttle: c.Throttle, clock: c.Clock,
		delayFn: c.Delay, budget: c.Budget, latency: c.Latency}
	if e.clock == nil {
		e.clock = clock.Real
	}
	if a := c.Policy.Adaptive; a != nil {
		if e.delayFn == nil {
			est, err := NewEstimator(*a, c.Policy.HedgingDelay)
			if err != nil {
				return nil, err
			}
			e.est, e.delayFn = est, est.Delay
		}
		if e.budget == nil && a.Budget > 0 {
			e.budget = NewBudget(a.Budget, BudgetBurst)
		}
	}
	return e, nil
}

// Delay returns the hedging delay a call started now would use: the
// ExecutorConfig's Delay, else the Estimator's (with Policy.Adaptive), else
// Policy.HedgingDelay. It is for introspection; Do reads it itself.
func (e *Executor) Delay() time.Duration {
	if e.delayFn != nil {
		return e.delayFn()
	}
	return e.policy.HedgingDelay
}

// Estimator returns the Estimator built from Policy.Adaptive, or nil. The
// caller feeds it each call's first attempt (Observe when it finished,
// ObserveCensored when it was cut off): the attempt function measures it
// best.
func (e *Executor) Estimator() *Estimator { return e.est }

// MaxAttempts returns the attempts a call may start: the policy's
// MaxAttempts under the client-side cap.
func (e *Executor) MaxAttempts() int { return e.maxAttempts }

// GoesOnAfter reports whether a failure with code c lets the call's other
// attempts go on (the policy's NonFatalCodes), when the call may make
// more than one: the next hedge is then sent at once.
func (e *Executor) GoesOnAfter(c codes.Code) bool {
	return e.maxAttempts > 1 && e.policy.NonFatalCodes.Has(c)
}

type finished struct {
	n int
	o retryexec.Outcome
}

// call is the state of one hedged call; only Do's goroutine touches it,
// apart from results and wg.
type call struct {
	e           *Executor
	parent      context.Context // the caller's context
	ctx         context.Context // the attempts' context
	attempt     retryexec.AttemptFunc
	class       criticality.Class // the call's: the Throttle's share for it
	results     chan finished     // buffered for every attempt: never blocks a sender
	wg          sync.WaitGroup
	res         Result
	outstanding int
	stopped     retry.StopReason // why hedging stopped early, if it did
	timer       clock.Timer
	timerC      <-chan time.Time
	delay       time.Duration // this call's hedging delay
	free        int           // transparent re-sends owed: no slot, no permission needed (at most one)
	declined    bool          // the one transparent re-send of DeclinedEarly is used
	// next is the Number of the next attempt started. Sent counts slots and
	// goes back down when an attempt gives its slot back; numbers never
	// repeat, so that every attempt's outcome is told apart by its Number.
	next int
}

// Do runs a hedged call. attempt is called once per attempt, each on its
// own goroutine, with a context derived from ctx and an Attempt whose
// Number (and Index) is the attempt's position: 0 for the original, 1 for
// the next one started (its previous-rpc-attempts value), and so on; a
// transparent re-send takes the next number too, so no two attempts of a
// call share one. attempt must return promptly once its context is
// cancelled.
func (e *Executor) Do(ctx context.Context, attempt retryexec.AttemptFunc) Result {
	return e.DoFor(ctx, criticality.Critical, attempt)
}

// DoFor is Do for a call of criticality class c: its hedges need the
// Throttle's permission for that class (retryexec.Throttle.AllowFor), so
// that the lower classes stop hedging first. (The caller sends a
// Sheddable call once, unhedged: it never reaches here.)
func (e *Executor) DoFor(ctx context.Context, c criticality.Class, attempt retryexec.AttemptFunc) Result {
	actx, cancel := context.WithCancel(ctx)
	cl := &call{e: e, parent: ctx, ctx: actx, attempt: attempt, class: c, results: make(chan finished, e.maxAttempts), res: Result{Winner: -1},
		delay: e.policy.HedgingDelay}
	return cl.do(ctx, cancel)
}

// do runs call c until it is decided.
func (c *call) do(ctx context.Context, cancel context.CancelFunc) Result {
	e := c.e
	if e.delayFn != nil {
		c.delay = e.delayFn()
	}
	e.budget.Deposit()
	c.send()
	for {
		if c.outstanding == 0 && c.timerC == nil {
			if c.stopped == 0 {
				c.stopped = retry.StopExhausted
			}
			return c.finish(cancel, c.stopped)
		}
		select {
		case <-ctx.Done():
			c.res.CtxErr = ctx.Err()
			r := c.finish(cancel, retry.StopContext)
			if r.Winner < 0 {
				// No attempt had reported before the context ended. What
				// the attempts said after it was cancelled by finish, so
				// it would make a deadline look like a cancellation: report
				// the context's own outcome.
				r.Outcome = ctxOutcome(r.CtxErr)
			}
			return r
		case <-c.timerC:
			c.timer, c.timerC = nil, nil
			c.send()
		case f := <-c.results:
			if stop := c.handle(f); stop != 0 {
				return c.finish(cancel, stop)
			}
		}
	}
}

// handle applies the rules to an attempt's outcome and returns the reason
// to end the call, or 0 to go on.
func (c *call) handle(f finished) retry.StopReason {
	c.outstanding--
	o := f.o
	if o.Local {
		// Nothing could take this attempt (every peer throttled): stop
		// hedging, but let the attempts already sent finish. The call's
		// error stays the last remote failure, if any.
		c.res.Sent--
		c.stopTimer()
		if err := ctxerr.Of(c.parent); err != nil {
			// The attempt failed because the caller's context had ended
			// or its deadline had passed: that ends the call, whichever
			// Do's select sees first, the outcome or ctx.Done.
			c.res.CtxErr = err
			c.stopped = retry.StopContext
			if c.res.Winner < 0 {
				c.res.Outcome = ctxOutcome(err)
			}
			return 0
		}
		c.stopped = retry.StopThrottled
		if c.res.Winner < 0 {
			c.res.Outcome = o
		}
		return 0
	}
	c.res.Outcome, c.res.Winner = o, f.n
	if o.Err == nil {
		c.e.throttle.RecordSuccess()
		return retry.StopSucceeded
	}
	nonFatalCode := c.e.policy.NonFatalCodes.Has(o.Code)
	if o.Transparent(c.declined) {
		// It never reached the server's application: it takes no attempt
		// slot and needs no permission to go again, at once or after the
		// pause the declining server asked.
		c.res.Sent--
		c.free++
		c.declined = true
		if o.Pushback.Kind == retry.PushbackDelay && o.Pushback.Delay > 0 {
			c.schedule(o.Pushback.Delay)
		} else {
			c.send()
		}
		return 0
	}
	if nonFatalCode || o.Pushback.Kind == retry.PushbackStop {
		c.e.throttle.RecordFailure()
	}
	switch {
	case o.Committed:
		return retry.StopCommitted
	case !nonFatalCode: // a second early decline included, as in retries
		return retry.StopNotRetryable
	case o.Pushback.Kind == retry.PushbackStop:
		c.stopTimer()
		c.stopped = retry.StopPushback
	case o.Pushback.Kind == retry.PushbackDelay && o.Pushback.Delay > 0:
		c.schedule(o.Pushback.Delay)
	default:
		c.send()
	}
	return 0
}

func (c *call) stopTimer() {
	if c.timer != nil {
		c.timer.Stop()
		c.timer, c.timerC = nil, nil
	}
}

// schedule arms the timer for the next attempt, replacing any.
func (c *call) schedule(d time.Duration) {
	c.stopTimer()
	if c.res.Sent < c.e.maxAttempts && c.stopped == 0 {
		c.timer = c.e.clock.NewTimer(d)
		c.timerC = c.timer.C()
	}
}

// send starts the next attempt if hedging allows and arms the timer for
// the one after; with a zero delay it starts them all.
func (c *call) send() {
	c.stopTimer()
	for c.res.Sent < c.e.maxAttempts && c.stopped == 0 {
		transparent := c.free > 0
		if c.res.Sent > 0 && retryexec.Doomed(c.parent, c.e.latency, c.e.clock) {
			c.stopped = retry.StopDeadline
			return
		}
		if transparent {
			c.free--
		} else if c.res.Sent > 0 && (!c.e.throttle.AllowFor(c.class) || !c.e.budget.Withdraw()) {
			c.stopped = retry.StopThrottled
			return
		}
		n := c.next
		c.next++
		c.res.Sent++
		c.outstanding++
		c.wg.Add(1)
		go c.run(n, transparent)
		if c.delay > 0 {
			c.schedule(c.delay)
			return
		}
	}
}

func (c *call) run(n int, transparent bool) {
	defer c.wg.Done()
	c.results <- finished{n, c.attempt(c.ctx, retryexec.Attempt{Number: n, Index: n, Transparent: transparent})}
}

// finish ends the call: it cancels the outstanding attempts and waits for
// them all to return.
func (c *call) finish(cancel context.CancelFunc, stop retry.StopReason) Result {
	c.stopTimer()
	c.res.Stop = stop
	c.res.Cancelled = c.outstanding
	cancel()
	c.wg.Wait()
	return c.res
}

// ctxOutcome is the outcome reported when the context ended the call
// before any attempt reported back.
func ctxOutcome(err error) retryexec.Outcome {
	code := codes.Cancelled
	if err == context.DeadlineExceeded {
		code = codes.Timeout
	}
	return retryexec.Outcome{Err: err, Code: code}
}
