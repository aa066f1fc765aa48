package hedge

import "time"

// Delay returns the hedging delay a call started now would use: the
// ExecutorConfig's Delay, else the Estimator's (with Policy.Adaptive), else
// Policy.HedgingDelay. It is for introspection; Do reads it itself.
func (e *Executor) Delay() time.Duration {
	if e.delayFn != nil {
		return e.delayFn()
	}
	return e.policy.HedgingDelay
}

// Samples returns the number of first attempts observed so far, finished
// or cut off. Until Window/10 have been, Delay is the fallback delay;
// after, the quantile over the last min(Samples, Window). It takes the
// Estimator's lock briefly.
func (e *Estimator) Samples() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.seen
}
