package peerlist

import "time"

// LatencyEstimate is a peer's latency estimate as the chooser sees it, for
// introspection: debug pages and tests.
type LatencyEstimate struct {
	// Mean is the exponentially weighted moving average of the latencies of
	// successful attempts (weight 1/8); 0 until one succeeds.
	Mean time.Duration
	// Samples is the number of successful attempts in the estimate since it
	// last restarted (a stale estimate restarts from the next sample).
	Samples int64
	// Updated is when the estimate last took a sample (zero before the
	// first), on the list's clock.
	Updated time.Time
	// Fresh reports whether the estimate steers the choice of peer: it was
	// updated within the last second and rests on at least four samples.
	// Otherwise the peer's latency counts as unknown, and ties with others.
	Fresh bool
}

// LatencyEstimateAt returns the peer's latency estimate at time now (from
// the list's clock). It reads atomics only; a concurrent update may be seen
// half done (its mean without its sample count, say).
func (p *Peer) LatencyEstimateAt(now time.Time) LatencyEstimate {
	e := LatencyEstimate{Mean: time.Duration(p.latency.Load()), Samples: p.samples.Load(), Fresh: p.latencyAt(now) > 0}
	if ns := p.learned.Load(); ns != 0 {
		e.Updated = time.Unix(0, ns)
	}
	return e
}
