package channel

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sluice-rpc/sluice/criticality"

	"github.com/sluice-rpc/sluice/discovery"
	"github.com/sluice-rpc/sluice/internal/peerlist"
	"github.com/sluice-rpc/sluice/internal/pool"
	"github.com/sluice-rpc/sluice/internal/retrybudget"
	"github.com/sluice-rpc/sluice/internal/retryexec"
	"github.com/sluice-rpc/sluice/peer"
	"github.com/sluice-rpc/sluice/stats"
)

// Client is a Channel's handle on one target service: the calls to it and
// everything that shapes them. Its peers (a resolver, or SetPeers), lease
// gate, pacing and named methods are given when it is made, and the
// service config's parts for it (retry throttling, balancing, the policies
// of its named methods) are resolved then, once: a call looks its method's
// policy up without a lock or a shared write. It is safe for concurrent
// use and cheap to keep: make one per target service and share it.
//
// A Channel has at most one Client per service name, so that a service's
// peers, budgets and metrics have one owner: NewClient for a service that
// has one is an error (ErrClientExists). Close releases the name.
type Client struct {
	ch      *Channel
	service string
	list    *peerlist.List      // its peers; a resolver's when res is set
	res     *resolved           // nil without a resolver
	gate    Gate                // WithLease's, or nil
	pacer   pacingState         // WithPacing's, or nil
	bucket  *retryexec.Throttle // the service config's retry throttling, or nil
	budget  *retrybudget.Budget // its retry budget (RetryConfig.Budget), or nil
	methods map[string]bool     // WithMethods
	class   criticality.Class   // WithCriticality's, or 0

	// policies maps a method to its policy, replaced whole (copy on
	// write) when a method is first called: calls read it with one atomic
	// load and a map lookup.
	policies atomic.Pointer[map[string]*methodPolicy]
	mu       sync.Mutex      // serialises building policies
	unnamed  int             // unnamed methods with series of their own (see MaxMethodSeries)
	other    *methodPolicy   // shared by the unnamed methods past MaxMethodSeries
	hinted   map[string]bool // configured names nameHint has logged

	closed atomic.Bool
	stop   chan struct{} // closed by Close: ends the resolver's goroutine
}

// ErrClientExists is returned by NewClient for a service that has a Client
// already.
var ErrClientExists = errors.New("the Channel has a Client for this service already; share it (a Client is safe for concurrent use) or Close it first")

// ClientOption configures a Client (NewClient).
type ClientOption func(*clientOptions)

type clientOptions struct {
	resolver discovery.Resolver
	// startResolver is WithResolver's: set there, also for a nil resolver
	// (an error NewClient reports), so that a program that resolves no
	// peers links no resolver machinery (TestBinarySize).
	startResolver func(cl *Client, r discovery.Resolver) error
	gate          Gate
	gateSet       bool
	pacing        *PacingConfig
	newPacer      func(c *Channel, service string, cfg PacingConfig) (pacingState, error) // WithPacing's
	methods       []string
	class         criticality.Class
}

// WithResolver has r find the Client's peers, and follow them as they
// come and go: each set r reports replaces the peers (see SetPeers), peers
// that stay keep their connection, busy limiter and latency estimate, and a
// removed peer gets no new attempts while its calls in flight finish, then
// its connection closes. A failing registry never empties the list: the
// last good set stays. Calls made before r's first answer wait for it,
// within their deadline. When a peer's connection fails, or no peer is
// ready, the Client asks r for a fresh lookup (discovery.Updates.ResolveNow).
// The resolver's state shows in Debug and in the discovery metrics
// (stats.DiscoveryUpdates, ...), tagged with the service.
//
// AddPeer, SetPeers and RemovePeer fail on such a Client: its peers are
// r's to change.
func WithResolver(r discovery.Resolver) ClientOption {
	return func(o *clientOptions) {
		o.resolver, o.startResolver = r, (*Client).startResolver
	}
}

// WithMethods names methods of the Client's service whose calls get metric
// series of their own (tag method) whenever they are called, besides the
// methods the service config names exactly. Calls to other methods get
// series of their own too, the first MaxMethodSeries of them; the rest are
// counted under stats.MethodOther. Naming a method pins its series: it
// does not count against MaxMethodSeries, and a method called late still
// gets its own. Its policy is built when the Client is made, and a name
// that differs from the service config's only in a "Service::" prefix is
// logged then (see WithServiceConfig).
func WithMethods(methods ...string) ClientOption {
	return func(o *clientOptions) { o.methods = append(o.methods, methods...) }
}

