package balancing

import "time"

// The rules below decide between peers that may all take a call; the peer
// list applies them (it keeps each peer's pending calls, latency estimate
// and slow mark), and a simulator can call them with figures of its own.

// A peer is slow when its fresh latency estimate is more than slowRatio
// times the lowest fresh estimate among the other ready peers, and more
// than slowGap above it: a peer answering 100 ms late among
// sub-millisecond ones, not a peer that jitters between 200 µs and 1 ms
// on a loaded host, nor one whose estimate a single garbage collection
// pause raised (a 20 ms sample moves a 200 µs estimate to 2.7 ms).
const (
	slowRatio = 5
	slowGap   = 5 * time.Millisecond
)

// A peer in its slow-start window is cold while its latency is more than
// coldRatio times the others' and coldGap above: a new instance still
// warming up (caches, JIT, connection pools) answers slowly, and each call
// it takes then is a slow call. It gets only probes until it answers near
// the fleet's latency; then its ramp goes on where the clock has brought
// it. A peer that is inherently slower stays held only to the end of its
// window, then is judged as any peer.
const (
	coldRatio = 2
	coldGap   = time.Millisecond
)

// ProbeInterval is how often a slow peer (see Slow) is chosen as a probe,
// so that its recovery is seen within that time; otherwise it is chosen
// only when no other peer takes the call.
const ProbeInterval = 2 * time.Second

// Slow reports whether a peer whose latency estimate is lat stands far
// above ref, the lowest estimate among the other ready peers that are not
// slow: more than 5 times ref and more than 5 ms above it, or, for a peer
// in its slow-start window (ramping: the cold rule), more than twice ref
// and more than 1 ms above it. A slow peer is held to a probe every
// ProbeInterval until Slow, asked again with its probe's latency, says no.
func Slow(lat, ref time.Duration, ramping bool) bool {
	if ramping {
		return lat > coldRatio*ref && lat-ref > coldGap
	}
	return lat > slowRatio*ref && lat-ref > slowGap
}

// LotteryKey is a peer's draw in a weighted choice, the lowest draw
// winning: (pending / w + 1) / d x e, pending being its calls in flight, w
// its effective weight relative to the list's mean weight, and e an
// exponential variate of mean 1 (rand.ExpFloat64). With d = w, the peer
// with the lowest key is peer i with probability in proportion to
// w_i / (1 + pending_i / w_i) (the race of exponential clocks): its
// weight, discounted by its calls pending per unit of weight, so that
// under light load calls split by weight. Envoy's least-request rule,
// w / (pending + 1), discounts a heavy peer more than its pending calls
// warrant: a server with four times the workers at the same utilization
// has fewer than four times the calls queued, so under load it took 49.6%
// of the calls where its weight asks for 57.1% (servers of 1, 2 and 4
// workers at half load, simulated); this rule keeps every share within
// 2.2 points at any load.
//
// For two candidates already drawn in proportion to their weights (the
// power of two choices over a long list), d is each one's slow-start
// factor alone, so that the weights are not counted twice.
func LotteryKey(pending int64, w, d, e float64) float64 {
	return (float64(pending)/w + 1) / d * e
}

// Better reports whether peer a is to be preferred to peer b when their
// effective weights are equal: fewer pending calls, then a latency
// estimate less than half of b's and more than betterGap below it (0
// means unknown, never better). Closer latencies tie, and the caller
// breaks the tie at random: loopback and LAN latencies jitter by tens of
// percent, and preferring the marginally faster peer would send it all
// the traffic of a lightly loaded client.
func Better(pendingA, pendingB int64, latA, latB time.Duration) bool {
	if pendingA != pendingB {
		return pendingA < pendingB
	}
	return latA > 0 && 2*latA < latB && latB-latA > betterGap
}

// betterGap is how much lower a peer's latency estimate must be, besides
// under half, for Better to prefer it. On a loaded host two equal peers'
// estimates of a hundred microseconds or so, each from a few samples,
// differ twofold by chance, and the one that drew the slower samples
// would get no call until its estimate went stale (after a second):
// below a millisecond, a difference says nothing about the peers.
const betterGap = time.Millisecond
