// Package retry is Sluice's retry policy: whether and when a failed
// TChannel call is tried again, as gRPC's retry design (gRFC A6, "gRPC
// Retry Design") says, on TChannel codes, waiting by the backoff jitters of
// the Alibaba Cloud (Aliyun) SDK ("Advanced backoff mechanism based on the
// throttling policy"; package backoff computes them).
//
// A service writes a policy in its service config (package serviceconfig)
// or in code, and a Channel runs it; the package holds what a service, a
// handler or a reader of errors needs:
//
//   - Policy (policy.go): maxAttempts, exponential backoff parameters and the
//     retryable codes, with Validate. A client-side cap (MaxAttemptsCap, 5 by
//     default) bounds maxAttempts; a policy asking for more is capped, not
//     rejected, as the gRPC design says. The wait before the nth retry is
//     package backoff's (Policy.Backoff), with full jitter (gRPC: random(0,
//     min(initial*mult^(n-1), max))) or equal jitter (Aliyun: half that
//     value plus a random half).
//   - ThrottleConfig (throttle.go): gRPC's retryThrottling, the
//     configuration of the token bucket shared by all calls to one service.
//     Retries and hedges are refused, never delayed, while the tokens are at
//     or below half of maxTokens.
//   - Pushback (pushback.go): the server's "retry after N ms" or "do not
//     retry", sent in the retry-pushback-ms response header (PushbackHeader)
//     or at the end of a TChannel error message.
//   - AttemptsHeader (header.go): the previous-rpc-attempts header a handler
//     reads on a retried or hedged attempt.
//   - StopReason (stop.go): why a call made no further attempt, as its
//     error says.
//
// The executor that runs the attempts, the bucket itself and the retry
// buffer are the Channel's own. Policy, ThrottleConfig and Pushback are
// plain values: the package knows nothing of TChannel or the network.
package retry
