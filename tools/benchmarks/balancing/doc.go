// Package balancing measures how a Sluice client shares its calls among a
// service's peers (package balance, applied by the Channel's peer list): slow
// start, weights, shard keys on a consistent-hash ring with bounded loads,
// and outlier ejection. Each scenario runs twice, with the feature and
// without it, on fresh servers and a fresh client, and reports both rows
// side by side.
//
// Every server is a Sluice channel on 127.0.0.1 in this process whose
// cost is a worker pool (load.Pool): Workers workers, each holding a
// request for a fixed service time, up to 4 requests per worker waiting
// beyond them, and a Busy answer for the next, so that a server's
// capacity is Workers / service time on any machine, two cores included,
// and an overloaded server shows as Busy answers rather than a slow
// machine. One client (no retries, each call's deadline Config.Timeout,
// 1 s) offers calls open loop at a fixed rate (package load), recording
// every call with the server that answered it.
//
//   - ScaleOut: 3 servers of 4 workers x 5 ms at 70% of their capacity;
//     after a steady stretch, 3 more start cold (a request costs 5x at
//     first, falling linearly to 1x over 10 s) and join with SetPeers. It
//     reports the new servers' calls, Busy answers and timeouts, and the
//     p99 after the scale-out against the steady state's. With: the
//     default slow start; without: "slowStart": {"disabled": true}.
//   - Heterogeneous: servers of 1, 2 and 4 workers at 80% of their
//     capacity, weighted 1, 2, 4 with SetPeers (without: all 1): each
//     server's share of the calls against its capacity's, and its peak
//     and mean in-flight against its workers.
//   - Shard: 10 servers, each with an LRU cache of 2,000 keys (a hit
//     costs 1 ms, a miss 10 ms; the report gives the costs as served,
//     a Go timer's lateness added); keys drawn from 100,000 by a Zipf
//     distribution of exponent 1.1, and a hot key at 30% of the calls.
//     With: every call carries its key as its shard key; without: none
//     (fewest pending). It reports the cache hit rate, the busiest
//     server's mean in-flight against the average, and, on internal/balancing.Ring,
//     how many of the keys move when a server leaves or joins, checked by
//     routing keys one at a time.
//   - Erroring: 4 servers, the first answering UNEXPECTED to half its
//     calls (then the first 3): failed calls a second before and after
//     the first ejection, the share of calls still reaching an erroring
//     server, the most peers ejected at once, the success rate. With: the
//     default ejection; without: "outlierEjection": {"disabled": true}.
//
// Config.Size picks the stretches: Full, the (about five minutes
// in all), or CI, a second or two a run. Result.Verdicts checks the rows
// against the done-when figures; `sluice bench --balancing` runs
// the benchmark and prints the tables.
package balancing
