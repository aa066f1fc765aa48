// Package hostile attacks a real Sluice server process as a hostile peer
// would, and measures what each attack costs it: whether the process
// survives, which connections it closes and when, its resident memory,
// live heap and goroutines before, at the peak during and after the
// attack, and whether a legitimate client is still served, and how fast,
// meanwhile.
//
// It is the measuring side of DESIGN.md's "Hostile input": anything that
// can reach a port may send anything; a malformed frame closes the
// connection that sent it and nothing else; every resource a remote party
// can hold is bounded. Each Attack (Attacks lists them, Attack.About says
// what each does) reproduces one way of breaking that promise, at a Size:
// Full (the report that found the attacks: 20,000 connections, 400
// unfinished requests of 4 MB, ...) or CI (a few seconds each).
//
// The server under attack is a fresh child process for each attack: a
// sluice binary (Config.ServerBin, by default this very binary) started
// with `serve` or `doorman serve` and a descriptor limit of 20,000, its
// goroutines and heap read from its --debug-listen endpoint and its memory
// from /proc (Linux only). Or it is an external server named by address
// and process id. The bulk of an attack runs in attacker children: this
// binary re-executed with a job in its environment, so that no process
// needs more than its descriptor limit and the clients measured do not
// share a process with the attack. Any binary that runs attacks must
// therefore call RunChildIfAsked first thing: `sluice-lab` in main, a test
// binary in TestMain.
//
// Every frame is built with package internal/tframe. Only 127.0.0.1 is
// ever a target; attackers may bind other loopback addresses (127.0.0.x)
// as their source.
package hostile
