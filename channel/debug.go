package channel

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"sort"
	"time"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/peer"
	"github.com/sluice-rpc/sluice/retry"
)

// DebugState is a Channel's live state, as Debug returns it and
// DebugHandler serves it: per target service its peers (connection state,
// busy limit and the current window's counts, pending calls, latency
// estimate), its retry-throttling tokens, lease gate and pacing windows, and
// per method called so far its retry or hedging policy (hedge delay
// included). It is a copy taken at Time; it does not change afterwards.
//
// The JSON form is the struct's, field by field (the json tags below).
// Times are RFC 3339 strings in UTC (fractional seconds when not 0),
// durations are float milliseconds in fields whose name ends in "Ms", lists
// are always arrays (never null), sorted as each field says, and an object
// that does not apply is null. For example:
//
//	{
//	  "service": "client",
//	  "time": "2024-05-01T12:00:00.5Z",
//	  "closed": false,
//	  "services": [{
//	    "name": "kv",
//	    "peers": [{
//	      "hostPort": "10.0.0.7:4040",
//	      "state": "READY",
//	      "pending": 0,
//	      "sent": 212, "busy": 31, "throttled": 4,
//	      "limit": 38.14, "ceiling": 9999999,
//	      "window": {"start": "2024-05-01T12:00:00Z", "lengthMs": 1000, "allowed": 12, "busy": 0},
//	      "latency": {"meanMs": 1.7, "samples": 181, "updated": "2024-05-01T12:00:00.49Z", "fresh": true}
//	    }],
//	    "retryThrottle": {"tokens": 6.3, "maxTokens": 10, "tokenRatio": 0.1, "retriesAllowed": true},
//	    "lease": {"gate": "*leasing.RateLimiter", "capacity": 250, "unlimited": false},
//	    "pacing": {"strategy": "reserve", "sleepMs": 800, "maxDelayMs": 5000,
//	      "windows": [{"key": "kv::get", "remainingMs": 1200, "until": "2024-05-01T12:00:01.7Z"}]},
//	    "methods": [{
//	      "name": "get", "timeoutMs": 500, "waitForReady": false,
//	      "retry": null,
//	      "hedge": {"maxAttempts": 2, "delayMs": 12.5, "hedgingDelayMs": 50, "nonFatalCodes": ["BUSY"],
//	        "adaptive": {"quantile": 0.95, "window": 1000, "floorMs": 2, "capMs": 100, "samples": 5000, "learned": true}}
//	    }]
//	  }]
//	}
//
// Every value is finite: an unlimited lease is "unlimited": true with a
// null capacity.
type DebugState struct {
	// Service is the name the Channel serves under and calls as.
	Service string `json:"service"`
	// Time is when the state was read, on the Channel's clock (WithClock).
	Time time.Time `json:"time"`
	// Closed reports whether Close has been called.
	Closed bool `json:"closed"`
	// Services are the services the Channel calls, sorted by name: those
	// with peers (AddPeer), calls, a lease gate (WithLease) or pacing
	// (WithPacing).
	Services []DebugService `json:"services"`
}

// DebugService is the state of one target service.
type DebugService struct {
	// Name is the service's name.
	Name string `json:"name"`
	// Peers are the service's peers, sorted by host:port; empty before the
	// first AddPeer.
	Peers []DebugPeer `json:"peers"`
	// RetryThrottle is the service's retry-throttling token bucket (the
	// service config's retryThrottling); null when there is none: no
	// retryThrottling, retries disabled, or no call to the service yet (the
	// first call makes the bucket, full).
	RetryThrottle *DebugThrottle `json:"retryThrottle"`
	// Lease is the service's lease gate (WithLease); null without one.
	Lease *DebugLease `json:"lease"`
	// Pacing is the service's rate-limit pacing (WithPacing); null without
	// it.
	Pacing *DebugPacing `json:"pacing"`
	// Methods are the methods called so far (each gets its policy on its
	// first call), sorted by name. Methods the service config names but
	// nobody has called yet are not listed.
	Methods []DebugMethod `json:"methods"`
}

