package stats

import (
	"time"

	"github.com/uber-go/tally/v4"
)

// Tag names.
const (
	// TagService is the tag naming the called (client) service.
	TagService = "service"
	// TagMethod is the tag naming the called method.
	TagMethod = "method"
	// TagCode is the tag of error counters: the upper-case TChannel code
	// name ("BUSY", "TIMEOUT", ...) or a local outcome ("THROTTLED",
	// "NO_PEERS", "RATE_LIMITED", "UNAVAILABLE", CodeLocal).
	TagCode = "code"
	// TagPeer is the tag naming a peer by its host:port.
	TagPeer = "peer"
	// TagCaller is the tag of server metrics naming the calling service:
	// the TChannel caller name a request carries (CallerOther past
	// MaxCallerSeries).
	TagCaller = "caller"
)

// Per-call metrics, tagged service and method.
const (
	// Calls is a counter: calls made through a Channel, one per call
	// whatever its number of attempts, failed calls included.
	Calls = "calls"
	// CallLatency is a histogram with LatencyBuckets: the time of each call
	// from its start to its one result, across every attempt (for a
	// successful call, to the end of the winning attempt). Every call is
	// recorded, failed ones included.
	CallLatency = "call.latency"
	// CallAttempts is a histogram with AttemptBuckets: the number of
	// attempts each call sent on the wire (the first, every retry and every
	// hedge), recorded once per call. A call that sent nothing (refused
	// locally, no peers, ...) records 0.
	CallAttempts = "call.attempts"
	// CallErrors is a counter tagged code: calls that ended in an error.
	CallErrors = "call.errors"
	// Attempts is a counter: attempts sent on the wire (the first, every
	// retry and every hedge). gRPC's retry design counts each attempt as an
	// RPC of its own: Attempts and AttemptErrors are that per-attempt view,
	// Calls and CallErrors the caller's.
	Attempts = "attempts"
	// AttemptErrors is a counter tagged code: attempts that failed.
	AttemptErrors = "attempt.errors"
	// AttemptsUnsent is a counter: attempts that never left the client (the
	// connection closed before anything was sent); they are begun on
	// another peer transparently and are not counted in Attempts.
	AttemptsUnsent = "attempt.unsent"
	// AttemptsSkippedDeadline is a counter: retries and hedges not sent
	// because the time left before the call's deadline was shorter than
	// the method's expected latency (a low quantile of what its first
	// attempts have taken; retry.StopDeadline). A call counts at most one:
	// after it, the call sends nothing more.
	AttemptsSkippedDeadline = "attempt.skipped.deadline"
	// AttemptsSkippedBudget is a counter: retries and hedges not sent
	// because the Client's retry budget refused them (retry.BudgetConfig),
	// and calls made for an inbound retry that it refused, which fail at
	// once THROTTLED.
	AttemptsSkippedBudget = "attempt.skipped.budget"
	// AttemptsSkippedChained is a counter: calls made for an inbound
	// request that was itself a retry or hedge, of a method that may retry
	// or hedge, whose one attempt was sent and failed with a code their
	// policy retries (or hedges on) (retry.StopChained; see
	// channel.RetryConfig.Chained): each stopped retrying there, the layer
	// above being the one that retries.
	AttemptsSkippedChained = "attempt.skipped.chained"
)

// Retry and hedging metrics, tagged service and method. They follow gRPC's
// retry design ("Retry and Hedging Statistics"): hedged attempts after the
// first count as retries too. The distribution of attempts per call is
// CallAttempts.
const (
	// RetryAttempts is a counter: attempts sent after a call's first (a
	// retry or a hedge).
	RetryAttempts = "retry.attempts"
	// RetryAttemptsFailed is a counter: attempts counted in RetryAttempts
	// that failed.
	RetryAttemptsFailed = "retry.attempts.failed"
	// HedgesSent is a counter: hedged attempts sent after the first.
	HedgesSent = "hedge.sent"
	// HedgesWon is a counter: calls won by a hedged attempt (not the first).
	HedgesWon = "hedge.won"
	// HedgesCancelled is a counter: attempts cancelled because another won
	// or a fatal code ended the call.
	HedgesCancelled = "hedge.cancelled"
)

