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
// Raw and JSON calls share the pipeline; both speak TChannel's wire formats,
// so a Channel talks to any TChannel server and any TChannel client talks to
// a Channel. On the server side a Channel registers raw and JSON handlers and
// can shed load (answer Busy before a handler runs) above a rate or an
// in-flight limit, which closes the loop with the clients' busy throttling.
package channel
