package channel

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/backoff"
	"github.com/sluice-rpc/sluice/hedge"
	"github.com/sluice-rpc/sluice/internal/peerlist"
	"github.com/sluice-rpc/sluice/pacing"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/sluice-rpc/sluice/serviceconfig"
	"github.com/sluice-rpc/sluice/stats"
	"github.com/uber-go/tally/v4"
)

// WithServiceConfig gives the Channel a service config (gRPC's shape, see
// package serviceconfig): per (service, method) a retry or hedging policy and
// a timeout, and per target service a retry-throttling bucket. Methods it
// does not name get no retries (transparent retries of attempts that never
// left the client still happen, as the retry design says).
//
// A config names methods as calls name them, the TChannel method name
// (arg1). For a Thrift call (package thrift) that is "Service::method",
// the Thrift service's name and the method's: {"service": "keyvalue",
// "method": "KeyValue::Get"}, where "keyvalue" is the TChannel service the
// servers register under; a config naming "Get" matches no Thrift call.
// Debug lists, per service, the configured names no call has used yet
// (channelz.Service.UnmatchedMethods), and the first call whose method
// differs from a configured name only in its "Service::" prefix logs,
// once per configured name, the name the config should use.
func WithServiceConfig(cfg *serviceconfig.Config) Option {
	return func(o *options) { o.config = cfg }
}

// prefixedNames indexes cfg's method names of the form "Service::method"
// by their service and the method after the prefix.
func prefixedNames(cfg *serviceconfig.Config) map[methodKey][]string {
	if cfg == nil {
		return nil
	}
	var m map[methodKey][]string
	for _, mc := range cfg.Methods {
		for _, n := range mc.Names {
			if _, bare, ok := strings.Cut(n.Method, "::"); ok {
				if m == nil {
					m = map[methodKey][]string{}
				}
				k := methodKey{n.Service, bare}
				m[k] = append(m[k], n.Method)
			}
		}
	}
	return m
}

// nameHint returns the warning to log, once per configured name, when the
// service config names no method k.method of k.service exactly but names
// one that differs from it only in a "Service::" prefix: a config naming
// "Get" for calls to "KeyValue::Get", the reverse, or "KV::Get" for
// "KeyValue::Get". It returns "" otherwise. Call it with c.mu held; it
// runs on a method's first call only (with its policy), so it costs calls
// nothing, and it remembers at most the config's names.
func (c *Channel) nameHint(k methodKey) string {
	cfg := c.o.config
	if cfg == nil || cfg.Names(k.service, k.method) {
		return ""
	}
	_, bare, thrift := strings.Cut(k.method, "::")
	var configured []string
	if thrift && cfg.Names(k.service, bare) {
		configured = append(configured, bare)
	}
	if !thrift {
		bare = k.method
	}
	for _, m := range c.prefixed[methodKey{k.service, bare}] {
		if m != k.method {
			configured = append(configured, m)
		}
	}
	for _, m := range configured {
		ck := methodKey{k.service, m}
		if _, used := c.policies[ck]; used || c.hinted[ck] {
			continue
		}
		c.hinted[ck] = true
		why := ""
		if thrift {
			why = " (a TChannel Thrift method is named \"Service::method\")"
		}
		return fmt.Sprintf("sluice: the service config names method %q of service %q, which no call has used yet; "+
			"calls are to %q%s: name it %q in the config for its policy to apply", m, k.service, k.method, why, k.method)
	}
	return ""
}

// WithRetriesDisabled turns every retry and hedge off, transparent retries
// included: each call makes exactly one attempt. For callers that retry in a
// layer of their own.
func WithRetriesDisabled() Option { return func(o *options) { o.noRetries = true } }

// WithMaxAttemptsCap sets the client-side cap on any policy's maxAttempts.
// Default retry.MaxAttemptsCap (5); it must be >= 1.
func WithMaxAttemptsCap(n int) Option { return func(o *options) { o.maxAttemptsCap = n } }

// WithRetryBuffer bounds the bytes of requests held for possible retries:
// total across all calls, and perCall for one. A call whose request does not
// fit is sent once, unretried. 0 means the default, as in
// retry.BufferConfig: retry.DefaultBufferSize and
// retry.DefaultPerCallBufferLimit.
func WithRetryBuffer(total, perCall int64) Option {
	return func(o *options) { o.bufTotal, o.bufPerCall = total, perCall }
}

// Gate admits calls to one service before any of their attempts is made:
// a leased rate (package leasing's RateLimiter, fed by an embedded Doorman
// client), or a quota of one's own. It is how leasing plugs into a Channel
// without the Channel depending on it.
type Gate interface {
	// Admit returns nil once the call may go ahead. It returns ctx's error
	// if ctx ends first, and any other error if the call is refused: such a
	// call fails with ErrRateLimited (and the Gate's error, both visible to
	// errors.Is) and sends nothing. Admit should leave the call time to run:
	// leasing.RateLimiter.Admit waits at most half the time left before
	// ctx's deadline and refuses at once an admission that would come later.
	// It is called concurrently.
	Admit(ctx context.Context) error
}