// LatencyBuckets are the upper bounds of CallLatency's buckets: 1-2-5 steps
// from 100µs to 10s, 16 bounds, so that every power of ten (1ms, 10ms,
// 100ms, 1s, 10s) is a bound a latency objective can name. Each bucket
// holds the latencies above the previous bound up to and including its own
// (Prometheus's le); a last, unbounded bucket holds those above 10s, and
// the first holds everything up to 100µs. Prometheus sees the bounds in
// seconds: le="0.0001", "0.0002", "0.0005", "0.001", ..., "10", "+Inf".
//
// A Channel uses a copy made when the program starts: changing this
// variable changes no histogram.
var LatencyBuckets = steps125(100*time.Microsecond, 10*time.Second)

// steps125 returns the bounds from to through, in 1-2-5 steps: from, 2 x
// from, 5 x from, 10 x from, ... up to and including through (from and
// through each a power of ten times the unit).
func steps125(from, through time.Duration) tally.DurationBuckets {
	var b tally.DurationBuckets
	for d := from; d <= through; d *= 10 {
		for _, m := range []time.Duration{1, 2, 5} {
			if d*m <= through {
				b = append(b, d*m)
			}
		}
	}
	return b
}

// AttemptBuckets are the upper bounds of CallAttempts's buckets: one bucket
// per count from 0 (the call sent nothing) to 5, the default client-side
// cap on attempts (retry.MaxAttemptsCap, which hedging shares), and a last,
// unbounded bucket for more, possible only when a Channel raises the cap
// (channel.RetryConfig.MaxAttemptsCap). Prometheus sees le="0", "1", ...,
// "5", "+Inf".
//
// A Channel uses a copy made when the program starts: changing this
// variable changes no histogram.
var AttemptBuckets = tally.ValueBuckets{0, 1, 2, 3, 4, 5}

// RetryTokens is a gauge tagged service: the tokens in the service's
// retry-throttling bucket.
const RetryTokens = "retry.throttle.tokens"

// Per-peer metrics, tagged service and peer.
const (
	// PeerSent is a counter: attempts sent to the peer.
	PeerSent = "peer.sent"
	// PeerBusy is a counter: busy responses the peer sent back.
	PeerBusy = "peer.busy"
	// PeerThrottled is a counter: requests the peer's busy limiter refused;
	// each refused request was offered to another peer or failed unsent.
	PeerThrottled = "peer.throttled"
	// PeerLimit is a gauge: the peer's busy-throttling limit in requests per
	// second, updated as attempts complete.
	PeerLimit = "peer.limit"
	// PeerEjections is a counter: times the peer was ejected after
	// answering UNEXPECTED or NETWORK errors too many times in a row
	// (see balance.Ejection); an ejected peer is not chosen for a while.
	PeerEjections = "peer.ejections"
)

// Connection metrics, tagged peer only: a host:port has one connection
// whatever services it serves.
const (
	// PeerState is a gauge: the peer's connection state, numbered as gRPC
	// numbers its connectivity states (0 idle, 1 connecting, 2 ready,
	// 3 transient failure, 4 shutdown).
	PeerState = "peer.state"
	// PeerConnects is a counter: connections established to the peer
	// (handshake done).
	PeerConnects = "peer.connects"
	// PeerConnectFailures is a counter: connects that failed (refused,
	// reset, handshake failed or timed out) and connections that died early
	// or were found dead by health checks.
	PeerConnectFailures = "peer.connect_failures"
	// PeerTLSFallbacks is a counter: connections to the peer made in
	// plaintext because it did not answer the TLS handshake in TLS, as
	// channel.ClientTLS.Fallback allows for the peers it names. A peer
	// that has spoken TLS to the Channel is never fallen back for again.
	PeerTLSFallbacks = "peer.tls_fallbacks"
)

// CodeLocal is the code tag of CallErrors for a call that failed in this
// process for a reason no code names (the channel was closed, say). Other
// local outcomes use their codes' names: THROTTLED, NO_PEERS,
// RATE_LIMITED, UNAVAILABLE.
const CodeLocal = "LOCAL"

// MethodOther is the method tag of calls to methods that have no series of
// their own. A Channel's client side gives series of their own to the
// methods the service config names exactly or channel.WithMethods names,
// and to the first channel.MaxMethodSeries (64) other methods it calls per
// service; it counts calls to any method after those under this tag, one
// series per service, so that the method names callers use cannot multiply
// the series beyond that bound.
const MethodOther = "_other"

// PeerOther is the peer tag of the per-peer and connection metrics of the
// peers that have no series of their own: a Channel gives series of their
// own to the first MaxPeerSeries (service, host:port) pairs, and to the
// first MaxPeerSeries host:ports' connections, and reports
// every later one under this tag (one series per service), so that a
// registry rotating addresses cannot multiply the series: tally keeps a
// series, and its Prometheus reporter exports it, for the life of the
// process.
const PeerOther = "_other"