// WithCriticality sets the class of the Client's calls, where neither the
// call's context (criticality.WithClass) nor the method's service config
// sets one: a Client of a prefetch or batch service can make all its calls
// criticality.Sheddable. Without it a call carries the class of the
// inbound call whose handler makes it, or Critical.
func WithCriticality(c criticality.Class) ClientOption {
	return func(o *clientOptions) { o.class = c }
}

// NewClient returns the Channel's Client for target, the TChannel service
// name its servers serve under (the one place a Channel takes a service
// name, as grpc-go's NewClient takes its target). Options are validated;
// an invalid one is an error naming it, and nothing is started. Without
// WithResolver the Client has no peers until SetPeers or AddPeer gives it
// some: its calls fail NO_PEERS meanwhile.
func (c *Channel) NewClient(target string, opts ...ClientOption) (*Client, error) {
	service := target
	if service == "" {
		return nil, errors.New("channel: NewClient: the service name is empty; name the TChannel service to call")
	}
	if err := checkService(service); err != nil {
		return nil, fmt.Errorf("channel: NewClient: %w", err)
	}
	var o clientOptions
	for _, opt := range opts {
		opt(&o)
	}
	switch {
	case o.startResolver != nil && o.resolver == nil:
		return nil, fmt.Errorf("channel: NewClient(%q): WithResolver is nil, must be a resolver", service)
	case o.gateSet && o.gate == nil:
		return nil, fmt.Errorf("channel: NewClient(%q): WithLease is nil, must be a Gate", service)
	case o.class != 0 && !o.class.Valid():
		return nil, fmt.Errorf("channel: NewClient(%q): WithCriticality(%v) names no class; use one of package criticality's four", service, o.class)
	}
	for _, m := range o.methods {
		if m == "" {
			return nil, fmt.Errorf("channel: NewClient(%q): WithMethods names an empty method", service)
		}
		if err := checkMethod(m); err != nil {
			return nil, fmt.Errorf("channel: NewClient(%q): WithMethods: %w", service, err)
		}
	}
	cl := &Client{ch: c, service: service, gate: o.gate, class: o.class, methods: map[string]bool{}, hinted: map[string]bool{},
		stop: make(chan struct{})}
	for _, m := range o.methods {
		cl.methods[m] = true
	}
	if o.pacing != nil {
		p, err := o.newPacer(c, service, *o.pacing)
		if err != nil {
			return nil, err
		}
		cl.pacer = p
	}
	if tc := c.retryThrottling(); tc != nil {
		t, err := retryexec.NewThrottle(*tc)
		if err != nil {
			return nil, fmt.Errorf("channel: retryThrottling: %w", err)
		}
		cl.bucket = t
	}
	if !c.o.retries.Disabled {
		// Validated by New.
		cl.budget, _ = retrybudget.New(c.o.retries.Budget)
	}
	l, err := peerlist.New(peerlist.Config{Service: service, Busy: c.o.busy, Clock: c.o.clock, Recorder: c.rec,
		Pool: c.pool, Resolving: o.resolver != nil, Balance: c.o.config.BalancingFor(service)})
	if err != nil {
		return nil, fmt.Errorf("channel: NewClient(%q): %w", service, err)
	}
	cl.list = l
	empty := map[string]*methodPolicy{}
	cl.policies.Store(&empty)

	c.mu.Lock()
	switch {
	case c.closed.Load():
		c.mu.Unlock()
		return nil, ErrClosed
	case c.clients[service] != nil:
		c.mu.Unlock()
		return nil, fmt.Errorf("channel: NewClient(%q): %w", service, ErrClientExists)
	}
	c.clients[service] = cl
	c.mu.Unlock()

	// The named methods' policies are resolved now, and the config's
	// naming mistakes they reveal are logged now, not at a first call.
	for _, m := range o.methods {
		if _, err := cl.addPolicy(m); err != nil {
			cl.Close()
			return nil, fmt.Errorf("channel: NewClient(%q): %w", service, err)
		}
	}
	if o.resolver != nil {
		if err := o.startResolver(cl, o.resolver); err != nil {
			cl.Close()
			return nil, err
		}
	}
	return cl, nil
}

