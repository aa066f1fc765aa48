// Package faults measures what failing peers cost a Sluice client, and
// checks that its failure-handling promises hold.
//
// A run (Run) puts three real peers on 127.0.0.1 behind a Scenario's fault
// and sends an open-loop load at Config.Rate through a channel.Channel
// under a client Setup. Its Result says what the failure cost, and
// Contract checks it. A Suite runs scenarios one after another at a Size;
// WriteTable and WriteChecks print the results.
//
// The faults are real: closed ports (dials counted by the client's
// Dialer), listeners that accept and close or never answer the handshake,
// in-process toxiproxy proxies in front of real servers, a child server
// (see ServeChildIfAsked) killed or stopped with signals, and handlers
// answering DECLINED, BUSY, or UNEXPECTED to a seeded half of their calls.
// Every wait is bounded, and only 127.0.0.1 is ever a target.
// tools/benchmarks/README.md ("Fault injection") describes the scenarios,
// columns and contract.
package faults
