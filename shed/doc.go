// Package shed decides, before a handler runs, whether a server takes a
// request or answers it "busy": an adaptive concurrency limit that follows
// the handler's measured latency, in the family of TCP Vegas and Netflix's
// Gradient2.
//
// A Limiter admits a request while fewer than its limit are in flight. Each
// finished request reports how long it took. The Limiter keeps two
// latencies: the no-load latency L0, measured by probes, and the mean
// latency L of the requests that finished in the last window (100 ms by
// default). At the end of each window the limit becomes
//
//	gradient = clamp(L0 * (1 + Buffer) / L, 0.5, 2)
//	limit    = clamp(limit * gradient + sqrt(limit), MinLimit, MaxLimit)
//
// While requests finish within L0 plus the buffer the gradient is at least
// 1 and the limit grows each window (by a quarter of itself plus its square
// root when requests take L0); once requests queue
// behind each other the gradient falls below 1 and the limit shrinks in
// proportion. The limit does not grow in a window whose requests in flight
// never reached half of it: an idle server learns nothing about its
// capacity.
//
// For a server that runs N requests at once and queues the rest (a worker
// pool of N), latency is L0 up to N requests in flight and L0*x/N at x > N,
// so the limit settles where limit = (1+Buffer)*N + sqrt(limit): 13.7 for N
// = 8 with the default Buffer of 0.25, between N and 2N, with requests
// queueing for about 0.7 of L0 (a little more in practice, 14-16, as the
// window means are noisy and the probe's median is a little above L0). On a CPU-bound handler N is the number of
// cores; the limit settles just above it, never below MinLimit (1).
//
// L0 cannot be read while the server is busy, because every request then
// waits behind others. So the Limiter probes: at start and every
// ProbeInterval (5 s, with 10% jitter so a fleet does not probe at once) it
// pins the limit to ProbeLimit (3) until ProbeSamples (25) requests admitted
// during the probe have finished, and takes their median latency as L0. A
// probe costs a server at twice its capacity about a dozen service times of
// extra shedding; it is what lets the limit follow a handler that became
// slower or faster.
//
// A request the Limiter refuses should be answered busy with the pushback
// that Pushback returns: the current queueing delay (L - L0), at least L0
// and at least a millisecond, so a client waits about as long as a slot
// takes to free.
//
// A probe that cannot finish (requests admitted before it that never end
// hold its slots) ends anyway after a second, or 20 L0 if longer, keeping
// the L0 it had.
//
// A Limiter is safe for concurrent use. Acquire is one atomic add;
// Release takes a short mutex to add the latency to the window. Neither
// allocates. Times come from an injected clock.Clock, and the AcquireAt
// and ReleaseAt variants take them as arguments, so the simulator (`sluice
// sim shed`) and the tests drive the very code a server runs.
package shed
