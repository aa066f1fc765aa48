// Package faults measures what failing peers cost a Sluice client, and
// checks that its failure-handling promises hold.
//
// A run (Run) puts three real peers on 127.0.0.1 behind a Scenario's
// fault and sends an open-loop load of calls at Config.Rate through a
// channel.Channel under a client Setup. Its Result says what the failure
// cost (attempts, TCP connections and handler executions per call, how
// late the slowest call was against its deadline, how long a failed peer
// went on being chosen, goroutines and heap after the run), and Contract
// checks it. A Suite runs scenarios one after another at a Size; WriteTable
// and WriteChecks print the results.
//
// The faults are real: addresses nothing listens on (the client's dials
// are counted by its Dialer), listeners that accept and close or never
// answer the handshake, toxiproxy proxies in process
// (github.com/Shopify/toxiproxy/v2) in front of real servers, a server in
// a child process (this binary re-executed, see ServeChildIfAsked) killed
// with SIGKILL or stopped with SIGSTOP, and handlers that answer DECLINED,
// BUSY, or UNEXPECTED to a seeded half of their calls (ErrorSeed). Servers
// count the connections they accept and their handler executions; a child
// reports both on its stdout, so the counts survive its death.
//
// toxiproxy's latency and bandwidth toxics leak their goroutines when a
// client closes a connection they hold data for: the goroutine counts
// leave toxiproxy's out. Its bandwidth toxic logs through zerolog's global
// logger, which starts at trace level; `sluice-lab faults` and the tests
// set it to info.
//
// A failing peer is "picked" by a call when it is in the call's
// Response.Peers or CallError.Peers. Every wait is bounded (DrainLimit,
// SettleLimit, a child that will not exit is killed), and only 127.0.0.1
// is ever a target. tools/benchmarks/README.md ("Fault injection")
// describes the scenarios, columns and contract.
package faults
