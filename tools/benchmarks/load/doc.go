// Package load is Sluice's load generator: a stream of calls through one
// or more channel.Clients, at a fixed arrival rate (a rate run) or as fast
// as they allow (an unbounded run), and the Report of what happened
// (latency quantiles, attempts per call, busy and throttled counts, errors
// by code).
//
// A rate run is open loop: call i arrives at i/RPS whether or not earlier
// ones have finished, and its latency runs from its scheduled arrival, so
// a stalled client cannot hide its own queueing (no "coordinated
// omission"); only the generator's timer oversleep is not charged. The
// Report keeps successful, failed and locally refused calls apart: the
// last take microseconds and would flatter a struggling service.
//
// An unbounded run (Config.RPS 0) is closed loop, as yab's benchmark is:
// Concurrency callers on each channel make one call after another, and
// record latencies in histograms, so a run of any length holds a few KiB.
//
// Servers are embedded servers on 127.0.0.1 whose latency follows a
// Shape, optionally behind a worker Pool, the cost model the benchmarks'
// servers share. Every run is bounded (MaxDuration, MaxCalls, each call's
// Timeout), and Run returns once every call it started has returned.
package load
