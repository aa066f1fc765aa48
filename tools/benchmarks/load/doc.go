// Package load is Sluice's load generator: an open-loop stream of calls
// through a channel.Channel at a fixed arrival rate, and the Report of what
// happened (latency quantiles, attempts per call, busy and throttled counts,
// errors by code).
//
// Open loop means the calls arrive on a schedule (one every 1/RPS seconds)
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
// The package also starts embedded servers on 127.0.0.1 (Servers) whose
// latency follows a Shape, decided per request by each server from a seeded
// random source: a fixed time, or a heavy tail such as 97% of requests around
// 1 ms and 3% between 100 and 200 ms. `sluice bench` and the tail-latency
// benchmark in benchmarks/tail drive this package.
//
// Every run is bounded: at most MaxCalls calls, MaxDuration of arrivals, and
// each call's Timeout; Run returns once every call it started has returned.
package load
