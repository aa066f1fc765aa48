package stats

// Tag names.
const (
	TagService = "service"
	TagMethod  = "method"
	TagCode    = "code"
	TagPeer    = "peer"
)

// Per-call metrics, tagged service and method.
const (
	// Calls counts calls made through a Channel, one per call whatever its
	// number of attempts.
	Calls = "calls"
	// CallLatency times each call from its start to its one result, across
	// every attempt.
	CallLatency = "call.latency"
	// CallErrors counts calls that ended in an error, tagged code.
	CallErrors = "call.errors"
	// Attempts counts attempts sent on the wire (the first, every retry and
	// every hedge). The retry design counts each attempt as an RPC of its
	// own: Attempts and AttemptErrors are that per-attempt view, Calls and
	// CallErrors the caller's.
	Attempts = "attempts"
	// AttemptErrors counts attempts that failed, tagged code.
	AttemptErrors = "attempt.errors"
	// AttemptsUnsent counts attempts that never left the client (no
	// connection could be made); they are retried transparently.
	AttemptsUnsent = "attempt.unsent"
)

// Retry and hedging metrics, tagged service and method (the retry design's
// "Retry and Hedging Statistics"; hedges after the first count as retries).
const (
	// RetryAttempts counts retry attempts made.
	RetryAttempts = "retry.attempts"
	// RetryAttemptsFailed counts retry attempts that failed.
	RetryAttemptsFailed = "retry.attempts.failed"
	// RetryHistogram counts retry attempts by ordinal, tagged bucket: each
	// retry attempt increments exactly one of ">=1", ">=2", ">=3", ">=4",
	// ">=5", ">=10", ">=100", ">=1000" (the 5th to 9th retries all ">=5").
	RetryHistogram = "retry.histogram"
	// HedgesSent counts hedged attempts after the first.
	HedgesSent = "hedge.sent"
	// HedgesWon counts calls won by a hedged attempt (not the first).
	HedgesWon = "hedge.won"
	// HedgesCancelled counts attempts cancelled because another won or a
	// fatal code ended the call.
	HedgesCancelled = "hedge.cancelled"
)

// TagBucket is the tag of RetryHistogram.
const TagBucket = "bucket"

// RetryTokens is a gauge tagged service: the tokens in the service's
// retry-throttling bucket.
const RetryTokens = "retry.throttle.tokens"

// Per-peer metrics, tagged service and peer.
const (
	// PeerSent counts attempts sent to the peer.
	PeerSent = "peer.sent"
	// PeerBusy counts busy responses the peer sent back.
	PeerBusy = "peer.busy"
	// PeerThrottled counts requests the peer's busy limiter refused; each
	// refused request was offered to another peer or failed unsent.
	PeerThrottled = "peer.throttled"
	// PeerLimit is a gauge: the peer's busy-throttling limit in requests per
	// second, updated as attempts complete.
	PeerLimit = "peer.limit"
)

// Connection metrics, tagged peer only: a host:port has one connection
// whatever services it serves.
const (
	// PeerState is a gauge: the peer's connection state, numbered as gRPC
	// numbers its connectivity states (0 idle, 1 connecting, 2 ready,
	// 3 transient failure, 4 shutdown).
	PeerState = "peer.state"
	// PeerConnects counts connections established to the peer (handshake
	// done).
	PeerConnects = "peer.connects"
	// PeerConnectFailures counts connects that failed (refused, reset,
	// handshake failed or timed out) and connections that died early or
	// were found dead by health checks.
	PeerConnectFailures = "peer.connect_failures"
)

// CodeLocal is the code tag of CallErrors for a call that failed in this
// process for a reason no code names (the channel was closed, say). Other
// local outcomes use their codes' names: THROTTLED, NO_PEERS,
// RATE_LIMITED, UNAVAILABLE.
const CodeLocal = "LOCAL"

// Server-side metrics of a Channel, untagged.
const (
	// ServerRequests counts inbound requests, shed or not.
	ServerRequests = "server.requests"
	// ServerShed counts inbound requests answered Busy by load shedding
	// before any handler ran.
	ServerShed = "server.shed"
	// ServerMalformed counts inbound requests answered BAD_REQUEST because
	// their body or headers could not be decoded.
	ServerMalformed = "server.malformed"
	// ServerOversize counts inbound requests answered BAD_REQUEST because
	// their arguments exceeded the Channel's maximum request size.
	ServerOversize = "server.oversize"
)

// Rate-limit pacing metrics, tagged service.
const (
	// RateLimitMalformed counts responses whose rate-limit headers could
	// not be read (they were ignored).
	RateLimitMalformed = "ratelimit.malformed_headers"
	// RateLimitHeld counts calls held back, before sending, by a throttling
	// window the server announced.
	RateLimitHeld = "ratelimit.held"
	// RateLimitRejected counts calls failed at once because the server's
	// throttling window outlasted their maximum delay or deadline.
	RateLimitRejected = "ratelimit.rejected"
	// RateLimitSleep times the pacer's sleeps before calls.
	RateLimitSleep = "ratelimit.sleep"
)
