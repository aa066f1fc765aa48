package channel

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/criticality"

	"github.com/sluice-rpc/sluice/backoff"
	"github.com/sluice-rpc/sluice/internal/config"
	"github.com/sluice-rpc/sluice/internal/hedgeexec"
	"github.com/sluice-rpc/sluice/internal/latency"
	"github.com/sluice-rpc/sluice/internal/peerlist"
	"github.com/sluice-rpc/sluice/internal/ratelimit"
	"github.com/sluice-rpc/sluice/internal/recorder"
	"github.com/sluice-rpc/sluice/internal/retryexec"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/sluice-rpc/sluice/serviceconfig"
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
// Each Client resolves its service's part when it is made (NewClient).
// Debug lists, per service, the configured names no call has used yet
// (channelz.Service.UnmatchedMethods). A method whose name differs from a
// configured one only in its "Service::" prefix is logged at Warn (see
// WithLogger), once per configured name, with the name the config should
// use: when the Client is made for the methods it names (WithMethods),
// else at the method's first call.
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

// namesExactly reports whether cfg has a method config naming method of
// service exactly, not through a whole-service or default entry. Such
// methods always get metric series of their own (as WithMethods' do);
// others only up to MaxMethodSeries, so that the methods a caller may
// name at will (a proxy's, say) cannot multiply the series. A name
// stands in one method config only (Parse and New refuse duplicates), so
// the config Lookup finds names it if any does.
func namesExactly(cfg *serviceconfig.Config, service, method string) bool {
	if method == "" {
		return false
	}
	mc, ok := cfg.Lookup(service, method)
	return ok && slices.Contains(mc.Names, serviceconfig.Name{Service: service, Method: method})
}

// nameHint returns the warning to log, once per configured name, when the
// service config names no method of the Client's service exactly but names
// one that differs from it only in a "Service::" prefix: a config naming
// "Get" for calls to "KeyValue::Get", the reverse, or "KV::Get" for
// "KeyValue::Get". It returns "" otherwise. Call it with cl.mu held; it
// runs when a method's policy is built (at NewClient for WithMethods'
// names, else at the method's first call), so it costs calls nothing, and
// it remembers at most the config's names.
func (cl *Client) nameHint(method string) string {
	c, service := cl.ch, cl.service
	cfg := c.o.config
	if cfg == nil || namesExactly(cfg, service, method) {
		return ""
	}
	_, bare, thrift := strings.Cut(method, "::")
	var configured []string
	if thrift && namesExactly(cfg, service, bare) {
		configured = append(configured, bare)
	}
	if !thrift {
		bare = method
	}
	for _, m := range c.prefixed[methodKey{service, bare}] {
		if m != method {
			configured = append(configured, m)
		}
	}
	policies := *cl.policies.Load()
	for _, m := range configured {
		if _, used := policies[m]; used || cl.hinted[m] {
			continue
		}
		cl.hinted[m] = true
		why := ""
		if thrift {
			why = " (a TChannel Thrift method is named \"Service::method\")"
		}
		return fmt.Sprintf("sluice: the service config names method %q of service %q, which no call has used yet; "+
			"calls are to %q%s: name it %q in the config for its policy to apply", m, service, method, why, method)
	}
	return ""
}

// RetryConfig shapes the retries and hedges of a Channel's calls, beyond
// what the service config's policies say (WithServiceConfig). The zero
// RetryConfig is the defaults: retries on, an inbound retry's calls not
// retried again, a cap of retry.MaxAttemptsCap attempts, the default retry
// budget and grpc-java's retry buffer.
type RetryConfig struct {
	// Disabled turns every retry and hedge off, transparent retries
	// included: each call makes exactly one attempt. For callers that retry
	// in a layer of their own.
	Disabled bool
	// Chained lets the Channel's calls retry and hedge as their policies
	// say even when they are made for an inbound request that is itself a
	// retry or hedge. By default such a call (one whose context is a
	// handler's, serving a call its Sluice client marked as a retry or
	// hedge) makes one attempt and no hedges, and needs the Client's retry
	// budget as a retry does: a failing service then sees one layer's
	// retries, not every layer's multiplied (docs/retries.md,
	// "Amplification across layers"). Set it for a layer that alone
	// retries.
	Chained bool
	// MaxAttemptsCap is the client-side cap on any policy's maxAttempts:
	// 1 allows no retry or hedge. Default (0): retry.MaxAttemptsCap (5).
	MaxAttemptsCap int
	// Budget is the retry budget of each of the Channel's Clients
	// (retry.BudgetConfig states the rule): by default the zero
	// BudgetConfig, retries and hedges within 20% of recent first attempts
	// with a floor of 10 per second. Budget.Disabled turns it off.
	Budget retry.BudgetConfig
	// BufferTotal and BufferPerCall bound the bytes of requests held for
	// possible retries: BufferTotal across all calls, BufferPerCall for
	// one. A call whose request does not fit is sent once, unretried. 0
	// means the default, grpc-java's: 16 MiB in total and 1 MiB per call
	// (or BufferTotal, if that is smaller). Both must be >= 0, and
	// BufferPerCall at most BufferTotal (16 MiB when BufferTotal is 0).
	BufferTotal, BufferPerCall int64
}

