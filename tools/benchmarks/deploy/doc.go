// Package deploy measures what a rolling deploy costs the callers of a
// service: a fleet of server processes is replaced one instance at a time
// under a steady open-loop load, and each row counts the calls that failed
// (by code), compares the latency during the deploys with the steady state
// before them, and times how soon each new instance got its first call.
//
// # The fleet and the load
//
// Config.Instances servers (4) run as real processes, children of this very
// binary (see ServeChildIfAsked), each serving a raw "echo" method of the
// service "kv" that answers after Config.ServiceTime (1 ms). Config.Clients
// clients in this process share an open-loop load of Config.Rate calls per
// second (1,000): call i arrives i/Rate seconds after the first, whatever
// became of the earlier ones, goes to client i mod Clients, has
// Config.Timeout, and no retry policy. A call's latency runs from its
// arrival to its result.
//
// # The schedule
//
// The load runs Config.Warmup (left out of the figures), then
// Config.Steady (the steady state), then Config.Replacements replacements,
// each instance in turn (8: every instance twice), each followed by a
// settle of about Config.Settle (varied by up to a quarter either way, the
// same lengths in every row); the load stops after the last settle. Every row has the
// same load and schedule; only how servers come and go, and how clients
// find them, differ:
//
//   - RowEtcd: Sluice clients follow the prefix in etcd
//     (channel.WithResolver with discovery/etcd's resolver); each server
//     registers itself (channel.WithRegistrar with discovery/etcd's
//     registrar). A replacement starts a new server on a new port, waits
//     until its registration is written, then has the old one Shutdown.
//   - RowDNS: Sluice clients look up SRV records (discovery/dns) served by
//     a DNS server in this process, every Config.DNSPeriod. A replacement
//     starts a new server, adds its record once it listens, then removes
//     the old one's record and has the old server Shutdown, whose grace
//     (Config.Grace) outlasts the clients' next lookup.
//   - RowStatic: Sluice clients with a fixed list of peers (AddPeer). A
//     fixed list cannot learn a new port, so an instance is replaced in
//     place: the old server Closes and exits, and the new one listens on
//     the same port.
//   - RowTChannel: plain tchannel-go clients (ch.Peers().Add, raw calls)
//     and plain tchannel-go servers, replaced in place with Close as in
//     RowStatic.
//
// # What a row reports
//
// Calls sent and failed by code (a Sluice client's channel.CallError code
// names; for plain tchannel-go the TChannel code of a system error, NETWORK
// for a network error it returns as it is, such as a refused connection),
// with the first failures' times and an error of each code; the p50 and p99
// latency of the successful calls of the steady state (arrived after the
// warmup, returned before the first replacement began) and of the deploys
// (in flight at some moment from the start of the first replacement to the
// end of the last, the settles between them included); for each new
// instance, the time from when it became available (its registration was
// written, its SRV record added, or it listened, in the in-place rows) to
// its first request, as the median and the maximum over the replacements;
// and how many of the instances started served no call at all. The times
// come from each process's clock (the same machine's).
//
// `sluice-lab bench --rolling-deploy` runs the four rows and prints the table.
// Every wait is bounded: a child that does not start, register, leave or
// exit in time fails the row with an error naming what it waited for.
package deploy
