// Package stats defines, once, the names of every metric Sluice reports, and
// the Recorder through which every package reports them to a tally.Scope.
//
// Per-call metrics carry the tags service and method; per-peer metrics carry
// service and peer (host:port); errors carry code, the upper-case TChannel
// code name ("BUSY") or a local outcome ("THROTTLED", "NO_PEERS",
// "RATE_LIMITED", "LOCAL").
//
// The Recorder caches the tagged counters it hands out, so recording a
// successful call allocates nothing.
package stats
