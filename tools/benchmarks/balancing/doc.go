// Package balancing measures how a Sluice client shares its calls among a
// service's peers (package balance): slow start, weights, shard keys on a
// consistent-hash ring with bounded loads, and outlier ejection. Each
// scenario runs with the feature and without it, on
// fresh servers and a fresh client, and reports both rows side by side.
//
// Every server is a Sluice channel on 127.0.0.1 in this process whose
// cost is a worker pool (load.Pool): a server's capacity is workers /
// service time on any machine, and overload shows as Busy answers. One
// client with no retries offers calls open loop at a fixed rate (package
// load), recording every call with the server that answered it.
// Result.Verdicts checks the rows against the done-when figures;
// `sluice bench --balancing` runs the benchmark and prints the tables.
package balancing
