package recorder

import (
	"slices"
	"sync"
	"time"

	"github.com/sluice-rpc/sluice/stats"
	"github.com/uber-go/tally/v4"
)

// Recorder hands out the metrics of one Channel, cached per method and per
// peer. It is safe for concurrent use.
type Recorder struct {
	scope tally.Scope

	// nop: made with no scope, the Recorder reports nowhere.
	nop bool

	mu      sync.RWMutex
	methods map[methodKey]*Method
	tokens  map[string]tally.Gauge
	servers map[serverKey]*ServerMethod
	// peers and conns: the first stats.MaxPeerSeries of each have series
	// of their own, the others share stats.PeerOther's.
	peers capped[peerKey, *Peer]
	conns capped[string, *Conn]
}

// The copies of stats.LatencyBuckets and stats.AttemptBuckets that every
// Recorder uses, made when the program starts: changing those variables
// changes no histogram.
var (
	latencyBuckets = slices.Clone(stats.LatencyBuckets)
	attemptBuckets = slices.Clone(stats.AttemptBuckets)
)

type methodKey struct{ service, method string }
type peerKey struct{ service, hostPort string }

// New returns a Recorder reporting to scope. A nil scope reports
// nowhere and costs nothing: its metrics are no-ops, not tally's null
// reporter (whose timers and counters still do their bookkeeping).
func New(scope tally.Scope) *Recorder {
	r := &Recorder{scope: scope, methods: map[methodKey]*Method{}, tokens: map[string]tally.Gauge{}, servers: map[serverKey]*ServerMethod{}}
	if scope == nil {
		r.scope, r.nop = nopScope{tally.NoopScope}, true
	}
	r.peers.max, r.conns.max = stats.MaxPeerSeries, stats.MaxPeerSeries
	return r
}

// Scope returns the scope the Recorder reports to.
func (r *Recorder) Scope() tally.Scope { return r.scope }

// Method returns the metrics of calls to service's method. The first call
// for a (service, method) makes its tagged scope and metrics; later calls
// find them with a read lock and allocate nothing.
func (r *Recorder) Method(service, method string) *Method {
	return cached(r, r.methods, methodKey{service, method}, func() *Method {
		s := r.scope.Tagged(map[string]string{stats.TagService: service, stats.TagMethod: method})
		return &Method{nop: r.nop, scope: s, calls: s.Counter(stats.Calls),
			latency: s.Histogram(stats.CallLatency, latencyBuckets), callAttempts: s.Histogram(stats.CallAttempts, attemptBuckets),
			attempts: s.Counter(stats.Attempts), unsent: s.Counter(stats.AttemptsUnsent),
			skippedDeadline: s.Counter(stats.AttemptsSkippedDeadline), skippedBudget: s.Counter(stats.AttemptsSkippedBudget),
			skippedChained: s.Counter(stats.AttemptsSkippedChained), errors: map[string]tally.Counter{}, attemptErrors: map[string]tally.Counter{},
			retries: s.Counter(stats.RetryAttempts), retriesFailed: s.Counter(stats.RetryAttemptsFailed),
			hedgesSent: s.Counter(stats.HedgesSent), hedgesWon: s.Counter(stats.HedgesWon), hedgesCancelled: s.Counter(stats.HedgesCancelled)}
	})
}

// RetryTokens returns the gauge of service's retry-throttling tokens.
func (r *Recorder) RetryTokens(service string) tally.Gauge {
	return cached(r, r.tokens, service, func() tally.Gauge {
		return r.scope.Tagged(map[string]string{stats.TagService: service}).Gauge(stats.RetryTokens)
	})
}

// Peer returns the metrics of one peer of service: its own for the first
// stats.MaxPeerSeries (service, host:port) pairs asked for, those of service's
// stats.PeerOther series for any later one.
func (r *Recorder) Peer(service, hostPort string) *Peer {
	return r.peers.get(peerKey{service, hostPort}, peerKey{service, stats.PeerOther}, func(k peerKey) *Peer {
		s := r.scope.Tagged(map[string]string{stats.TagService: k.service, stats.TagPeer: k.hostPort})
		return &Peer{Nop: r.nop, Sent: s.Counter(stats.PeerSent), Busy: s.Counter(stats.PeerBusy),
			Throttled: s.Counter(stats.PeerThrottled), Limit: s.Gauge(stats.PeerLimit), Ejections: s.Counter(stats.PeerEjections)}
	})
}

// Conn returns the connection metrics of the peer at hostPort: its own for
// the first stats.MaxPeerSeries host:ports asked for, the stats.PeerOther series' for
// any later one.
func (r *Recorder) Conn(hostPort string) *Conn {
	return r.conns.get(hostPort, stats.PeerOther, func(k string) *Conn {
		s := r.scope.Tagged(map[string]string{stats.TagPeer: k})
		return &Conn{State: s.Gauge(stats.PeerState), Connects: s.Counter(stats.PeerConnects), Failures: s.Counter(stats.PeerConnectFailures),
			TLSFallbacks: s.Counter(stats.PeerTLSFallbacks)}
	})
}

