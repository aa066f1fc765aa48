// Package faults measures what failing peers cost a Sluice client, and
// checks that its failure-handling promises hold.
//
// A run puts real servers on 127.0.0.1 behind in-process fault points and
// sends an open-loop load of calls at a fixed rate through a
// channel.Channel. Its Result says what the failure cost (attempts, TCP
// connections and handler executions per call, how late the slowest call
// was against its deadline, how long a failed peer went on being chosen,
// goroutines and heap after the run) and which promises of the failure
// handling contract it broke (Contract).
//
// # Fault points
//
// Every scenario has three peers. The faults are real:
//
//   - refused: an address nothing listens on. Nothing can count connection
//     attempts there, so the client dials through a counting Dialer
//     (tchannel.ChannelOptions.Dialer) and the suite counts the dials.
//   - accept-close: a listener that accepts each connection and closes it at
//     once, counting the accepts itself.
//   - black-hole: a listener that accepts TCP and never answers TChannel's
//     handshake (it reads and discards), counting the accepts.
//   - reset, latency, bandwidth, stall: a real Sluice server behind an
//     in-process toxiproxy proxy (github.com/Shopify/toxiproxy/v2) with the
//     toxic "reset_peer", "latency", "bandwidth" or "timeout" on it.
//   - kill, freeze: a real Sluice server in a child process (this very
//     binary, re-executed; see ServeChildIfAsked), killed with SIGKILL or
//     stopped with SIGSTOP (no FIN reaches the client; it gets SIGCONT once
//     the load is over).
//   - declined, busy: real servers whose handler answers DECLINED or BUSY.
//   - erroring: a real server whose handler answers UNEXPECTED (a TChannel
//     system error) to a seeded random half of its calls (ErrorSeed), and
//     notes when its first ErrorStreak failures in a row ended: the cue of
//     the client's outlier ejection.
//
// Servers count the TCP connections they accept and their handler
// executions; a child process reports both on its standard output, one line
// per event, so the counts survive its death.
//
// Two caveats of toxiproxy. Its latency and bandwidth toxics send on a
// channel with nothing else selected, so when a client closes a connection
// they still hold data for, their goroutines wait forever: the suite's
// goroutine counts leave toxiproxy's goroutines out (they are toxiproxy's
// leak, not the client's). Its bandwidth toxic logs through zerolog's global
// logger, which zerolog starts at trace level; `sluice-lab faults` and this
// package's tests set zerolog's global level to info.
//
// # Runs
//
// Run makes one run: a Scenario under a client Setup (no policy, a retry
// policy, a hedging policy, or a retry policy with the retry-throttling
// bucket) at Config.Rate calls per second for Config.Duration, each call with
// Config.Deadline. A Suite runs a list of scenarios one after another, each
// under the setups where the policy matters, at a Size: Full (what `sluice
// faults` runs, about five minutes) or CI (one to three seconds a run, what
// go test runs). WriteTable prints the results, WriteChecks the verdicts of
// DefaultContract.
//
// The load is open-loop: call i starts i/Rate seconds after the first
// whether or not earlier calls have returned, and a call's latency runs from
// its start to its return. A failing peer is "picked" by a call when it is in
// the call's Response.Peers or CallError.Peers (every peer an attempt went or
// tried to go to).
//
// Every wait is bounded: a call has its deadline, the drain after the load
// waits at most DrainLimit, the goroutines at most SettleLimit, a child
// process that does not exit when asked is killed.
//
// Only 127.0.0.1 is ever a target: every listener binds it and the counting
// Dialer refuses any other address.
package faults
