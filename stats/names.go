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
	// Attempts counts attempts sent on the wire (the first and every retry).
	Attempts = "attempts"
)

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

// Codes of local outcomes, used as the code tag of CallErrors.
const (
	CodeThrottled   = "THROTTLED"
	CodeNoPeers     = "NO_PEERS"
	CodeRateLimited = "RATE_LIMITED"
	CodeLocal       = "LOCAL"
)

// Server-side metrics of a Channel, untagged.
const (
	// ServerRequests counts inbound requests, shed or not.
	ServerRequests = "server.requests"
	// ServerShed counts inbound requests answered Busy by load shedding
	// before any handler ran.
	ServerShed = "server.shed"
)