// cached returns m[k], making it with mk under r's lock on first use. Tagged
// scopes allocate, so each metric set is made once and then found with a
// read lock.
func cached[K comparable, V any](r *Recorder, m map[K]V, k K, mk func() V) V {
	r.mu.RLock()
	v, ok := m[k]
	r.mu.RUnlock()
	if ok {
		return v
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if v, ok := m[k]; ok {
		return v
	}
	v = mk()
	m[k] = v
	return v
}

// Method holds the per-call metrics of one (service, method), made once by
// Recorder.Method. Its methods are safe for concurrent use, and allocate
// nothing except the first time an error code is seen.
//
// A Channel records, for every call: Call once, with its latency and
// error code; CallAttempts once, with the attempts it sent; and for each
// attempt, Attempt when it is sent, Retry if it is not the first,
// AttemptFailed and RetryFailed if it fails, Unsent if it never left.
type Method struct {
	// nop: its Recorder has no scope. The calls of every request check it
	// first: a no-op metric's call, cheap alone, is a dozen a call.
	nop          bool
	scope        tally.Scope
	calls        tally.Counter
	latency      tally.Histogram
	callAttempts tally.Histogram
	attempts     tally.Counter

	unsent, skippedDeadline                tally.Counter
	skippedBudget, skippedChained          tally.Counter
	retries, retriesFailed                 tally.Counter
	hedgesSent, hedgesWon, hedgesCancelled tally.Counter

	mu            sync.Mutex
	errors        map[string]tally.Counter
	attemptErrors map[string]tally.Counter
}

// Retry records the nth attempt of a call after its first, a retry or a
// hedge (n >= 1; the first retry is 1): it counts it in stats.RetryAttempts. It
// does nothing for n < 1.
func (m *Method) Retry(n int) {
	if n < 1 {
		return
	}
	m.retries.Inc(1)
}

// Unsent records an attempt that never left the client.
func (m *Method) Unsent() { m.unsent.Inc(1) }

// SkippedDeadline records a retry or hedge not sent because the call's
// deadline left too little time (stats.AttemptsSkippedDeadline).
func (m *Method) SkippedDeadline() { m.skippedDeadline.Inc(1) }

// SkippedBudget records a retry or hedge, or a call serving a retry, that
// the Client's retry budget refused (stats.AttemptsSkippedBudget).
func (m *Method) SkippedBudget() { m.skippedBudget.Inc(1) }

// SkippedChained records a call serving a retry whose one attempt failed
// with a code its policy retries (stats.AttemptsSkippedChained).
func (m *Method) SkippedChained() { m.skippedChained.Inc(1) }

// RetryFailed records a retry attempt that failed.
func (m *Method) RetryFailed() { m.retriesFailed.Inc(1) }

// Hedged records how a hedged call went: hedges sent after the first
// attempt, whether a hedge (not the first attempt) won, and attempts
// cancelled.
func (m *Method) Hedged(sent int, hedgeWon bool, cancelled int) {
	if sent > 0 {
		m.hedgesSent.Inc(int64(sent))
	}
	if hedgeWon {
		m.hedgesWon.Inc(1)
	}
	if cancelled > 0 {
		m.hedgesCancelled.Inc(int64(cancelled))
	}
}

// AttemptFailed records an attempt that failed with code.
func (m *Method) AttemptFailed(code string) {
	if m.nop {
		return
	}
	m.mu.Lock()
	c, ok := m.attemptErrors[code]
	if !ok {
		c = m.scope.Tagged(map[string]string{stats.TagCode: code}).Counter(stats.AttemptErrors)
		m.attemptErrors[code] = c
	}
	m.mu.Unlock()
	c.Inc(1)
}

// Call records one finished call: it counts it in stats.Calls, records its latency
// in the stats.CallLatency histogram, and counts it in stats.CallErrors tagged code if
// code is not empty.
func (m *Method) Call(latency time.Duration, code string) {
	if m.nop {
		return
	}
	m.calls.Inc(1)
	m.latency.RecordDuration(latency)
	if code != "" {
		m.errorCounter(code).Inc(1)
	}
}

// Attempt records one attempt sent on the wire.
func (m *Method) Attempt() {
	if !m.nop {
		m.attempts.Inc(1)
	}
}

// CallAttempts records, once per finished call, the number of attempts it
// sent on the wire in the stats.CallAttempts histogram: 0 for a call that sent
// nothing, 1 for a call answered by its first attempt.
func (m *Method) CallAttempts(n int) {
	if !m.nop {
		m.callAttempts.RecordValue(float64(n))
	}
}

func (m *Method) errorCounter(code string) tally.Counter {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.errors[code]
	if !ok {
		c = m.scope.Tagged(map[string]string{stats.TagCode: code}).Counter(stats.CallErrors)
		m.errors[code] = c
	}
	return c
}

// Peer holds the metrics of one peer.
type Peer struct {
	// Nop says the metrics report nowhere (a Recorder without a scope):
	// a caller may skip the work of a metric's value.
	Nop       bool
	Sent      tally.Counter
	Busy      tally.Counter
	Throttled tally.Counter
	Limit     tally.Gauge
	Ejections tally.Counter
}

// Conn holds the connection metrics of one host:port.
type Conn struct {
	State        tally.Gauge
	Connects     tally.Counter
	Failures     tally.Counter
	TLSFallbacks tally.Counter
}
