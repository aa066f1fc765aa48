// Package stats defines, once, the name of every metric Sluice reports,
// with its tags, histogram buckets and the caps on its series: what a
// dashboard or an alert is written against. A Channel reports them to the
// tally.Scope given to channel.WithScope; the leasing client and server and
// the discovery registrars to the scope in their configuration. The
// constants' doc comments are the reference for each metric; this comment
// lists them together.
//
// # Tags
//
// Per-call metrics carry the tags service and method, and on a server
// caller too; per-peer metrics
// carry service and peer (the peer's host:port); connection metrics carry
// peer only. A Channel may report calls to several methods under one shared
// method tag (MethodOther), to bound the number of series; package channel
// says when (channel.MaxMethodSeries). Likewise a Channel gives series
// of their own to the first MaxPeerSeries peers and connections, and
// reports later ones under the peer tag PeerOther. Error counters add code: the
// upper-case TChannel code name
// ("BUSY", "TIMEOUT", ...) or a local outcome ("THROTTLED", "NO_PEERS",
// "RATE_LIMITED", "UNAVAILABLE", or "LOCAL" when no code names it).
//
// # Metrics
//
// Per call, tagged service and method:
//
//	calls                  counter    calls, one per call whatever its attempts
//	call.errors            counter    calls that failed; tag code
//	call.latency           histogram  a call's start to its result; LatencyBuckets
//	call.attempts          histogram  attempts a call sent; AttemptBuckets
//	attempts               counter    attempts sent (first, retries, hedges)
//	attempt.errors         counter    attempts that failed; tag code
//	attempt.unsent         counter    attempts whose connection closed before sending
//	retry.attempts         counter    attempts after a call's first (retries, hedges)
//	retry.attempts.failed  counter    those of them that failed
//	hedge.sent             counter    hedged attempts after the first
//	hedge.won              counter    calls won by a hedged attempt
//	hedge.cancelled        counter    attempts cancelled (another won, or a fatal code)
//
// Per service, tagged service:
//
//	retry.throttle.tokens        gauge    tokens in the retry-throttling bucket
//	ratelimit.malformed_headers  counter  responses with unreadable rate-limit headers
//	ratelimit.held               counter  calls held by a server's throttling window
//	ratelimit.rejected           counter  calls failed because the window outlasted them
//	ratelimit.sleep              timer    the pacer's sleeps before calls
//
// Per peer, tagged service and peer:
//
//	peer.sent       counter  attempts sent to the peer
//	peer.busy       counter  busy responses from the peer
//	peer.throttled  counter  requests its busy limiter refused
//	peer.limit      gauge    its busy-throttling limit, requests per second
//
// Per connection, tagged peer:
//
//	peer.state             gauge    0 idle, 1 connecting, 2 ready, 3 transient failure, 4 shutdown
//	peer.connects          counter  connections established
//	peer.connect_failures  counter  failed connects, and connections found dead
//	peer.tls_fallbacks     counter  connects made in plaintext: the peer did not answer TLS (channel.ClientTLS.Fallback)
//
// Server side, per registered method and caller, tagged service, method
// and caller (the first MaxCallerSeries callers of each method by name,
// later ones under CallerOther):
//
//	server.calls            counter    requests, as they arrive, refused ones included
//	server.call.latency     histogram  arrival to answer; LatencyBuckets, the client's
//	server.call.errors      counter    requests answered with a system error; tag code
//	server.call.app_errors  counter    requests answered with an application error
//	server.shed             counter    requests shed; tag reason (in_flight, adaptive, rate)
//
// With channel.WithTChannelMetrics, also tchannel-go's names, with its
// tags service, calling-service, endpoint (bounded the same way):
//
//	inbound.calls.recvd          counter  as server.calls
//	inbound.calls.success        counter  answered without an error of either kind
//	inbound.calls.app-errors     counter  as server.call.app_errors
//	inbound.calls.system-errors  counter  as server.call.errors; tag type ("busy", ...)
//	inbound.calls.latency        timer    as server.call.latency
//
// Server side, untagged:
//
//	server.malformed  counter  requests answered BAD_REQUEST: undecodable
//	server.oversize   counter  requests answered BAD_REQUEST: too large
//
// Leasing (the Doorman client and server of package leasing), to the scope
// in their configuration; per resource, tagged resource:
//
//	lease.capacity            gauge    capacity held (client) or leased out (server)
//	lease.wants               gauge    capacity wanted (server: its clients' sum)
//	lease.waits               counter  calls that waited for capacity (client)
//	lease.rate_limited        counter  calls refused: the wait would pass their deadline (client)
//	lease.expired             counter  leases that expired before renewal (client)
//	lease.clients             gauge    clients known for the resource (server)
//
// and untagged:
//
//	lease.requests            counter  GetCapacity requests sent (client) or answered (server)
//	lease.refresh_errors      counter  failed refreshes (client)
//	lease.invalid_requests    counter  requests rejected as invalid (server)
//	lease.unmatched_template  counter  resources requested that no template names (server)
//
// # Histograms
//
// call.latency, server.call.latency and call.attempts are tally
// histograms with fixed buckets, LatencyBuckets (both latencies) and
// AttemptBuckets. A bucket counts the values above the
// previous bucket's bound up to and including its own, and a last bucket
// counts values above the highest bound. Through tally's Prometheus
// reporter (with its "_" separator and sanitizer) they are Prometheus
// histograms: call_latency_bucket{le="0.0001"} ... {le="10"} and
// {le="+Inf"} (bounds in seconds), call_attempts_bucket{le="0"} ...
// {le="5"} and {le="+Inf"}, each with _count. That reporter records each
// sample at its bucket's upper bound, so _sum is an over-estimate (and
// huge once a sample lands in the last bucket): compute means and
// quantiles from _bucket and _count.
//
// A Channel makes each tagged scope and metric once and caches it, so
// recording a call, its latency and its attempts allocates nothing; with
// no scope it reports nowhere and costs nothing.
package stats
