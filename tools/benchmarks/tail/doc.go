// Package tail measures what hedging does to tail latency: the same
// open-loop load against the same heavy-tailed servers, run three ways in one
// process (no hedging, hedging after a fixed delay near the unhedged p95,
// and adaptive hedging with a budget), compared in one table of p50, p99,
// p99.9 and extra requests.
//
// The servers are embedded on 127.0.0.1 (load.StartServers). Each decides
// per request, from its own seeded random source, whether the request is fast
// (by default 0.5-1.5 ms, 97%) or slow (100-200 ms, 3%), so a hedge sent to
// another server is slow again with probability 3% only: the setting of "The
// Tail at Scale" (Dean and Barroso, 2013), in miniature.
//
// The harness (Compare, RunMode, WriteTable) lives in the package's tests,
// its only users. They are slow (about 10 s a configuration) and run only
// when asked: the tests behind the slow-test gate, the benchmarks with
// -bench:
//
//	SLUICE_SLOW=1 go test ./tools/benchmarks/tail/ -run 'TestTailLatencyTable|TestCompareSmall' -v
//	go test ./tools/benchmarks/tail/ -run '^$' -bench TailLatency -benchtime 4000x
package tail
