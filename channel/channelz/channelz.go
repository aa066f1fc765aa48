package channelz

import "time"

// State is a Channel's live state, as channel.Channel.Debug returns it and
// channel.Channel.DebugHandler serves it: per target service its peers
// (connection state, busy limit and the current window's counts, pending
// calls, latency estimate), its retry-throttling tokens, lease gate and
// pacing windows, and per method called so far its retry or hedging policy
// (hedge delay included). It is a copy taken at Time; it does not change
// afterwards.
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
//	    }],
//	    "unmatchedMethods": ["put"]
//	  }]
//	}
//
// Every value is finite: an unlimited lease is "unlimited": true with a
// null capacity.
type State struct {
	// Service is the name the Channel serves under and calls as.
	Service string `json:"service"`
	// Time is when the state was read, on the Channel's clock
	// (channel.WithClock).
	Time time.Time `json:"time"`
	// Closed reports whether the Channel's Close has been called.
	Closed bool `json:"closed"`
	// Phase is where the Channel is in its life as a server: "SERVING"
	// until Shutdown; "LEAVING" once Shutdown has deregistered it and
	// serves on while clients learn; "DRAINING" once it declines new
	// requests and waits for those in flight; "CLOSED" after Close.
	Phase string `json:"phase"`
	// Registrations are the Channel's registrations in a registry
	// (channel.WithRegistrar); empty without one, or before it listens.
	Registrations []Registration `json:"registrations"`
	// Services are the services the Channel has a Client for
	// (channel.Channel.NewClient), sorted by name, from the moment each
	// Client is made.
	Services []Service `json:"services"`
}

// Service is the state of one target service.
type Service struct {
	// Name is the service's name.
	Name string `json:"name"`
	// Peers are the service's peers, sorted by host:port; empty before the
	// first channel.Client.AddPeer or SetPeers or resolver answer, and
	// after the Client or its Channel is closed.
	Peers []Peer `json:"peers"`
	// Resolver is the state of the resolver that finds the service's
	// peers (channel.WithResolver); null without one.
	Resolver *Resolver `json:"resolver"`
	// RetryThrottle is the service's retry-throttling token bucket (the
	// service config's retryThrottling); null when there is none: no
	// retryThrottling, or retries disabled. The Client's NewClient makes it,
	// full.
	RetryThrottle *Throttle `json:"retryThrottle"`
	// Lease is the service's lease gate (channel.WithLease); null without
	// one.
	Lease *Lease `json:"lease"`
	// Pacing is the service's rate-limit pacing (channel.WithPacing); null
	// without it.
	Pacing *Pacing `json:"pacing"`
	// Methods are the methods called so far (each gets its policy on its
	// first call), sorted by name. Methods the service config names but
	// nobody has called yet are not listed: UnmatchedMethods are.
	Methods []Method `json:"methods"`
	// UnmatchedMethods are the method names the service config names for
	// this service exactly (a methodConfig name with a method) that no
	// call has used yet, sorted. A name still listed once the service's
	// calls have run usually means the config misspells it, and its
	// policy applies to nothing: a TChannel Thrift method is named
	// "Service::method" ("KeyValue::Get"), not by its bare name. Empty
	// without a service config.
	UnmatchedMethods []string `json:"unmatchedMethods"`
}

// Resolver is the state of a service's resolver.
type Resolver struct {
	// Target names what the resolver follows ("dns:///kv.example:4040").
	Target string `json:"target"`
	// Status is "RESOLVING" before its first answer, "OK" when its last
	// answer is the set in force, "FAILING" when its last report was a
	// failure (an error, or an empty answer): the last good set stays in
	// force until it answers again.
	Status string `json:"status"`
	// Peers is the number of peers in the set in force.
	Peers int `json:"peers"`
	// Updates counts the sets applied; LastUpdate is when the last was
	// (null: none yet).
	Updates    uint64     `json:"updates"`
	LastUpdate *time.Time `json:"lastUpdate"`
	// Errors counts the failures; LastError is the last one (null if
	// none), LastErrorTime when it happened.
	Errors        uint64     `json:"errors"`
	LastError     *string    `json:"lastError"`
	LastErrorTime *time.Time `json:"lastErrorTime"`
}

// Registration is the state of the Channel's address in a registry.
type Registration struct {
	// Registry names the registry and where in it the address is.
	Registry string `json:"registry"`
	// HostPort is the address registered.
	HostPort string `json:"hostPort"`
	// Registered reports whether the registry holds the address now, as
	// far as the registration knows.
	Registered bool `json:"registered"`
	// Lease names the registry's lease that keeps the address; null when
	// none is held.
	Lease *string `json:"lease"`
	// Registrations counts the writes of the address to the registry:
	// more than one means the registry lost it and it was written again.
	Registrations uint64 `json:"registrations"`
	// Deregistered reports whether the address was asked to be withdrawn
	// (Shutdown or Close); whether the registry did is Registered, and
	// LastError says why not.
	Deregistered bool `json:"deregistered"`
	// LastError is the last failure to register or renew (null if none),
	// LastErrorTime when it happened.
	LastError     *string    `json:"lastError"`
	LastErrorTime *time.Time `json:"lastErrorTime"`
}

