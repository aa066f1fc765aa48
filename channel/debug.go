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
	clients := c.clientList()
	st := channelz.State{Service: c.name, Time: now.UTC(), Closed: c.closed.Load(), Services: make([]channelz.Service, 0, len(clients))}
	for _, cl := range clients {
		policies := *cl.policies.Load()
		methods := make([]methodDebug, 0, len(policies)+1)
		for m, p := range policies {
			methods = append(methods, methodDebug{m, p})
		}
		cl.mu.Lock()
		if cl.other != nil {
			methods = append(methods, methodDebug{cl.other.method, cl.other})
		}
		cl.mu.Unlock()
		ds := channelz.Service{Name: cl.service, Peers: []channelz.Peer{}, Methods: make([]channelz.Method, 0, len(methods)),
			UnmatchedMethods: []string{}}
		// A configured method is used once a call to it (or WithMethods)
		// has made its policy.
		if cfg := c.o.config; cfg != nil {
			for _, mc := range cfg.Methods {
				for _, n := range mc.Names {
					if _, used := policies[n.Method]; n.Service == cl.service && n.Method != "" && !used {
						ds.UnmatchedMethods = append(ds.UnmatchedMethods, n.Method)
					}
				}
			}
		}
		sort.Strings(ds.UnmatchedMethods)
		for _, pr := range cl.list.Peers() {
			ds.Peers = append(ds.Peers, debugPeer(pr, now))
		}
		sort.Slice(ds.Peers, func(i, j int) bool { return ds.Peers[i].HostPort < ds.Peers[j].HostPort })
		if t := cl.bucket; t != nil {
			ds.RetryThrottle = &channelz.Throttle{Tokens: t.Tokens(), MaxTokens: t.MaxTokens(),
				RetriesAllowed: t.Allow(), TokenRatio: c.o.config.RetryThrottling.TokenRatio}
		}
		if cl.gate != nil {
			ds.Lease = debugLease(cl.gate)
		}
		if cl.pacer != nil {
			ds.Pacing = cl.pacer.debug(methods, now)
		}
		for _, m := range methods {
			ds.Methods = append(ds.Methods, c.debugMethod(cl.service, m))
		}
		sort.Slice(ds.Methods, func(i, j int) bool { return ds.Methods[i].Name < ds.Methods[j].Name })
		st.Services = append(st.Services, ds)
	}
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

func (pc *pacer) debug(methods []methodDebug, now time.Time) *channelz.Pacing {
	dp := &channelz.Pacing{Strategy: string(pc.cfg.Pacer.Strategy), SleepMs: ms(pc.pacer.Sleep()),
		MaxDelayMs: ms(pc.cfg.MaxDelay), Windows: []channelz.PaceWindow{}}
	if dp.Strategy == "" {
		dp.Strategy = "null"
	}
	// Windows are recorded under the service's key or a method's, and
	// only by calls, so every method that may have one has a policy.
	keys := []string{pc.service}
	for _, m := range methods {
		if m.p.pacer == pacingState(pc) && !m.p.shared {
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
// or 404 if the Channel has no Client for S or it has no peers. Mount it on a debug listener, not on a public
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
			cl := c.client(q.Get("service"))
			if cl == nil {
				http.Error(w, fmt.Sprintf("channel: ShardHome: the Channel has no Client for service %q", q.Get("service")), http.StatusNotFound)
				return
			}
			home, err := cl.ShardHome(q.Get("key"))
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
