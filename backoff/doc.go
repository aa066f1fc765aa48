// Package backoff computes how long to wait before the nth retry:
// exponential backoff with jitter.
//
// The ceiling of retry n (n >= 1, counted from the first failure or from
// whatever restarts the count, such as a server's pushback or a success) is
//
//	min(Initial * Multiplier^(n-1), Max)
//
// and the wait is drawn below it or around it, as the Jitter says:
//
//   - FullJitter, uniform in [0, ceiling): gRPC's retry backoff;
//   - EqualJitter, half the ceiling plus a uniform half, in
//     [ceiling/2, ceiling): the Alibaba Cloud SDK's, which never retries
//     sooner than half the ceiling;
//   - ProportionalJitter, uniform in [ceiling*(1-Spread),
//     ceiling*(1+Spread)): gRPC's connection backoff, which spreads
//     reconnects around the schedule rather than below it.
//
// Jitter is what keeps many parties that failed together (clients of one
// server that went down, intermediates of one parent) from retrying
// together and failing again in lockstep.
//
// An Exponential is a plain value and Delay a pure function of the retry
// number and a random draw in [0, 1): callers inject their own random
// source, so tests and simulations replay exactly. Delay does not
// allocate. Sluice's retry policies, peer connections, leasing client and
// leasing server's parent link all wait through it.
package backoff
