package recorder

import (
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/stats"
	"github.com/uber-go/tally/v4"
	"github.com/uber/tchannel-go"
)

// serverKey names the server metrics of one registered method.
type serverKey struct {
	service, method string
	tchannelNames   bool
}

// Server returns the server-side metrics of service's registered method,
// or nil when the Recorder reports nowhere (made with a nil scope): the
// server then records nothing and reads no clock for it. With
// tchannelNames they are also reported under tchannel-go's names
// (stats.TChannelInboundRecvd, ...). The first call for a method makes its
// metrics; later calls find them.
func (r *Recorder) Server(service, method string, tchannelNames bool) *ServerMethod {
	if r.nop {
		return nil
	}
	return cached(r, r.servers, serverKey{service, method, tchannelNames}, func() *ServerMethod {
		m := &ServerMethod{root: r.scope, service: service, method: method, tchannelNames: tchannelNames}
		m.callers.max = stats.MaxCallerSeries
		return m
	})
}

// ServerMethod holds the server-side metrics of one registered method,
// one ServerSeries per caller: the first stats.MaxCallerSeries callers
// asked for get theirs, later ones share stats.CallerOther's.
type ServerMethod struct {
	root            tally.Scope
	service, method string
	tchannelNames   bool
	callers         capped[string, *ServerSeries]
}

// Caller returns the metrics of the method's requests from caller. Once
// made (and for any caller once the cap is reached), it is found without a
// lock or an allocation.
func (m *ServerMethod) Caller(caller string) *ServerSeries {
	if s, ok := m.callers.lookup(caller, stats.CallerOther); ok {
		return s
	}
	return m.callers.get(caller, stats.CallerOther, m.series)
}

// series makes the metrics of caller's requests.
func (m *ServerMethod) series(caller string) *ServerSeries {
	s := m.root.Tagged(map[string]string{stats.TagService: m.service, stats.TagMethod: m.method, stats.TagCaller: caller})
	ss := &ServerSeries{scope: s, calls: s.Counter(stats.ServerCalls), latency: s.Histogram(stats.ServerCallLatency, latencyBuckets)}
	if m.tchannelNames {
		ts := m.root.Tagged(map[string]string{stats.TagTChannelService: m.service,
			stats.TagTChannelCaller: caller, stats.TagTChannelEndpoint: m.method})
		ss.tch = &tchannelSeries{scope: ts, recvd: ts.Counter(stats.TChannelInboundRecvd),
			success: ts.Counter(stats.TChannelInboundSuccess), latency: ts.Timer(stats.TChannelInboundLatency)}
	}
	return ss
}

// ShedReason is the limit that shed a request (stats.ServerShed's reason).
type ShedReason uint8

// The limits that shed requests.
const (
	ShedInFlight ShedReason = iota // stats.ShedInFlight
	ShedAdaptive                   // stats.ShedAdaptive
	ShedRate                       // stats.ShedRate
	shedReasons
)

var shedNames = [shedReasons]string{stats.ShedInFlight, stats.ShedAdaptive, stats.ShedRate}

// ServerSeries holds the server-side metrics of one (method, caller). Its
// methods are safe for concurrent use, and allocate nothing except the
// first time an error code or a shedding reason is seen: each tagged
// counter is made on first use, so that codes never answered cost no
// series.
type ServerSeries struct {
	scope     tally.Scope // tagged service, method and caller
	calls     tally.Counter
	latency   tally.Histogram
	appErrors lazyCounter
	errors    [codeSlots]lazyCounter
	shed      [shedReasons]lazyCounter
	tch       *tchannelSeries // nil without tchannel-go's names
}

// Received records a request as it arrives, before any refusal: it counts
// it in stats.ServerCalls, and under tchannel-go's names when they are on.
// Done or Unclassified follows, when it is answered.
func (s *ServerSeries) Received() {
	s.calls.Inc(1)
	if t := s.tch; t != nil {
		t.recvd.Inc(1)
	}
}

