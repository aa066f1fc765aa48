// Package deploy measures what a rolling deploy costs the callers of a
// service: a fleet of server processes (this binary re-executed, see
// ServeChildIfAsked) is replaced one instance at a time under an open-loop
// load, and each row counts the calls that failed (by code), compares the
// latency during the deploys with the steady state before them, and times
// how soon each new instance got its first call.
//
// The load runs Config.Warmup (left out), Config.Steady, then
// Config.Replacements replacements, each followed by a settle of about
// Config.Settle (the same lengths in every row). The rows differ only in
// how servers come and go and how clients find them:
//
//   - RowEtcd: clients follow discovery/etcd; a new server registers on a
//     new port, then the old one Shutdowns.
//   - RowDNS: clients look up SRV records served in this process every
//     Config.DNSPeriod; a new server's record is added once it listens,
//     then the old one's is removed and it Shutdowns.
//   - RowStatic: clients with a fixed peer list; each instance is replaced
//     in place, the old server Closing before the new one listens on its
//     port.
//   - RowTChannel: plain tchannel-go clients and servers, in place as in
//     RowStatic.
//
// `sluice-lab bench --rolling-deploy` runs the rows and prints the table;
// tools/benchmarks/README.md ("Rolling deploys") describes the figures.
// Every wait is bounded.
package deploy
