// Package deploy measures what a rolling deploy costs the callers of a
// service: a fleet of server processes (this binary re-executed, see
// ServeChildIfAsked) is replaced one instance at a time under an open-loop
// load. Each row counts the failed calls by code, compares the latency
// during the deploys with the steady state before them, and times how soon
// each new instance got its first call. The rows differ only in how
// servers come and go and how clients find them (Row.Title); each runs
// Config.Warmup, Config.Steady, then Config.Replacements replacements,
// each followed by a settle. `sluice-lab bench --rolling-deploy` prints
// the table; tools/benchmarks/README.md ("Rolling deploys") describes it.
package deploy