// Service returns the TChannel service name the Client calls.
func (cl *Client) Service() string { return cl.service }

// AddPeer adds the peer at hostPort to the Client's peers. Adding a peer
// twice is harmless.
func (cl *Client) AddPeer(hostPort string) error {
	if err := cl.changeable("AddPeer " + hostPort); err != nil {
		return err
	}
	if err := peer.ValidateHostPort(hostPort); err != nil {
		return fmt.Errorf("channel: AddPeer: %w", err)
	}
	if _, err := cl.list.Add(hostPort); errors.Is(err, pool.ErrClosed) {
		return ErrClosed
	} else if err != nil {
		return fmt.Errorf("channel: AddPeer: %w", err)
	}
	return nil
}

// SetPeers makes the Client's peers exactly members, with their weights,
// in one change, as a resolver does: peers that stay keep their
// connections and counts, new ones start connecting, the others are
// removed once their calls finish. A weight is the peer's share relative
// to the others (0 means 1): a peer of weight 2 gets about twice the
// calls of a peer of weight 1. Every member is checked first; an invalid
// one changes nothing.
func (cl *Client) SetPeers(members []peer.Member) error {
	if err := cl.changeable("SetPeers"); err != nil {
		return err
	}
	if err := cl.list.Set(members); errors.Is(err, pool.ErrClosed) {
		return ErrClosed
	} else if err != nil {
		return fmt.Errorf("channel: SetPeers: %w", err)
	}
	return nil
}

// RemovePeer removes the peer at hostPort from the Client's peers. Calls in
// flight to it complete; then its connection closes, unless another Client
// of the Channel still has the peer.
func (cl *Client) RemovePeer(hostPort string) error {
	if err := cl.changeable("RemovePeer " + hostPort); err != nil {
		return err
	}
	if err := cl.list.Remove(hostPort); err != nil {
		return fmt.Errorf("channel: RemovePeer: %w", err)
	}
	return nil
}

// changeable returns why the Client's peers cannot be changed by hand
// (what names the change), or nil.
func (cl *Client) changeable(what string) error {
	if cl.closed.Load() || cl.ch.closed.Load() {
		return ErrClosed
	}
	if cl.res != nil {
		return fmt.Errorf("channel: %s: service %q's peers come from its resolver %s (WithResolver); change them there",
			what, cl.service, cl.res.watcher.State().Target)
	}
	return nil
}

// Peers returns the counts of the Client's peers, sorted by host:port.
// Their State says which can take calls now.
func (cl *Client) Peers() []peer.Counts {
	var out []peer.Counts
	for _, p := range cl.list.Peers() {
		out = append(out, p.Counts())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].HostPort < out[j].HostPort })
	return out
}

// Connect starts connecting every peer of the Client that has no
// connection yet (calls do the same on first use) and waits until none is
// connecting or ctx ends. It returns nil when every peer is ready;
// otherwise an error naming the peers that are not, which wraps
// ErrUnavailable when none is, and ErrNoPeers when it has no peers.
// Servers and tests use it to have connections in place before the first
// call; nothing requires it.
func (cl *Client) Connect(ctx context.Context) error {
	l, service := cl.list, cl.service
	if len(l.Peers()) == 0 {
		return fmt.Errorf("channel: Connect %s: %w", service, ErrNoPeers)
	}
	for {
		changed := l.Changed()
		l.Connect()
		var connecting, failed []string
		for _, p := range l.Peers() {
			switch p.State() {
			case peer.Idle, peer.Connecting:
				connecting = append(connecting, p.HostPort())
			case peer.TransientFailure, peer.Shutdown:
				failed = append(failed, p.HostPort())
			}
		}
		if len(connecting) == 0 {
			switch {
			case len(failed) == 0:
				return nil
			case len(failed) == len(l.Peers()):
				return fmt.Errorf("channel: Connect %s: %w (%s)", service, ErrUnavailable, strings.Join(failed, ", "))
			}
			return fmt.Errorf("channel: Connect %s: not connected to %s", service, strings.Join(failed, ", "))
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("channel: Connect %s: still connecting to %s: %w", service, strings.Join(connecting, ", "), ctx.Err())
		}
	}
}