// Peer is the state of one peer of a service.
type Peer struct {
	// HostPort is the peer's address.
	HostPort string `json:"hostPort"`
	// Weight is the peer's share relative to the service's other peers,
	// as discovery reported it (1 for peers added with AddPeer).
	Weight float64 `json:"weight"`
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
	// second unless channel.WithBusyConfig changed the window): at most
	// floor(Limit) attempts are sent to the peer in the current window.
	// Busy responses halve it at the next window, quiet windows let it
	// recover towards Ceiling.
	Limit float64 `json:"limit"`
	// Ceiling is the most Limit recovers to (the busy configuration's
	// Ceiling): a Limit below it means the peer answered Busy recently.
	Ceiling float64 `json:"ceiling"`
	// Window is the busy limiter's current window.
	Window Window `json:"window"`
	// Latency is the peer's latency estimate.
	Latency Latency `json:"latency"`
	// EffectiveWeight is the weight the chooser uses now: Weight, times
	// the slow-start factor while the peer ramps up after becoming ready.
	EffectiveWeight float64 `json:"effectiveWeight"`
	// Slow reports that the peer's latency stands far above the other
	// peers' (5 times, and 5 ms more): it gets a probe every 2 s and no
	// other calls, until a probe finds it recovered.
	Slow bool `json:"slow"`
	// Ejections is the number of times the peer was ejected for answering
	// UNEXPECTED or NETWORK errors too many times in a row.
	Ejections uint64 `json:"ejections"`
	// EjectedUntil is when the peer's ejection ends; absent when it is
	// not ejected. An ejected peer is not chosen (unless too few peers
	// are left: the panic threshold).
	EjectedUntil *time.Time `json:"ejectedUntil,omitempty"`
}

// ShardHome is where a shard key's calls go, as DebugHandler reports it
// for ?service=S&key=K.
type ShardHome struct {
	Service string `json:"service"`
	Key     string `json:"key"`
	// Home is the key's home: the peer its calls go to while that peer
	// is ready and within its bounded load; the next peers on the ring
	// take them otherwise.
	Home string `json:"home"`
}

// Window is a busy limiter's current counting window.
type Window struct {
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

// Latency is a peer's latency estimate.
type Latency struct {
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

// Throttle is a service's retry-throttling token bucket (gRPC's
// retryThrottling).
type Throttle struct {
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

// Lease is a service's lease gate.
type Lease struct {
	// Gate is the gate's Go type, such as "*leasing.RateLimiter".
	Gate string `json:"gate"`
	// Capacity is the capacity the gate admits now, in calls per second;
	// null when the gate does not report one (it has no
	// Capacity() float64 method) or it is unlimited.
	Capacity *float64 `json:"capacity"`
	// Unlimited reports that the gate's capacity is unlimited (+Inf).
	Unlimited bool `json:"unlimited"`
}

// Pacing is a service's rate-limit pacing.
type Pacing struct {
	// Strategy is the client rate throttling strategy, as package pacing
	// names it ("null" when none is configured).
	Strategy string `json:"strategy"`
	// SleepMs is the pacer's current sleep before each new call (without
	// jitter), in milliseconds.
	SleepMs float64 `json:"sleepMs"`
	// MaxDelayMs is the longest a call may wait for a throttling window,
	// in milliseconds (channel.PacingConfig.MaxDelay).
	MaxDelayMs float64 `json:"maxDelayMs"`
	// Windows are the throttling windows the servers announced that still
	// run, sorted by key: new calls to their service or method are held
	// back until they end.
	Windows []PaceWindow `json:"windows"`
}

// PaceWindow is a throttling window a server announced.
type PaceWindow struct {
	// Key is the throttled dimension: the service ("kv") or one method
	// ("kv::get").
	Key string `json:"key"`
	// RemainingMs is how long the window still runs, in milliseconds.
	RemainingMs float64 `json:"remainingMs"`
	// Until is when the window ends.
	Until time.Time `json:"until"`
}

// Method is how calls to one method of a service run. With neither a
// retry nor a hedging policy a call makes one attempt (plus a transparent
// retry of an attempt no server handled).
type Method struct {
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
	Retry *Retry `json:"retry"`
	// Hedge is the method's hedging policy; null without one (or with
	// retries disabled).
	Hedge *Hedge `json:"hedge"`
}

// Retry summarises a retry policy.
type Retry struct {
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

// Hedge summarises a hedging policy.
type Hedge struct {
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
	Adaptive *Adaptive `json:"adaptive"`
}

// Adaptive is an adaptive hedging delay (the hedging policy's
// adaptiveDelay).
type Adaptive struct {
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
