// Package retry decides whether and when a failed TChannel call is tried
// again: gRPC's retry design (gRFC A6, "gRPC Retry Design") on TChannel
// codes, waiting by the backoff jitters of the Alibaba Cloud (Aliyun) SDK
// ("Advanced backoff mechanism based on the throttling policy"; package
// backoff computes them).
//
// The package is pure: it knows nothing of TChannel or the network. Time
// comes from an injected clock and randomness from an injected source, so
// tests and simulators drive the very code production runs.
//
// The pieces, one file each:
//
//   - Policy (policy.go): maxAttempts, exponential backoff parameters and the
//     retryable codes, with Validate. A client-side cap (MaxAttemptsCap, 5 by
//     default) bounds maxAttempts; a policy asking for more is capped, not
//     rejected, as the gRPC design says. The wait before the nth retry is
//     package backoff's, with full jitter (gRPC: random(0,
//     min(initial*mult^(n-1), max))) or equal jitter (Aliyun: half that
//     value plus a random half).
//   - Throttle (throttle.go): the retry-throttling token bucket shared by all
//     calls to one service. Retries and hedges are refused, never delayed,
//     while the tokens are at or below half of maxTokens.
//   - Pushback (pushback.go): the server's "retry after N ms" or "do not
//     retry", read from the retry-pushback-ms response header or from the end
//     of a TChannel error message.
//   - Executor (executor.go): the sequential retry loop, including the one
//     transparent retry of an attempt a server declined before any handler
//     ran.
//   - Buffer (buffer.go): the bytes held for possible retries; a call whose
//     request does not fit is sent once and never retried.
package retry
