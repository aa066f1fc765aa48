// Package closedloop measures server shedding (answering Busy before a
// handler runs) and client busy throttling together: `sluice bench
// --closed-loop`.
//
// Each run starts one embedded server of Workers workers with a fixed
// service time (capacity C = Workers / service time) and offers it Load x
// C from a Sluice client, open loop, without retries. Every combination of
// server shedding (none, fixed at ShedConfig.MaxInFlight, adaptive) and
// client busy throttling (off, on) runs on fresh servers and clients and
// reports goodput as a share of C, the shares answered Busy, refused in
// the client and failed otherwise, the latency of the successful calls,
// and the same second by second, after an unloaded run at C/4.
//
// A Mix splits the calls between criticality classes and Callers offers
// them from several client Channels (caller-1 offering HeavyFactor times
// each other's rate). Then each combination runs twice, unaware (no
// classes, first come first served) and aware, with figures per class and
// per caller.
package closedloop
