// Package hostile attacks a real Sluice server process as a hostile peer
// would, and measures what each attack costs it: whether the process
// survives, which connections it closes and when, its memory and
// goroutines before, at the peak during and after the attack, and how a
// legitimate client is served meanwhile. It measures DESIGN.md's "Hostile
// input": a malformed frame closes only the connection that sent it, and
// every resource a remote party can hold is bounded. Attacks lists the
// attacks, at a Size: Full or CI.
//
// Each attack gets a fresh server: `serve` or `doorman serve` of a sluice
// binary (Config.ServerBin, by default this one), under a descriptor limit
// of 20,000, read through its --debug-listen endpoint and /proc (Linux
// only); or an external server named by address and pid. Attacks run in
// attacker children, this binary re-executed with a job in its
// environment, so any binary that runs attacks must call RunChildIfAsked
// first thing. Only 127.0.0.1 is ever a target.
package hostile