// WithLease gates every call to service on g before its attempts (see
// Gate). With an embedded Doorman client:
//
//	res, _ := client.Resource("kv-calls", leasing.ResourceConfig{Wants: 100})
//	ch, _ := channel.New("me", channel.WithLease("kv", leasing.NewRateLimiter(res)))
//
// The gate's own metrics (capacity, wants, waits, refusals) are reported by
// the leasing.Client; the Channel counts a refused call under
// call.errors{code=RATE_LIMITED}.
func WithLease(service string, g Gate) Option {
	return func(o *options) {
		if o.leases == nil {
			o.leases = map[string]Gate{}
		}
		o.leases[service] = g
	}
}

// methodPolicy is how calls to one (service, method) run: built once from
// the service config and cached.
type methodPolicy struct {
	service, method string // whose policy it is

	retry   *retry.Executor // nil when retries are disabled or a hedge applies
	hedge   *hedge.Executor
	est     *hedge.Estimator // adaptive hedging delay, if configured
	timeout time.Duration
	// waitForReady: calls wait for a ready peer even when every peer is in
	// transient failure (the service config's waitForReady).
	waitForReady bool
	bucket       *retry.Throttle // the service's, for the tokens gauge
	m            *stats.Method
	tokens       tally.Gauge
	backoff      backoff.Exponential // the retry policy's, for throttle-aware waits

	// The service's lease gate and pacer (fixed at New) and peer list
	// (made by the first AddPeer, never removed), kept here so that a call
	// looks them up once, with the policy.
	gate     Gate
	pacer    *pacer
	paceKeys [2]string // the pacer's window keys: service, then service::method
	list     atomic.Pointer[peerlist.List]
}

// defaultBackoff shapes throttle-aware waits for methods without a retry
// policy (the wait only matters to hedges there).
var defaultBackoff = backoff.Exponential{Initial: 100 * time.Millisecond, Max: 10 * time.Second, Multiplier: 2}

type methodKey struct{ service, method string }

// policyFor returns the cached policy of service's method, building it on
// first use. The policy it returned last is at hand without the read lock
// and the map lookup (a hash of two strings), which cost every call more
// than a comparison: a client calls one method over and over more often
// than not. A call to another method replaces it, at the cost of one
// atomic store besides the lookup.
func (c *Channel) policyFor(service, method string) (*methodPolicy, error) {
	if p := c.lastPolicy.Load(); p != nil && p.method == method && p.service == service {
		return p, nil
	}
	k := methodKey{service, method}
	c.mu.RLock()
	p, ok := c.policies[k]
	c.mu.RUnlock()
	if !ok {
		var err error
		if p, err = c.addPolicy(k); err != nil {
			return nil, err
		}
	}
	c.lastPolicy.Store(p)
	return p, nil
}

// addPolicy builds the policy of k's method unless another call has, and
// caches it. It logs the service config's naming mistake the first call
// of a method reveals (see nameHint).
func (c *Channel) addPolicy(k methodKey) (*methodPolicy, error) {
	c.mu.Lock()
	if p, ok := c.policies[k]; ok {
		c.mu.Unlock()
		return p, nil
	}
	p, err := c.buildPolicy(k.service, k.method)
	if err != nil {
		c.mu.Unlock()
		return nil, err
	}
	p.m = c.rec.Method(k.service, c.seriesOf(k.service, k.method))
	c.policies[k] = p
	hint := c.nameHint(k)
	c.mu.Unlock()
	if hint != "" {
		c.tch.Logger().Warn(hint)
	}
	return p, nil
}

// forgetPolicies drops the cached policies of service, which has just got
// its peer list: they were built while its calls could only fail NO_PEERS,
// with every unnamed method tagged stats.MethodOther (see seriesOf), and
// are built again by the next calls. It runs with c.mu held.
func (c *Channel) forgetPolicies(service string) {
	for k := range c.policies {
		if k.service == service {
			delete(c.policies, k)
		}
	}
	if p := c.lastPolicy.Load(); p != nil && p.service == service {
		c.lastPolicy.Store(nil)
	}
}

// MaxMethodSeries bounds, per target service, the methods a client's calls
// give metric series of their own (tag method) without being named: the
// first MaxMethodSeries distinct methods called get theirs, as they are
// first called; calls to any method after them are counted under the
// service's stats.MethodOther series. Methods named by WithMethods or
// exactly by the service config always get series of their own, and do not
// count against the bound. Only services with a peer list (AddPeer,
// WithResolver) get series of unnamed methods: calls to any other service
// name fail NO_PEERS under stats.MethodOther. So a client reports at most
// MaxMethodSeries methods per service it calls beyond those it names, plus
// stats.MethodOther, whatever method and service names its callers use (a
// proxy's, say).
//
// The server side is not concerned: it tags only the methods registered on
// it, so callers cannot make series there.
const MaxMethodSeries = 64

