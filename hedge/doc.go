// Package hedge is Sluice's hedging policy (gRPC's retry design, gRFC A6,
// "Hedging Policy"): send the same call again, to another peer, while
// earlier attempts are still outstanding, to cut tail latency.
//
// The original attempt goes at once; another follows every HedgingDelay
// while none has succeeded, up to MaxAttempts in all (capped on the client
// like retries). A failure with a non-fatal code sends the next hedge at
// once; a success or a fatal code ends the call and cancels the rest.
// Server pushback delays the next hedge or, when negative, stops hedging.
// Hedges beyond the first attempt are subject to the service's retry
// throttling (retry.ThrottleConfig) and are simply not sent while it
// refuses.
//
// The policy and its validation are in policy.go, the adaptive delay
// (Sluice's extension) in adaptive.go. A service writes a policy in its
// service config (package serviceconfig) or in code, and a Channel runs
// it; the executor is the Channel's own. Like the retry package this one
// is pure: no TChannel, no network.
package hedge
