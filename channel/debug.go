package channel

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"sort"
	"time"

	"github.com/sluice-rpc/sluice/channel/channelz"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/peerlist"
	"github.com/sluice-rpc/sluice/retry"
)

// Debug returns the Channel's live state (see channelz.State). It is safe
// to call concurrently with calls and with itself, and cheap enough for a
// debug page: it holds the Channel's lock only to copy its maps, and each
// peer's, throttle's, estimator's and pacer's state is read with atomics or
// under its own lock for a few loads. The parts are read one after the
// other, not at one instant: under load, a peer's totals may be a few calls
// apart from its window's counts.
func (c *Channel) Debug() channelz.State {
	now := c.o.clock.Now()
	type svcParts struct {
		list      *peerlist.List
		throttle  *retry.Throttle
		methods   []methodDebug
		unmatched []string // configured method names no call has used
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
	// A method is used once a call to it has made its policy.
	if cfg := c.o.config; cfg != nil {
		for _, mc := range cfg.Methods {
			for _, n := range mc.Names {
				if _, used := c.policies[methodKey{n.Service, n.Method}]; n.Method != "" && !used {
					sp := part(n.Service)
					sp.unmatched = append(sp.unmatched, n.Method)
				}
			}
		}
	}
	c.mu.RUnlock()
	// gates and pacers are fixed at New.
	for s := range c.gates {
		part(s)
	}
	for s := range c.pacers {
		part(s)
	}

	st := channelz.State{Service: c.name, Time: now.UTC(), Closed: c.closed.Load(), Services: make([]channelz.Service, 0, len(parts))}
	for name, p := range parts {
		ds := channelz.Service{Name: name, Peers: []channelz.Peer{}, Methods: make([]channelz.Method, 0, len(p.methods)),
			UnmatchedMethods: append([]string{}, p.unmatched...)}
		sort.Strings(ds.UnmatchedMethods)
		if p.list != nil {
			for _, pr := range p.list.Peers() {
				ds.Peers = append(ds.Peers, debugPeer(pr, now))
			}
			sort.Slice(ds.Peers, func(i, j int) bool { return ds.Peers[i].HostPort < ds.Peers[j].HostPort })
		}
		if p.throttle != nil {
			ds.RetryThrottle = &channelz.Throttle{Tokens: p.throttle.Tokens(), MaxTokens: p.throttle.MaxTokens(),
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
	c.debugDiscovery(&st)
	return st
}

// methodDebug is a method's policy, copied out from under c.mu. A
// methodPolicy is immutable once built (but for its cached peer list).
type methodDebug struct {
	name string
	p    *methodPolicy
}

func debugPeer(p *peerlist.Peer, now time.Time) channelz.Peer {
	cn := p.CountsAt(now)
	lim := p.Limiter()
	w := lim.SnapshotAt(now)
	lat := p.LatencyEstimateAt(now)
	dp := channelz.Peer{
		HostPort: cn.HostPort, Weight: p.Weight(), State: cn.State.String(), Pending: cn.Pending,
		Sent: cn.Sent, Busy: cn.Busy, Throttled: cn.Throttled,
		Limit: w.Limit, Ceiling: lim.Config().Ceiling,
		Window:          channelz.Window{Start: w.Start.UTC(), LengthMs: ms(w.Window), Allowed: w.Allowed, Busy: w.Busy},
		Latency:         channelz.Latency{MeanMs: ms(lat.Mean), Samples: lat.Samples, Fresh: lat.Fresh},
		EffectiveWeight: cn.Effective, Slow: cn.Slow, Ejections: cn.Ejections,
	}
	if !cn.Ejected.IsZero() {
		u := cn.Ejected.UTC()
		dp.EjectedUntil = &u
	}
	if !lat.Updated.IsZero() {
		u := lat.Updated.UTC()
		dp.Latency.Updated = &u
	}
	return dp
}

// capacityGate is a Gate that reports its capacity (leasing.RateLimiter).
type capacityGate interface{ Capacity() float64 }

func debugLease(g Gate) *channelz.Lease {
	dl := &channelz.Lease{Gate: fmt.Sprintf("%T", g)}
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

func debugPacing(pc *pacer, methods []methodDebug, now time.Time) *channelz.Pacing {
	dp := &channelz.Pacing{Strategy: string(pc.cfg.Pacer.Strategy), SleepMs: ms(pc.pacer.Sleep()),
		MaxDelayMs: ms(pc.cfg.MaxDelay), Windows: []channelz.PaceWindow{}}
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
			dp.Windows = append(dp.Windows, channelz.PaceWindow{Key: k, RemainingMs: ms(d), Until: now.Add(d).UTC()})
		}
	}
	sort.Slice(dp.Windows, func(i, j int) bool { return dp.Windows[i].Key < dp.Windows[j].Key })
	return dp
}

func (c *Channel) debugMethod(service string, m methodDebug) channelz.Method {
	p := m.p
	dm := channelz.Method{Name: m.name, TimeoutMs: ms(p.timeout), WaitForReady: p.waitForReady}
	mc, _ := c.o.config.Lookup(service, m.name) // the config p was built from
	if p.retry != nil && mc != nil && mc.Retry != nil {
		b := mc.Retry.Backoff()
		dm.Retry = &channelz.Retry{MaxAttempts: p.retry.MaxAttempts(), InitialBackoffMs: ms(b.Initial), MaxBackoffMs: ms(b.Max),
			BackoffMultiplier: b.Multiplier, Jitter: b.Jitter.String(), RetryableCodes: codeNames(mc.Retry.RetryableCodes)}
	}
	if p.hedge != nil && mc != nil && mc.Hedge != nil {
		h := mc.Hedge
		dm.Hedge = &channelz.Hedge{MaxAttempts: p.hedge.MaxAttempts(), DelayMs: ms(p.hedge.Delay()),
			HedgingDelayMs: ms(h.HedgingDelay), NonFatalCodes: codeNames(h.NonFatalCodes)}
		if a := h.Adaptive; a != nil && p.est != nil {
			n := p.est.Samples()
			dm.Hedge.Adaptive = &channelz.Adaptive{Quantile: a.Quantile, Window: a.Window, FloorMs: ms(a.Floor), CapMs: ms(a.Cap),
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
// indented JSON (Content-Type application/json; the schema is
// channelz.State's) to GET and HEAD requests, and answers any other method
// 405 Method Not Allowed. With the query ?service=S&key=K it serves
// instead where shard key K's calls to service S go (channelz.ShardHome),
// or 404 if S has no peers. Mount it on a debug listener, not on a public
// one: it names every peer.
//
//	mux.Handle("/debug/sluice", ch.DebugHandler())
func (c *Channel) DebugHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "channel: the debug state is read with GET", http.StatusMethodNotAllowed)
			return
		}
		var v any = c.Debug()
		if q := r.URL.Query(); q.Has("key") || q.Has("service") {
			home, err := c.ShardHome(q.Get("service"), q.Get("key"))
			if err != nil {
				http.Error(w, err.Error(), http.StatusNotFound)
				return
			}
			v = channelz.ShardHome{Service: q.Get("service"), Key: q.Get("key"), Home: home}
		}
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil { // every value is finite, so this does not happen
			http.Error(w, "channel: debug state: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(append(b, '\n'))
	})
}

// ShardHome returns the host:port of shard key's home among service's
// peers: where calls carrying key (WithShardKey) go while that peer is
// ready and within its bounded load. It is an error if service has no
// peers.
func (c *Channel) ShardHome(service, key string) (string, error) {
	l, _ := c.peerList(service, false)
	if l == nil {
		return "", fmt.Errorf("channel: ShardHome: service %q has no peers", service)
	}
	p := l.Home(key)
	if p == nil {
		return "", fmt.Errorf("channel: ShardHome: service %q has no peers", service)
	}
	return p.HostPort(), nil
}
