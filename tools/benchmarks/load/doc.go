// Package load is Sluice's load generator: a stream of calls through one
// or more channel.Channels, at a fixed arrival rate (a rate run) or as fast
// as they allow (an unbounded run), and the Report of what happened
// (latency quantiles, attempts per call, busy and throttled counts, errors
// by code).
//
// A rate run is open loop: the calls arrive on a schedule (one every 1/RPS seconds)
// whether or not earlier ones have finished, as users do; at most
// Concurrency are in flight and an arrival beyond that waits for a slot.
// Each call's latency is measured from its scheduled arrival, not from when
// it was sent, so a stalled client cannot hide its own queueing (no
// "coordinated omission"); only the generator's own timer oversleep (Go
// timers wake up to about a millisecond late) is not charged to the call.
// The Report keeps three sets of latencies apart: successful calls, failed
// calls, and calls refused in this process with nothing sent (a busy
// limiter's THROTTLED, a lease's RATE_LIMITED, NO_PEERS, UNAVAILABLE),
// which take microseconds and would flatter the quantiles of a struggling
// service. Config.Progress receives the running totals every second.
//
// An unbounded run (Config.RPS 0) is closed loop, as yab's benchmark is:
// Concurrency callers on each channel make one call after another, each
// as soon as its last returned, so the run measures what the client and
// the servers can do, and a call's latency is from its start. The callers
// cost a call no goroutine and no timer but its context's deadline, and
// record latencies in histograms (Quantiles says how exact they are), so
// an unbounded run of any length holds a few KiB per caller.
//
// The package also starts embedded servers on 127.0.0.1 (Servers) whose
// latency follows a Shape, decided per request by each server from a seeded
// random source: a fixed time, or a heavy tail such as 97% of requests around
// 1 ms and 3% between 100 and 200 ms, optionally behind a worker pool
// (Pool: a fixed number of workers, a queue, optionally bounded, beyond
// them), the cost model the benchmarks' servers share. `sluice bench`,
// the tail-latency benchmark in benchmarks/tail and the closed-loop and
// balancing benchmarks drive this package; a rate run can vary each
// call's request (Config.Vary), Channel (Config.Client) and context
// (Config.Context: a criticality class, say) and hand back every call with
// the peer that answered it (Config.Record), for a benchmark to slice its
// own way.
//
// Every run is bounded: at most MaxDuration of arrivals, MaxCalls calls
// for a rate run (and an unbounded one given Calls), and each call's
// Timeout; Run returns once every call it started has returned.
package load