// Done records one answered request: it records its latency in
// stats.ServerCallLatency and, for an answer with code (codes.OK: none),
// counts it in stats.ServerCallErrors tagged code, or for an application
// error (appError, and code OK) in stats.ServerCallAppErrors; and likewise
// under tchannel-go's names when they are on.
func (s *ServerSeries) Done(latency time.Duration, code codes.Code, appError bool) {
	s.latency.RecordDuration(latency)
	switch {
	case code != codes.OK:
		i := codeSlot(code)
		s.errors[i].counter(s.scope, stats.ServerCallErrors, stats.TagCode, slotNames[i]).Inc(1)
	case appError:
		s.appErrors.counter(s.scope, stats.ServerCallAppErrors, "", "").Inc(1)
	}
	if t := s.tch; t != nil {
		t.done(latency, code, appError)
	}
}

// Unclassified records one request whose answer the server could not see
// (a handler that reads and answers its calls itself): its latency only,
// under Sluice's names and tchannel-go's.
func (s *ServerSeries) Unclassified(latency time.Duration) {
	s.latency.RecordDuration(latency)
	if t := s.tch; t != nil {
		t.latency.Record(latency)
	}
}

// Shed records a request shed by the limit r, before its Done.
func (s *ServerSeries) Shed(r ShedReason) {
	if r < shedReasons {
		s.shed[r].counter(s.scope, stats.ServerShed, stats.TagReason, shedNames[r]).Inc(1)
	}
}

// tchannelSeries is a ServerSeries under tchannel-go's names and tags.
type tchannelSeries struct {
	scope     tally.Scope // tagged service, calling-service and endpoint
	recvd     tally.Counter
	success   tally.Counter
	latency   tally.Timer
	appErrors lazyCounter
	sysErrors [codeSlots]lazyCounter
}

func (t *tchannelSeries) done(latency time.Duration, code codes.Code, appError bool) {
	t.latency.Record(latency)
	switch {
	case code != codes.OK:
		i := codeSlot(code)
		t.sysErrors[i].counter(t.scope, stats.TChannelInboundSystemErrors, stats.TagTChannelErrorType, tchannelSlotNames[i]).Inc(1)
	case appError:
		t.appErrors.counter(t.scope, stats.TChannelInboundAppErrors, "", "").Inc(1)
	default:
		t.success.Inc(1)
	}
}

// codeSlots are the error codes a ServerSeries tells apart: TChannel's
// eight, and one slot for any other.
const codeSlots = 9

// codeSlot returns the slot of an error code: Timeout (0x01) to Network
// (0x07) in order, then Protocol, then the slot of any other code.
func codeSlot(c codes.Code) int {
	switch {
	case c >= codes.Timeout && c <= codes.Network:
		return int(c) - 1
	case c == codes.Protocol:
		return 7
	}
	return 8
}

// slotNames and tchannelSlotNames are the code tags of the slots: Sluice's
// names (as the client's call.errors) and tchannel-go's
// (SystemErrCode.MetricsKey); stats.CodeOther for the last.
var slotNames, tchannelSlotNames = func() (s, t [codeSlots]string) {
	for _, c := range []codes.Code{codes.Timeout, codes.Cancelled, codes.Busy, codes.Declined, codes.Unexpected,
		codes.BadRequest, codes.Network, codes.Protocol} {
		s[codeSlot(c)], t[codeSlot(c)] = c.String(), tchannel.SystemErrCode(c).MetricsKey()
	}
	s[codeSlots-1], t[codeSlots-1] = stats.CodeOther, stats.CodeOther
	return s, t
}()

// lazyCounter is a counter made on first use: found with one atomic load
// after that.
type lazyCounter struct{ p atomic.Pointer[counterRef] }

type counterRef struct{ tally.Counter }

// counter returns the counter name of scope, tagged key=value unless key
// is empty, making it on first use.
func (l *lazyCounter) counter(scope tally.Scope, name, key, value string) tally.Counter {
	if r := l.p.Load(); r != nil {
		return r.Counter
	}
	return l.make(scope, name, key, value)
}

func (l *lazyCounter) make(scope tally.Scope, name, key, value string) tally.Counter {
	if key != "" {
		scope = scope.Tagged(map[string]string{key: value})
	}
	// Two goroutines may both make it: tally hands both the same counter.
	l.p.CompareAndSwap(nil, &counterRef{scope.Counter(name)})
	return l.p.Load().Counter
}