// Validate reports the first field that breaks its rule, in the order of
// the fields, as a *retry.FieldError, or nil.
func (r RetryConfig) Validate() error {
	const pkg = "channel"
	if r.MaxAttemptsCap < 0 {
		return config.Errorf(pkg, "RetryConfig.MaxAttemptsCap", r.MaxAttemptsCap, "must be >= 0 (0 means the default, retry.MaxAttemptsCap: %d)", retry.MaxAttemptsCap)
	}
	if err := r.Budget.Validate(); err != nil {
		return config.Nest(err, pkg, "RetryConfig.Budget")
	}
	d := retryexec.BufferConfig{Total: r.BufferTotal, PerCall: r.BufferPerCall}.WithDefaults()
	switch {
	case r.BufferTotal < 0:
		return config.Errorf(pkg, "RetryConfig.BufferTotal", r.BufferTotal, "must be >= 0 (0 means the default, %d)", retryexec.DefaultBufferSize)
	case r.BufferPerCall < 0:
		return config.Errorf(pkg, "RetryConfig.BufferPerCall", r.BufferPerCall, "must be >= 0 (0 means the default, %d, or BufferTotal if that is smaller)", retryexec.DefaultPerCallBufferLimit)
	case d.PerCall > d.Total:
		return config.Errorf(pkg, "RetryConfig.BufferPerCall", r.BufferPerCall, "must be at most BufferTotal (%d)", d.Total)
	}
	return nil
}

// WithRetries shapes the retries and hedges of the Channel's calls (see
// RetryConfig). Default: the zero RetryConfig. A later WithRetries
// replaces an earlier one whole: set every field you change in one
// RetryConfig.
func WithRetries(r RetryConfig) Option { return func(o *options) { o.retries = r } }

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

// WithLease gates every call of the Client on g before its attempts (see
// Gate). With an embedded Doorman client:
//
//	res, _ := client.Resource("kv-calls", leasing.ResourceConfig{Wants: 100})
//	kv, _ := ch.NewClient("kv", channel.WithLease(leasing.NewRateLimiter(res)))
//
// The gate's own metrics (capacity, wants, waits, refusals) are reported by
// the leasing.Client; the Channel counts a refused call under
// call.errors{code=RATE_LIMITED}.
func WithLease(g Gate) ClientOption {
	return func(o *clientOptions) { o.gate, o.gateSet = g, true }
}

// methodPolicy is how calls to one (service, method) run: built once from
// the service config and cached.
type methodPolicy struct {
	service, method string  // whose policy it is
	cl              *Client // whose calls it shapes

	retry *retryexec.Executor // nil when retries are disabled or a hedge applies
	hedge *hedgeexec.Executor
	est   *hedgeexec.Estimator // adaptive hedging delay, if configured
	// low is the method's expected latency, learnt from first attempts,
	// when its calls may send more than one: no retry or hedge goes out
	// with less time left (retryexec.Doomed).
	low     *latency.Low
	timeout time.Duration
	// waitForReady: calls wait for a ready peer even when every peer is in
	// transient failure (the service config's waitForReady).
	waitForReady bool
	// class is the class of the method's calls: the service config's,
	// else the Client's (WithCriticality), else 0 (see callClass).
	class   criticality.Class
	bucket  *retryexec.Throttle // the service's, for the tokens gauge
	m       *recorder.Method
	tokens  tally.Gauge
	backoff backoff.Exponential // the retry policy's, for throttle-aware waits

	// The Client's lease gate, pacer and peer list, kept here so that a
	// call looks them up once, with the policy.
	gate     Gate
	pacer    pacingState
	paceKeys [2]string // the pacer's window keys: service, then service::method
	list     *peerlist.List
	// shared: the policy of every unnamed method past MaxMethodSeries
	// (method is stats.MethodOther); a call computes its method's pacing
	// key itself.
	shared bool
	// once makes one attempt (and the transparent re-send of an early
	// decline): the executor of a call made for an inbound retry, when the
	// method may retry or hedge (mayRetry); else nil.
	once     *retryexec.Executor
	mayRetry bool
}

