// Package channel is Sluice's Channel: a *tchannel.Channel whose calls run
// through one pipeline that handles overload by itself.
//
// A call picks a peer of the target service through package peer, skipping
// peers whose busy limiter refuses (package busy), sends the request with
// tchannel-go, classifies the outcome from the call itself (never from error
// strings), feeds busy responses back to that peer's limiter, and records
// metrics (package stats) and opentracing spans for the call and its attempt.
// When no peer may take a request the call fails locally with ErrThrottled
// and nothing is sent.
//
// Failures stay bounded. Calls never dial: each peer's connector (package
// peer) connects in the background with gRPC's connection backoff, and only
// peers with an established connection are chosen. A call with no ready peer
// waits while some peer is connecting, and fails at once with
// ErrUnavailable (code UNAVAILABLE) when every peer's connection has failed,
// unless it waits for ready (WaitForReady). An attempt whose connection
// closed before it was sent moves to another peer, each peer at most once;
// a decline sent before any handler ran (by a closing server) is retried
// once on another peer; any other failure is retried only as the call's
// retry or hedging policy says, so a handler runs once unless a policy
// names the code it answered. A call returns by its deadline whatever the
// transport does. A request no peer could take (a nil request, a name over
// TChannel's limits, arguments over WithMaxRequestSize) fails at once with
// BAD_REQUEST.
//
// Raw and JSON calls share the pipeline; both speak TChannel's wire formats,
// so a Channel talks to any TChannel server and any TChannel client talks to
// a Channel. On the server side a Channel registers raw and JSON handlers and
// can shed load (answer Busy before a handler runs) above a rate or an
// in-flight limit, which closes the loop with the clients' busy throttling.
package channel