// MaxPeerSeries bounds the peers (per service and host:port) and the
// connections (per host:port) that get metric series of their own from one
// Channel: each costs about 10 KB that tally never frees. A client of
// more peers than this still counts all of them, the later ones under
// PeerOther.
const MaxPeerSeries = 1024

// Per-call metrics of a Channel's server side, tagged service (the
// Channel's own), method (a registered method: a request for any other
// never reaches one) and caller (bounded: MaxCallerSeries, CallerOther).
// They mirror the client's Calls, CallErrors and CallLatency. ServerCalls
// counts a request as it arrives; the others record it once, when it is
// answered (or refused, or given up unanswered).
const (
	// ServerCalls is a counter: inbound requests to the method, counted
	// as they arrive, whatever their outcome: those refused or shed before
	// any handler ran included.
	ServerCalls = "server.calls"
	// ServerCallLatency is a histogram with LatencyBuckets, the client's:
	// the time from the request reaching the Channel's guard (its first
	// fragment read, its handler's goroutine started) to its answer (the
	// handler's return). Every request is recorded, refused ones included.
	ServerCallLatency = "server.call.latency"
	// ServerCallErrors is a counter tagged code: requests answered with a
	// TChannel system error, the upper-case code name ("BUSY",
	// "TIMEOUT", "CANCELLED", "DECLINED", "UNEXPECTED", "BAD_REQUEST",
	// "NETWORK", "PROTOCOL"; CodeOther for a code TChannel does not
	// define). A request the handler could not answer (its caller gave
	// up, its connection closed) counts as "CANCELLED", or "TIMEOUT" when
	// its deadline passed. Application errors are not errors here: see
	// ServerCallAppErrors.
	ServerCallErrors = "server.call.errors"
	// ServerCallAppErrors is a counter: requests answered with an
	// application error (a Thrift exception, a JSON error, a raw
	// response marked AppError): a successful transport, as on the
	// client.
	ServerCallAppErrors = "server.call.app_errors"
	// ServerShed is a counter tagged reason: requests answered BUSY by
	// load shedding (channel.ShedConfig) before any handler ran:
	// ShedInFlight, ShedAdaptive or ShedRate. They count in
	// ServerCallErrors (code BUSY) too.
	ServerShed = "server.shed"
)

// ServerShed's reasons: the limit that refused the request.
const (
	// ShedInFlight: the fixed limit on requests in flight
	// (ShedConfig.MaxInFlight).
	ShedInFlight = "in_flight"
	// ShedAdaptive: the adaptive concurrency limit (ShedConfig.Adaptive).
	ShedAdaptive = "adaptive"
	// ShedRate: the limit on requests per second (ShedConfig.MaxRPS).
	ShedRate = "rate"
)

// CallerOther is the caller tag of the server metrics of callers that
// have no series of their own: a Channel gives series of their own to the
// first MaxCallerSeries caller names each registered method sees, and
// reports every later one under this tag (one series per method), since
// a caller name is whatever the caller says.
const CallerOther = "_other"

// MaxCallerSeries bounds the callers that get server metric series of
// their own, per registered method of a Channel: each costs about 10 KB
// that tally never frees.
const MaxCallerSeries = 64

// CodeOther is the code tag of ServerCallErrors for an answer whose code
// TChannel does not define.
const CodeOther = "_other"

// The names of tchannel-go's own inbound metrics, which a Channel also
// reports with channel.WithTChannelMetrics, so that dashboards and alerts
// built on a tchannel-go server keep working through a migration. Their
// tags are tchannel-go's: TagTChannelService (the Channel's service),
// TagTChannelCaller (the caller, bounded as TagCaller is) and
// TagTChannelEndpoint (the method, registered ones only), and on
// TChannelInboundSystemErrors TagTChannelErrorType.
const (
	// TChannelInboundRecvd is a counter: as ServerCalls.
	TChannelInboundRecvd = "inbound.calls.recvd"
	// TChannelInboundSuccess is a counter: requests answered without an
	// error of either kind.
	TChannelInboundSuccess = "inbound.calls.success"
	// TChannelInboundAppErrors is a counter: as ServerCallAppErrors.
	TChannelInboundAppErrors = "inbound.calls.app-errors"
	// TChannelInboundSystemErrors is a counter tagged type: as
	// ServerCallErrors, with tchannel-go's names of the codes ("busy",
	// "timeout", "unexpected-error", ...: SystemErrCode.MetricsKey).
	// tchannel-go v1.34 names this metric but does not report it.
	TChannelInboundSystemErrors = "inbound.calls.system-errors"
	// TChannelInboundLatency is a timer: as ServerCallLatency.
	TChannelInboundLatency = "inbound.calls.latency"

	// TagTChannelService is tchannel-go's tag of the serving service.
	TagTChannelService = "service"
	// TagTChannelCaller is tchannel-go's tag of the caller.
	TagTChannelCaller = "calling-service"
	// TagTChannelEndpoint is tchannel-go's tag of the method.
	TagTChannelEndpoint = "endpoint"
	// TagTChannelErrorType is tchannel-go's tag of a system error's code.
	TagTChannelErrorType = "type"
)