// wouldRetry reports whether the method's own policy would retry or hedge
// after the failed attempt o of a call of class cls, had the call not
// been made for an inbound retry: o was sent, and its code is one the
// policy retries, or one after which a hedge goes out at once (a
// sheddable call never hedges).
func (p *methodPolicy) wouldRetry(o retryexec.Outcome, cls criticality.Class) bool {
	switch {
	case o.Local:
		return false
	case p.hedge != nil:
		return cls != criticality.Sheddable && p.hedge.GoesOnAfter(o.Code)
	}
	return p.retry.Retries(o.Code)
}

// defaultBackoff shapes throttle-aware waits for methods without a retry
// policy (the wait only matters to hedges there).
var defaultBackoff = backoff.Exponential{Initial: 100 * time.Millisecond, Max: 10 * time.Second, Multiplier: 2}

type methodKey struct{ service, method string }

// MaxMethodSeries bounds, per Client, the methods its calls give metric
// series of their own (tag method) without being named: the first
// MaxMethodSeries distinct methods called get theirs, as they are first
// called; calls to any method after them are counted under the service's
// stats.MethodOther series. Methods named by WithMethods or exactly by the
// service config always get series of their own, and do not count against
// the bound. So a Client reports at most MaxMethodSeries methods beyond
// those it names, plus stats.MethodOther, whatever method names its
// callers use (a proxy's, say); and a Channel reports series only for the
// services it made Clients for.
//
// The server side is not concerned: it tags only the methods registered on
// it, so callers cannot make series there.
const MaxMethodSeries = 64

// retryThrottling returns the service config's retry throttling, or nil
// when there is none or retries are disabled.
func (c *Channel) retryThrottling() *retry.ThrottleConfig {
	if c.o.retries.Disabled || c.o.config == nil {
		return nil
	}
	return c.o.config.RetryThrottling
}

// buildPolicy builds the policy of cl's method; it runs with cl.mu held.
func (c *Channel) buildPolicy(cl *Client, method string) (*methodPolicy, error) {
	service := cl.service
	p := &methodPolicy{service: service, method: method, tokens: c.rec.RetryTokens(service), backoff: defaultBackoff,
		cl: cl, gate: cl.gate, pacer: cl.pacer, list: cl.list, bucket: cl.bucket, class: cl.class}
	if p.pacer != nil { // built once here, not per call: a method key allocates
		p.paceKeys = [2]string{ratelimit.ServiceKey(service), ratelimit.MethodKey(service, method)}
	}
	var mc *serviceconfig.MethodConfig
	if c.o.config != nil {
		mc, _ = c.o.config.Lookup(service, method)
	}
	if mc != nil {
		p.timeout, p.waitForReady = mc.Timeout, mc.WaitForReady
		if mc.Criticality != 0 {
			p.class = mc.Criticality
		}
	}
	if c.o.retries.Disabled {
		return p, nil
	}
	var err error
	switch {
	case mc != nil && mc.Hedge != nil:
		p.low = new(latency.Low)
		p.hedge, err = hedgeexec.NewExecutor(hedgeexec.ExecutorConfig{Policy: *mc.Hedge, MaxAttemptsCap: c.o.retries.MaxAttemptsCap,
			Throttle: p.bucket, Clock: c.o.clock, Latency: p.low})
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
			if pol.Attempts(c.o.retries.MaxAttemptsCap) > 1 {
				p.low = new(latency.Low)
			}
		}
		p.retry, err = retryexec.NewExecutor(retryexec.ExecutorConfig{Policy: pol, MaxAttemptsCap: c.o.retries.MaxAttemptsCap,
			Throttle: p.bucket, Buffer: c.buffer, Clock: c.o.clock, Rand: c.o.rand, Latency: p.low})
	}
	if err != nil {
		return nil, fmt.Errorf("channel: policy for %s::%s: %w", service, method, err)
	}
	if p.mayRetry = p.hedge != nil || p.retry.MaxAttempts() > 1; p.mayRetry {
		p.once, err = retryexec.NewExecutor(retryexec.ExecutorConfig{Throttle: p.bucket, Buffer: c.buffer, Clock: c.o.clock, Rand: c.o.rand})
		if err != nil {
			return nil, fmt.Errorf("channel: policy for %s::%s: %w", service, method, err)
		}
	}
	return p, nil
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
