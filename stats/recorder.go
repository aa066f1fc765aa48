package stats

import (
	"sync"
	"time"

	"github.com/uber-go/tally/v4"
)

// Recorder hands out the metrics of one Channel, cached per method and per
// peer. It is safe for concurrent use.
type Recorder struct {
	scope tally.Scope

	mu      sync.RWMutex
	methods map[methodKey]*Method
	peers   map[peerKey]*Peer
}

type methodKey struct{ service, method string }
type peerKey struct{ service, hostPort string }

// NewRecorder returns a Recorder reporting to scope; a nil scope reports
// nowhere.
func NewRecorder(scope tally.Scope) *Recorder {
	if scope == nil {
		scope = tally.NoopScope
	}
	return &Recorder{scope: scope, methods: map[methodKey]*Method{}, peers: map[peerKey]*Peer{}}
}

// Scope returns the scope the Recorder reports to.
func (r *Recorder) Scope() tally.Scope { return r.scope }

// Method returns the metrics of calls to service's method.
func (r *Recorder) Method(service, method string) *Method {
	k := methodKey{service, method}
	r.mu.RLock()
	m, ok := r.methods[k]
	r.mu.RUnlock()
	if ok {
		return m
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if m, ok := r.methods[k]; ok {
		return m
	}
	s := r.scope.Tagged(map[string]string{TagService: service, TagMethod: method})
	m = &Method{scope: s, calls: s.Counter(Calls), latency: s.Timer(CallLatency),
		attempts: s.Counter(Attempts), errors: map[string]tally.Counter{}}
	r.methods[k] = m
	return m
}

// Peer returns the metrics of one peer of service.
func (r *Recorder) Peer(service, hostPort string) *Peer {
	k := peerKey{service, hostPort}
	r.mu.RLock()
	p, ok := r.peers[k]
	r.mu.RUnlock()
	if ok {
		return p
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.peers[k]; ok {
		return p
	}
	s := r.scope.Tagged(map[string]string{TagService: service, TagPeer: hostPort})
	p = &Peer{Sent: s.Counter(PeerSent), Busy: s.Counter(PeerBusy),
		Throttled: s.Counter(PeerThrottled), Limit: s.Gauge(PeerLimit)}
	r.peers[k] = p
	return p
}

// Method holds the per-call metrics of one (service, method).
type Method struct {
	scope    tally.Scope
	calls    tally.Counter
	latency  tally.Timer
	attempts tally.Counter

	mu     sync.Mutex
	errors map[string]tally.Counter
}

// Scope returns the method's tagged scope, for metrics other packages
// define on it.
func (m *Method) Scope() tally.Scope { return m.scope }

// Call records one finished call: its latency, and its error code if code is
// not empty.
func (m *Method) Call(latency time.Duration, code string) {
	m.calls.Inc(1)
	m.latency.Record(latency)
	if code != "" {
		m.errorCounter(code).Inc(1)
	}
}

// Attempt records one attempt sent on the wire.
func (m *Method) Attempt() { m.attempts.Inc(1) }

func (m *Method) errorCounter(code string) tally.Counter {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.errors[code]
	if !ok {
		c = m.scope.Tagged(map[string]string{TagCode: code}).Counter(CallErrors)
		m.errors[code] = c
	}
	return c
}

// Peer holds the metrics of one peer.
type Peer struct {
	Sent      tally.Counter
	Busy      tally.Counter
	Throttled tally.Counter
	Limit     tally.Gauge
}
