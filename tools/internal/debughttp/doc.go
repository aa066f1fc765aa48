// Package debughttp serves a command's debug endpoints on one HTTP
// listener: /metrics (a tally scope exposed through tally's Prometheus
// reporter), /debug/pprof/ (the Go runtime's profiles) and the command's
// own pages, with an index at /.
//
// A command makes one Metrics, hands its Scope to what it runs
// (channel.WithScope, server.Config.Scope in leasing/server), and serves it with
// Serve. Metric names are Prometheus names: tally's dots and the scope
// separator become underscores ("call.latency" is call_latency), while
// tag values are kept as they are (a peer's "127.0.0.1:4040", a bucket's
// ">=1"), since Prometheus allows any text in a label value.
//
// The listener is reachable by whoever reaches its address, so it is
// bounded like any server facing peers: at most MaxConns connections (a
// new one at the cap evicts the one waiting longest between requests),
// idle keep-alive connections closed after IdleTimeout, and each request
// given RequestTimeout for its body and answer, plus the seconds a CPU
// profile or trace asks for. It cannot take the descriptors or memory the
// command's own listener needs.
//
// Nothing here is global: each Metrics has a Prometheus registry of its
// own, and the pprof handlers are mounted on the listener's own mux, never
// on http.DefaultServeMux.
package debughttp
