// Package hostile attacks a real Sluice server process as a hostile peer
// would, and measures what each attack costs it.
//
// For each attack it records whether the process survives, which
// connections it closes and when, its resident memory and goroutines
// before, at the peak during and after the attack, and whether a
// legitimate client is still served, and how fast, while the attack lasts.
//
// It is the measuring side of DESIGN.md's "Hostile input": anything that
// can reach a port may send anything; a malformed frame closes the
// connection that sent it and nothing else; every resource a remote party
// can hold is bounded. Each Attack reproduces one way of breaking that
// promise, against a fresh server it starts for the attack:
//
//   - checksum, malformed: frames tchannel-go trusts (a checksum type of 4,
//     a call with no argument chunk) and two dozen other malformed frames,
//     each on its own connection; the server must close that connection,
//     stay up, and serve a new client.
//   - checksum-client: the same frames from a hostile server, answered to a
//     `sluice call` child process, which must fail, not crash.
//   - stall-handshaken, stall-prehandshake: many connections that complete
//     the TChannel handshake, or never start it, and then send nothing.
//   - unfinished: large requests whose last fragment never comes.
//   - unread-replies: requests whose replies the attacker never reads.
//   - connect-reset: connections opened and reset as fast as possible.
//   - big-args, headers: arguments past the server's request limit, and
//     huge application headers.
//   - soak: a steady legitimate load, to show memory stays flat.
//   - doorman-silent, doorman-flood, doorman-malformed: a Doorman server
//     (`sluice doorman serve`) held by silent connections, flooded with
//     client ids from one source address, and sent garbage requests.
//   - big-answers-client: a hostile server answers the calls a `sluice
//     bench` child has in flight all at once, each just under the client's
//     limit on one response; the client's memory must stay bounded.
//   - debug-idle: idle keep-alive connections to the server's debug
//     listener (--debug-listen), while a new client makes TChannel calls.
//
// Every attack runs at a Size: Full (the sizes of the report that found
// these attacks: 20,000 connections, 400 unfinished requests of 4 MB, ...)
// or CI (a few seconds each, what go test runs).
//
// # Processes
//
// The server under attack is a child process: a sluice binary (Config.
// ServerBin, by default this very binary) started with `serve` or `doorman
// serve` and a descriptor limit of 20,000, its goroutines read from its
// --debug-listen profile endpoint and its memory from /proc (Linux only).
// Or it is an external server named by address and process id. The
// attacker's bulk work (thousands of connections, a steady stream of
// fragments) runs in attacker child processes: this binary re-executed
// with an attack job in its environment, so that no process needs more
// than its descriptor limit and the client whose latency is measured does
// not share its process with the attack. Any binary that runs attacks must
// therefore call RunChildIfAsked first thing: `sluice-lab` in main, a test
// binary in TestMain.
//
// Every frame is built with package internal/tframe. Only 127.0.0.1 is
// ever a target; attackers may bind other loopback addresses (127.0.0.x)
// as their source.
package hostile