// DebugPeer is the state of one peer of a service.
type DebugPeer struct {
	// HostPort is the peer's address.
	HostPort string `json:"hostPort"`
	// State is the connection state, as gRPC names it: "IDLE",
	// "CONNECTING", "READY", "TRANSIENT_FAILURE" or "SHUTDOWN". Only a
	// READY peer is sent attempts.
	State string `json:"state"`
	// Pending is the number of attempts sent to the peer and not yet
	// answered.
	Pending int64 `json:"pending"`
	// Sent is the number of attempts sent to the peer since it was added.
	Sent uint64 `json:"sent"`
	// Busy is the number of busy responses it gave since it was added.
	Busy uint64 `json:"busy"`
	// Throttled is the number of attempts its busy limiter refused since it
	// was added (they went to other peers, or failed THROTTLED).
	Throttled uint64 `json:"throttled"`
	// Limit is the busy limit in force now, in requests per window (per
	// second unless WithBusyConfig changed the window): at most
	// floor(Limit) attempts are sent to the peer in the current window.
	// Busy responses halve it at the next window, quiet windows let it
	// recover towards Ceiling.
	Limit float64 `json:"limit"`
	// Ceiling is the most Limit recovers to (the busy configuration's
	// Ceiling): a Limit below it means the peer answered Busy recently.
	Ceiling float64 `json:"ceiling"`
	// Window is the busy limiter's current window.
	Window DebugWindow `json:"window"`
	// Latency is the peer's latency estimate.
	Latency DebugLatency `json:"latency"`
}

// DebugWindow is a busy limiter's current counting window.
type DebugWindow struct {
	// Start is when the window began.
	Start time.Time `json:"start"`
	// LengthMs is the window's length, in milliseconds.
	LengthMs float64 `json:"lengthMs"`
	// Allowed is the number of attempts the limiter allowed in the window
	// so far (at most floor of the peer's Limit).
	Allowed int64 `json:"allowed"`
	// Busy is the number of busy responses in the window so far, counted
	// up to the busy configuration's MaxHalvings (20 by default): each
	// halves the next window's limit.
	Busy int `json:"busy"`
}

// DebugLatency is a peer's latency estimate.
type DebugLatency struct {
	// MeanMs is the moving average (weight 1/8) of the latencies of
	// successful attempts, in milliseconds; 0 until one succeeds.
	MeanMs float64 `json:"meanMs"`
	// Samples is the number of successful attempts in the estimate since it
	// last restarted (an estimate not updated for a second restarts).
	Samples int64 `json:"samples"`
	// Updated is when the estimate last took a sample; null before the
	// first.
	Updated *time.Time `json:"updated"`
	// Fresh reports whether the estimate steers the choice of peer now:
	// updated within the last second and resting on at least 4 samples.
	Fresh bool `json:"fresh"`
}

// DebugThrottle is a service's retry-throttling token bucket (gRPC's
// retryThrottling).
type DebugThrottle struct {
	// Tokens is the bucket's content now, in [0, MaxTokens]: each counted
	// failure takes one, each success adds TokenRatio.
	Tokens float64 `json:"tokens"`
	// MaxTokens is the bucket's size.
	MaxTokens float64 `json:"maxTokens"`
	// TokenRatio is what each success adds.
	TokenRatio float64 `json:"tokenRatio"`
	// RetriesAllowed reports whether retries and hedges may be sent now:
	// whether Tokens > MaxTokens/2.
	RetriesAllowed bool `json:"retriesAllowed"`
}

// DebugLease is a service's lease gate.
type DebugLease struct {
	// Gate is the gate's Go type, such as "*leasing.RateLimiter".
	Gate string `json:"gate"`
	// Capacity is the capacity the gate admits now, in calls per second;
	// null when the gate does not report one (it has no
	// Capacity() float64 method) or it is unlimited.
	Capacity *float64 `json:"capacity"`
	// Unlimited reports that the gate's capacity is unlimited (+Inf).
	Unlimited bool `json:"unlimited"`
}