// Other server-side metrics of a Channel, untagged.
const (
	// ServerMalformed is a counter: inbound requests answered BAD_REQUEST
	// because their body or headers could not be decoded.
	ServerMalformed = "server.malformed"
	// ServerOversize is a counter: inbound requests answered BAD_REQUEST
	// because their arguments exceeded the Channel's maximum request size.
	ServerOversize = "server.oversize"
)

// What remote peers hold of a Channel: its inbound connections and the
// requests they send (see channel.PeerLimits). Tags are bounded sets.
const (
	// TagReason is the tag saying why a connection was closed or a
	// request refused or dropped.
	TagReason = "reason"
	// TagDirection is the tag saying whether a connection was accepted
	// ("inbound") or dialed ("outbound").
	TagDirection = "direction"

	// ServerConns is a gauge: inbound connections held, those still in
	// their handshake included.
	ServerConns = "server.conns"
	// ServerConnsClosed is a counter tagged reason: inbound connections
	// the Channel closed: idle, evicted (at the cap, for a new one),
	// refused (at the cap, every one busy), write_stalled,
	// handshake_timeout, handshake_failed, invalid_frame (its first
	// frame), frame_stalled, answers_unread (owed the most answers not
	// yet written when the server was at its bound and another connection
	// needed room); with TLS (channel.WithServerTLS),
	// tls_handshake_failed and plaintext_refused (a plaintext peer on a
	// TLS-only port).
	ServerConnsClosed = "server.conns_closed"
	// ServerConnsPlaintext is a counter: plaintext TChannel connections
	// accepted (their init frame read and accepted) on a port that serves
	// TLS and plaintext (channel.TLSMixed); other plaintext bytes, an HTTP
	// health probe say, are refused and not counted here. Once it stays
	// still, every client speaks TLS.
	ServerConnsPlaintext = "server.conns_plaintext"
	// FramesInvalid is a counter tagged direction: connections closed
	// because their peer sent a frame that breaks the TChannel protocol.
	FramesInvalid = "frames.invalid"
	// ServerRefused is a counter tagged reason: requests answered BUSY
	// before any handler saw them: unfinished_bytes (their connection or
	// the server held too many bytes of requests still arriving),
	// calls_per_conn (their connection had too many calls in flight),
	// answer_bytes (the server owed too many bytes of answers not yet
	// written, and their connection its share); and deadline
	// (ReasonDeadline).
	ServerRefused = "server.refused"
	// ReasonDeadline is ServerRefused's reason for a request whose time
	// left (its handler context's deadline, from the caller's TTL) was
	// shorter than its method's expected service time, a low quantile of
	// the method's measured handler latency: answered BUSY with a "do not
	// retry" hint, the handler never ran.
	ReasonDeadline = "deadline"
	// ServerDropped is a counter tagged reason: requests a handler had,
	// dropped before their last fragment came (the caller got BUSY or
	// TIMEOUT, the handler a cancelled context): unfinished_bytes,
	// stalled.
	ServerDropped = "server.dropped"
)

// Rate-limit pacing metrics, tagged service.
const (
	// RateLimitMalformed is a counter: responses whose rate-limit headers
	// could not be read (they were ignored).
	RateLimitMalformed = "ratelimit.malformed_headers"
	// RateLimitHeld is a counter: calls held back, before sending, by a
	// throttling window the server announced.
	RateLimitHeld = "ratelimit.held"
	// RateLimitRejected is a counter: calls failed at once because the
	// server's throttling window outlasted their maximum delay or deadline.
	RateLimitRejected = "ratelimit.rejected"
	// RateLimitSleep is a timer: the pacer's sleeps before calls.
	RateLimitSleep = "ratelimit.sleep"
)
