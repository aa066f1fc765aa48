// Package closedloop measures how Sluice's two halves of overload control
// work together: servers that shed load (answering Busy before a handler
// runs) and clients that throttle a peer that answers Busy.
//
// Each run starts one embedded server whose real capacity is a worker pool:
// Workers workers and a fixed service time per request, so its capacity is
// C = Workers / service time; requests beyond the workers wait in the
// handler's queue until a worker frees or their caller gives up. A Sluice
// client offers Load times C, open loop (calls arrive on schedule whether or
// not earlier ones finished), with no retries. Every combination of
//
//   - server shedding: none; fixed (ShedConfig.MaxInFlight, an operator's
//     guess of twice the workers by default); adaptive (ShedConfig.Adaptive,
//     package shed's defaults)
//   - client busy throttling: off; on (package busy's defaults)
//
// runs on fresh servers and clients, and each reports goodput (successful
// calls per second as a share of C), the shares of calls answered Busy,
// refused in the client (THROTTLED) and failed otherwise (TIMEOUT), the
// p50 and p99 latency of the successful calls, how many requests reached
// the server, and the same second by second. A run at a quarter of C with
// no shedding first measures the unloaded latency the others are compared
// with. Sheddings and Throttlings select some of the combinations.
//
// A Mix splits the offered calls between criticality classes, and Callers
// offers them from several callers (each a client Channel of its own,
// named caller-1 ..., caller-1 offering HeavyFactor times each other's
// rate). With either, each combination runs twice, unaware (the calls
// carry no class; the server's limits are first come, first served, as
// before classes: ShedConfig.FirstComeFirstServed) and aware (each call
// carries its class, criticality.WithClass; the server's limits admit
// higher classes first and share themselves between callers), and each
// row reports, by class and by caller, the calls offered and successful
// per second, the share served and the p99 of the successful calls. The
// benchmark counts these itself, from the class and caller it gave each
// call. `sluice bench --closed-loop` runs it and prints the table.
package closedloop