// DebugPacing is a service's rate-limit pacing.
type DebugPacing struct {
	// Strategy is the client rate throttling strategy, as package pacing
	// names it ("null" when none is configured).
	Strategy string `json:"strategy"`
	// SleepMs is the pacer's current sleep before each new call (without
	// jitter), in milliseconds.
	SleepMs float64 `json:"sleepMs"`
	// MaxDelayMs is the longest a call may wait for a throttling window,
	// in milliseconds (PacingConfig.MaxDelay).
	MaxDelayMs float64 `json:"maxDelayMs"`
	// Windows are the throttling windows the servers announced that still
	// run, sorted by key: new calls to their service or method are held
	// back until they end.
	Windows []DebugPaceWindow `json:"windows"`
}

// DebugPaceWindow is a throttling window a server announced.
type DebugPaceWindow struct {
	// Key is the throttled dimension: the service ("kv") or one method
	// ("kv::get").
	Key string `json:"key"`
	// RemainingMs is how long the window still runs, in milliseconds.
	RemainingMs float64 `json:"remainingMs"`
	// Until is when the window ends.
	Until time.Time `json:"until"`
}

// DebugMethod is how calls to one method of a service run. With neither a
// retry nor a hedging policy a call makes one attempt (plus a transparent
// retry of an attempt no server handled).
type DebugMethod struct {
	// Name is the method's name.
	Name string `json:"name"`
	// TimeoutMs is the service config's timeout of the whole call, in
	// milliseconds; 0 when it sets none (the context's deadline, or the
	// default timeout, applies).
	TimeoutMs float64 `json:"timeoutMs"`
	// WaitForReady is the service config's waitForReady.
	WaitForReady bool `json:"waitForReady"`
	// Retry is the method's retry policy; null without one (or with
	// retries disabled, or a hedging policy).
	Retry *DebugRetry `json:"retry"`
	// Hedge is the method's hedging policy; null without one (or with
	// retries disabled).
	Hedge *DebugHedge `json:"hedge"`
}

// DebugRetry summarises a retry policy.
type DebugRetry struct {
	// MaxAttempts is the most attempts a call makes, the first included:
	// the policy's maxAttempts under the client-side cap.
	MaxAttempts int `json:"maxAttempts"`
	// InitialBackoffMs is the first retry's backoff ceiling, in
	// milliseconds.
	InitialBackoffMs float64 `json:"initialBackoffMs"`
	// MaxBackoffMs bounds every backoff ceiling, in milliseconds.
	MaxBackoffMs float64 `json:"maxBackoffMs"`
	// BackoffMultiplier scales the ceiling from one retry to the next.
	BackoffMultiplier float64 `json:"backoffMultiplier"`
	// Jitter is how a delay is drawn below its ceiling: "full" or "equal".
	Jitter string `json:"jitter"`
	// RetryableCodes are the codes whose failures are retried, in wire
	// order ("BUSY", ...).
	RetryableCodes []string `json:"retryableCodes"`
}

// DebugHedge summarises a hedging policy.
type DebugHedge struct {
	// MaxAttempts is the most attempts a call sends, the first included:
	// the policy's maxAttempts under the client-side cap.
	MaxAttempts int `json:"maxAttempts"`
	// DelayMs is the hedging delay a call started now would use, in
	// milliseconds: the adaptive estimate with adaptiveDelay, else
	// HedgingDelayMs.
	DelayMs float64 `json:"delayMs"`
	// HedgingDelayMs is the policy's fixed hedgingDelay, in milliseconds
	// (with adaptiveDelay, the delay until enough latencies are seen).
	HedgingDelayMs float64 `json:"hedgingDelayMs"`
	// NonFatalCodes are the codes after which the next hedge is sent at
	// once, in wire order.
	NonFatalCodes []string `json:"nonFatalCodes"`
	// Adaptive is the adaptive delay's configuration and progress; null
	// for a fixed delay.
	Adaptive *DebugAdaptive `json:"adaptive"`
}

// DebugAdaptive is an adaptive hedging delay (the hedging policy's
// adaptiveDelay).
type DebugAdaptive struct {
	// Quantile is the quantile of recent first-attempt latencies used as
	// the delay.
	Quantile float64 `json:"quantile"`
	// Window is how many recent latencies the quantile is taken over.
	Window int `json:"window"`
	// FloorMs and CapMs bound the delay, in milliseconds.
	FloorMs float64 `json:"floorMs"`
	CapMs   float64 `json:"capMs"`
	// Samples is the number of first-attempt latencies observed so far.
	Samples int `json:"samples"`
	// Learned reports whether the delay comes from the latencies (at least
	// Window/10 observed) rather than from hedgingDelay.
	Learned bool `json:"learned"`
}

