package fleet

import "time"

// Arrivals calls fn for an open-loop schedule of rate arrivals a second
// from start, the ith due at start + i/rate (sched), whether or not the
// earlier ones are done, until n have arrived (n < 0: no bound) or stop
// is closed. at is sched, or when the schedule's timer woke if that was
// later: its oversleep is the generator's, not the arrival's. fn should
// return at once. Arrivals returns how many arrived.
func Arrivals(start time.Time, rate float64, n int, stop <-chan struct{}, fn func(sched, at time.Time)) int {
	interval := time.Duration(float64(time.Second) / rate)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	i := 0
	for ; i != n; i++ {
		sched := start.Add(time.Duration(i) * interval)
		at := sched
		if wait := time.Until(sched); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
				at = time.Now()
			case <-stop:
				return i
			}
		} else {
			select {
			case <-stop:
				return i
			default:
			}
		}
		fn(sched, at)
	}
	return i
}
