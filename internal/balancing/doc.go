// Package balancing is the arithmetic of the rules package balance states
// (its doc comment describes them), in one place: the consistent-hash
// ring of shard keys (Ring, KeyHash) and their bounded load (Capacity,
// Factor); the choice between equal peers (Better) and the weighted
// lottery (LotteryKey); slow peers, their probes and the cold rule (Slow,
// ProbeInterval); slow start (SlowStart's Factor and Ramping); outlier
// ejection (Ejection's Threshold, Duration, Multiplier, MaxEjected and
// Panic); and the bounds on a peer's weight (CheckWeight).
//
// The rules are pure functions of their inputs: times, figures and random
// variates are arguments, so that the Channel's peer list
// (internal/peerlist), the discovery packages, the simulators and the
// benchmarks (tools/) and the tests run the same code. SlowStart and
// Ejection are balance's configuration types, converted to give them
// their arithmetic: balancing.Ejection(cfg.Ejection).Duration(k).
package balancing