// Debug returns the Channel's live state (see DebugState). It is safe to
// call concurrently with calls and with itself, and cheap enough for a
// debug page: it holds the Channel's lock only to copy its maps, and each
// peer's, throttle's, estimator's and pacer's state is read with atomics or
// under its own lock for a few loads. The parts are read one after the
// other, not at one instant: under load, a peer's totals may be a few calls
// apart from its window's counts.
func (c *Channel) Debug() DebugState {
	now := c.o.clock.Now()
	type svcParts struct {
		list     *peer.List
		throttle *retry.Throttle
		methods  []methodDebug
	}
	parts := map[string]*svcParts{}
	part := func(s string) *svcParts {
		p := parts[s]
		if p == nil {
			p = &svcParts{}
			parts[s] = p
		}
		return p
	}
	c.mu.RLock()
	for s, l := range c.services {
		part(s).list = l
	}
	for s, t := range c.throttles {
		part(s).throttle = t
	}
	for k, p := range c.policies {
		sp := part(k.service)
		sp.methods = append(sp.methods, methodDebug{k.method, p})
	}
	c.mu.RUnlock()
	// gates and pacers are fixed at New.
	for s := range c.gates {
		part(s)
	}
	for s := range c.pacers {
		part(s)
	}

	st := DebugState{Service: c.name, Time: now.UTC(), Closed: c.closed.Load(), Services: make([]DebugService, 0, len(parts))}
	for name, p := range parts {
		ds := DebugService{Name: name, Peers: []DebugPeer{}, Methods: make([]DebugMethod, 0, len(p.methods))}
		if p.list != nil {
			for _, pr := range p.list.Peers() {
				ds.Peers = append(ds.Peers, debugPeer(pr, now))
			}
			sort.Slice(ds.Peers, func(i, j int) bool { return ds.Peers[i].HostPort < ds.Peers[j].HostPort })
		}
		if p.throttle != nil {
			ds.RetryThrottle = &DebugThrottle{Tokens: p.throttle.Tokens(), MaxTokens: p.throttle.MaxTokens(),
				RetriesAllowed: p.throttle.Allow()}
			if c.o.config != nil && c.o.config.RetryThrottling != nil {
				ds.RetryThrottle.TokenRatio = c.o.config.RetryThrottling.TokenRatio
			}
		}
		if g := c.gates[name]; g != nil {
			ds.Lease = debugLease(g)
		}
		if pc := c.pacers[name]; pc != nil {
			ds.Pacing = debugPacing(pc, p.methods, now)
		}
		for _, m := range p.methods {
			ds.Methods = append(ds.Methods, c.debugMethod(name, m))
		}
		sort.Slice(ds.Methods, func(i, j int) bool { return ds.Methods[i].Name < ds.Methods[j].Name })
		st.Services = append(st.Services, ds)
	}
	sort.Slice(st.Services, func(i, j int) bool { return st.Services[i].Name < st.Services[j].Name })
	return st
}

// methodDebug is a method's policy, copied out from under c.mu. A
// methodPolicy is immutable once built (but for its cached peer list).
type methodDebug struct {
	name string
	p    *methodPolicy
}

func debugPeer(p *peer.Peer, now time.Time) DebugPeer {
	cn := p.Counts()
	lim := p.Limiter()
	w := lim.SnapshotAt(now)
	lat := p.LatencyEstimateAt(now)
	dp := DebugPeer{
		HostPort: cn.HostPort, State: cn.State.String(), Pending: cn.Pending,
		Sent: cn.Sent, Busy: cn.Busy, Throttled: cn.Throttled,
		Limit: w.Limit, Ceiling: lim.Config().Ceiling,
		Window:  DebugWindow{Start: w.Start.UTC(), LengthMs: ms(w.Window), Allowed: w.Allowed, Busy: w.Busy},
		Latency: DebugLatency{MeanMs: ms(lat.Mean), Samples: lat.Samples, Fresh: lat.Fresh},
	}
	if !lat.Updated.IsZero() {
		u := lat.Updated.UTC()
		dp.Latency.Updated = &u
	}
	return dp
}