// ShardHome returns the host:port of shard key's home among the Client's
// peers: where calls carrying key (WithShardKey) go while that peer is
// ready and within its bounded load. It is an error if the Client has no
// peers.
func (cl *Client) ShardHome(key string) (string, error) {
	p := cl.list.Home(key)
	if p == nil {
		return "", fmt.Errorf("channel: ShardHome: service %q has no peers", cl.service)
	}
	return p.HostPort(), nil
}

// Close ends the Client: its resolver stops, its peers are removed (each
// connection closes once its calls are done, unless another Client has the
// peer), and its calls made afterwards fail with ErrClosed, while calls in
// flight finish. The Channel's other Clients are not affected, and the
// service name is free for a new Client. Closing twice is harmless; the
// Channel's Close closes every Client.
func (cl *Client) Close() { cl.close(true) }

// close is Close; release frees the service name (the Channel's Close
// keeps its Clients, closed, so that their calls fail ErrClosed).
func (cl *Client) close(release bool) {
	if cl.closed.Swap(true) {
		return
	}
	close(cl.stop)
	if cl.res != nil {
		cl.res.watcher.Close()
		cl.res.done.Wait()
	}
	_ = cl.list.Set(nil) // the pool may be closed already: then so are the connections
	if !release {
		return
	}
	c := cl.ch
	c.mu.Lock()
	if c.clients[cl.service] == cl {
		delete(c.clients, cl.service)
	}
	c.mu.Unlock()
}

// client returns the Channel's Client for service, or nil.
func (c *Channel) client(service string) *Client {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.clients[service]
}

// clientList returns the Channel's Clients, sorted by service.
func (c *Channel) clientList() []*Client {
	c.mu.RLock()
	out := make([]*Client, 0, len(c.clients))
	for _, cl := range c.clients {
		out = append(out, cl)
	}
	c.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].service < out[j].service })
	return out
}

// policyFor returns the policy of method, building it on its first call.
// The lookup takes no lock and writes nothing shared.
func (cl *Client) policyFor(method string) (*methodPolicy, error) {
	if p := (*cl.policies.Load())[method]; p != nil {
		return p, nil
	}
	return cl.addPolicy(method)
}

// addPolicy builds method's policy unless a call has, and publishes it.
// An unnamed method past MaxMethodSeries gets the policy those methods
// share: the service config gives every method it does not name the same
// one, so only its series and pacing window are shared. It logs the
// service config's naming mistake the method reveals (see nameHint).
func (cl *Client) addPolicy(method string) (*methodPolicy, error) {
	c := cl.ch
	cl.mu.Lock()
	cur := *cl.policies.Load()
	if p := cur[method]; p != nil {
		cl.mu.Unlock()
		return p, nil
	}
	named := cl.methods[method] || namesExactly(c.o.config, cl.service, method)
	if !named && cl.unnamed >= MaxMethodSeries {
		if cl.other == nil {
			p, err := c.buildPolicy(cl, stats.MethodOther)
			if err != nil {
				cl.mu.Unlock()
				return nil, err
			}
			p.shared = true
			p.m = c.rec.Method(cl.service, stats.MethodOther)
			cl.other = p
		}
		cl.mu.Unlock()
		return cl.other, nil
	}
	p, err := c.buildPolicy(cl, method)
	if err != nil {
		cl.mu.Unlock()
		return nil, err
	}
	if !named {
		cl.unnamed++
	}
	p.m = c.rec.Method(cl.service, method)
	next := make(map[string]*methodPolicy, len(cur)+1)
	for k, v := range cur {
		next[k] = v
	}
	next[method] = p
	cl.policies.Store(&next)
	hint := cl.nameHint(method)
	cl.mu.Unlock()
	if hint != "" {
		c.warn(hint)
	}
	return p, nil
}

// namedSeries returns method if the service config or WithMethods names
// it (its calls always have series of their own), else stats.MethodOther.
func (cl *Client) namedSeries(method string) string {
	if cl.methods[method] || namesExactly(cl.ch.o.config, cl.service, method) {
		return method
	}
	return stats.MethodOther
}
