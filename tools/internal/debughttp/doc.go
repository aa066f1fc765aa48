// Package debughttp serves a command's debug endpoints on one HTTP
// listener: /metrics (a tally scope through Prometheus; tally's dots
// become underscores), /debug/pprof/ and the command's own pages, with an
// index at /. Nothing is global: each Metrics has its own registry and the
// pprof handlers go on the listener's own mux.
//
// The listener is bounded like any server facing peers: at most MaxConns
// connections (a new one at the cap evicts the one waiting longest
// between requests), idle connections closed after IdleTimeout, and each
// request given RequestTimeout plus the seconds a profile asks for.
package debughttp