// capacityGate is a Gate that reports its capacity (leasing.RateLimiter).
type capacityGate interface{ Capacity() float64 }

func debugLease(g Gate) *DebugLease {
	dl := &DebugLease{Gate: fmt.Sprintf("%T", g)}
	cg, ok := g.(capacityGate)
	if !ok {
		return dl
	}
	switch v := cg.Capacity(); {
	case math.IsInf(v, 1):
		dl.Unlimited = true
	case !math.IsNaN(v) && !math.IsInf(v, -1):
		dl.Capacity = &v
	}
	return dl
}

func debugPacing(pc *pacer, methods []methodDebug, now time.Time) *DebugPacing {
	dp := &DebugPacing{Strategy: string(pc.cfg.Pacer.Strategy), SleepMs: ms(pc.pacer.Sleep()),
		MaxDelayMs: ms(pc.cfg.MaxDelay), Windows: []DebugPaceWindow{}}
	if dp.Strategy == "" {
		dp.Strategy = "null"
	}
	// Windows are recorded under the service's key or a method's, and
	// only by calls, so every method that may have one has a policy.
	keys := []string{pc.service}
	for _, m := range methods {
		if m.p.pacer == pc {
			keys = append(keys, m.p.paceKeys[1])
		}
	}
	for _, k := range keys {
		if d := pc.windows.Remaining(k); d > 0 {
			dp.Windows = append(dp.Windows, DebugPaceWindow{Key: k, RemainingMs: ms(d), Until: now.Add(d).UTC()})
		}
	}
	sort.Slice(dp.Windows, func(i, j int) bool { return dp.Windows[i].Key < dp.Windows[j].Key })
	return dp
}

func (c *Channel) debugMethod(service string, m methodDebug) DebugMethod {
	p := m.p
	dm := DebugMethod{Name: m.name, TimeoutMs: ms(p.timeout), WaitForReady: p.waitForReady}
	mc, _ := c.o.config.Lookup(service, m.name) // the config p was built from
	if p.retry != nil && mc != nil && mc.Retry != nil {
		b := mc.Retry.Backoff()
		dm.Retry = &DebugRetry{MaxAttempts: p.retry.MaxAttempts(), InitialBackoffMs: ms(b.Initial), MaxBackoffMs: ms(b.Max),
			BackoffMultiplier: b.Multiplier, Jitter: b.Jitter.String(), RetryableCodes: codeNames(mc.Retry.RetryableCodes)}
	}
	if p.hedge != nil && mc != nil && mc.Hedge != nil {
		h := mc.Hedge
		dm.Hedge = &DebugHedge{MaxAttempts: p.hedge.MaxAttempts(), DelayMs: ms(p.hedge.Delay()),
			HedgingDelayMs: ms(h.HedgingDelay), NonFatalCodes: codeNames(h.NonFatalCodes)}
		if a := h.Adaptive; a != nil && p.est != nil {
			n := p.est.Samples()
			dm.Hedge.Adaptive = &DebugAdaptive{Quantile: a.Quantile, Window: a.Window, FloorMs: ms(a.Floor), CapMs: ms(a.Cap),
				Samples: n, Learned: n >= max(1, a.Window/10)}
		}
	}
	return dm
}

func codeNames(s codes.Set) []string {
	out := []string{}
	for _, c := range s.Codes() {
		out = append(out, c.String())
	}
	return out
}

// ms converts d to float milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// DebugHandler returns an http.Handler that serves Debug's state as
// indented JSON (Content-Type application/json; the schema is DebugState's)
// to GET and HEAD requests, and answers any other method 405 Method Not
// Allowed. Mount it on a debug listener, not on a public one: it names every
// peer.
//
//	mux.Handle("/debug/sluice", ch.DebugHandler())
func (c *Channel) DebugHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "channel: the debug state is read with GET", http.StatusMethodNotAllowed)
			return
		}
		b, err := json.MarshalIndent(c.Debug(), "", "  ")
		if err != nil { // every value is finite, so this does not happen
			http.Error(w, "channel: debug state: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(append(b, '\n'))
	})
}