// WithMethods names methods of service whose calls get metric series of
// their own (tag method) whenever they are called, besides the methods the
// service config names exactly. Calls to other methods get series of their
// own too, the first MaxMethodSeries of them per service; the rest are
// counted under stats.MethodOther. Naming a method pins its series: it
// does not count against MaxMethodSeries, and a method called late still
// gets its own.
func WithMethods(service string, methods ...string) Option {
	return func(o *options) {
		if o.methods == nil {
			o.methods = map[methodKey]bool{}
		}
		for _, m := range methods {
			o.methods[methodKey{service, m}] = true
		}
	}
}

// namedSeries returns method if the service config or WithMethods names
// it (its calls always have series of their own), else stats.MethodOther.
func (c *Channel) namedSeries(service, method string) string {
	if c.o.methods[methodKey{service, method}] || c.o.config.Names(service, method) {
		return method
	}
	return stats.MethodOther
}

// seriesOf returns the method tag of calls to service's method: its own
// name if it is named (namedSeries), or if service has a peer list and
// fewer than MaxMethodSeries unnamed methods of it have series of their
// own (it then counts as one); else stats.MethodOther. A service without
// a peer list (a name no AddPeer or resolver made) gets no series of its
// unnamed methods: its calls can only fail NO_PEERS, and its policies are
// built again once it has peers (forgetPolicies). It runs with c.mu held,
// once per policy built.
func (c *Channel) seriesOf(service, method string) string {
	if name := c.namedSeries(service, method); name != stats.MethodOther {
		return name
	}
	if c.services[service] == nil || c.unnamedSeries[service] >= MaxMethodSeries {
		return stats.MethodOther
	}
	if c.unnamedSeries == nil {
		c.unnamedSeries = map[string]int{}
	}
	c.unnamedSeries[service]++
	return method
}

// buildPolicy runs with c.mu held.
func (c *Channel) buildPolicy(service, method string) (*methodPolicy, error) {
	p := &methodPolicy{service: service, method: method, tokens: c.rec.RetryTokens(service), backoff: defaultBackoff,
		gate: c.gates[service], pacer: c.pacers[service]}
	if p.pacer != nil { // built once here, not per call: a method key allocates
		p.paceKeys = [2]string{pacing.ServiceKey(service), pacing.MethodKey(service, method)}
	}
	var mc *serviceconfig.MethodConfig
	if c.o.config != nil {
		mc, _ = c.o.config.Lookup(service, method)
	}
	if mc != nil {
		p.timeout, p.waitForReady = mc.Timeout, mc.WaitForReady
	}
	if c.o.noRetries {
		return p, nil
	}
	if c.o.config != nil {
		if tc := c.o.config.RetryThrottling; tc != nil {
			if p.bucket = c.throttles[service]; p.bucket == nil {
				t, err := retry.NewThrottle(*tc)
				if err != nil {
					return nil, fmt.Errorf("channel: retryThrottling: %w", err)
				}
				c.throttles[service] = t
				p.bucket = t
			}
		}
	}
	var err error
	switch {
	case mc != nil && mc.Hedge != nil:
		p.hedge, err = hedge.NewExecutor(hedge.ExecutorConfig{Policy: *mc.Hedge, MaxAttemptsCap: c.o.maxAttemptsCap,
			Throttle: p.bucket, Clock: c.o.clock})
		if err == nil {
			p.est = p.hedge.Estimator()
		}
	default:
		var pol *retry.Policy
		if mc != nil {
			pol = mc.Retry
		}
		if pol != nil {
			p.backoff = pol.Backoff()
		}
		p.retry, err = retry.NewExecutor(retry.ExecutorConfig{Policy: pol, MaxAttemptsCap: c.o.maxAttemptsCap,
			Throttle: p.bucket, Buffer: c.buffer, Clock: c.o.clock, Rand: c.o.rand})
	}
	if err != nil {
		return nil, fmt.Errorf("channel: policy for %s::%s: %w", service, method, err)
	}
	return p, nil
}

// peers returns the service's peer list, or nil while it has none.
func (p *methodPolicy) peers(c *Channel, service string) *peerlist.List {
	if l := p.list.Load(); l != nil {
		return l
	}
	l, _ := c.peerList(service, false)
	if l != nil {
		p.list.Store(l)
	}
	return l
}

// deadline bounds ctx by the method's timeout (the earlier deadline wins)
// or, without one, by the default timeout when ctx has no deadline. The
// CancelFunc is nil when ctx is returned as it is.
func (c *Channel) deadline(ctx context.Context, p *methodPolicy) (context.Context, context.CancelFunc) {
	if p.timeout > 0 {
		return context.WithTimeout(ctx, p.timeout)
	}
	return c.withDeadline(ctx)
}
