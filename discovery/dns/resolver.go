package dns

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/backoff"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/discovery"
)

// maxParallel bounds the lookups of SRV targets in flight at once: enough
// that a service of a few hundred instances resolves within one Timeout,
// few enough not to flood the DNS server.
const maxParallel = 8

// Resolver follows the A/AAAA or SRV records of one target; it is a
// discovery.Resolver. Make one with New. Its Resolve may run more than once,
// even at the same time: each call has its own timers.
type Resolver struct {
	cfg    Config // defaults applied
	target Target
	res    *net.Resolver
}

var _ discovery.Resolver = (*Resolver)(nil)

// New returns the Resolver of cfg.Target, or an error naming the field of
// cfg that breaks its rule (see Config.Validate).
func New(cfg Config) (*Resolver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	t, _ := ParseTarget(cfg.Target) // Validate parsed it
	cfg = cfg.withDefaults()
	res := cfg.Resolver
	switch {
	case res != nil:
	case t.Server != "":
		// PreferGo: the C library's resolver would not use Dial.
		res = &net.Resolver{PreferGo: true, Dial: dialer(t.Server)}
	default:
		// The system's choice of resolver, as net.DefaultResolver's.
		res = &net.Resolver{Dial: dialer("")}
	}
	return &Resolver{cfg: cfg, target: t, res: res}, nil
}

// dialer returns a net.Resolver's Dial that dials server, or when it is ""
// the server Go's resolver asks for (one of /etc/resolv.conf's), and closes
// the connection when the query's context ends. Go's resolver bounds a
// query by a deadline on its connection, /etc/resolv.conf's timeout, and
// does not watch the context: without the close, a lookup given up on
// (Timeout, or Resolve returning) would leave a goroutine reading until
// that deadline, and LookupSRV would not return before it.
func dialer(server string) func(ctx context.Context, network, address string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		if server != "" {
			address = server
		}
		c, err := d.DialContext(ctx, network, address)
		if err != nil {
			return nil, err
		}
		// c itself is returned, not a wrapper: Go's resolver speaks UDP's
		// framing only to a net.PacketConn. The query's context ends when
		// the query does, so the close also comes after a normal one, on a
		// connection already closed: harmless.
		context.AfterFunc(ctx, func() { c.Close() })
		return c, nil
	}
}

// String returns the target in its canonical form (Target.String).
func (r *Resolver) String() string { return r.target.String() }

// Resolve looks the target up at once, then Config.Period after each
// lookup ended, and when u.ResolveNow asks (no sooner than
// Config.MinInterval after the last lookup ended), reporting each result to
// u (see the package doc). After a lookup that found no set (SERVFAIL, a
// timeout, no such name) the next comes sooner: MinInterval after it, then
// twice as long after each failure in a row, up to Period, so that a
// failure at start-up does not leave a service without peers for a whole
// Period. It returns when ctx ends, with every lookup and
// timer it started ended; a lookup cut short by ctx is not reported.
func (r *Resolver) Resolve(ctx context.Context, u discovery.Updates) {
	clk := r.cfg.Clock
	resolveNow := u.ResolveNow()
	retry := backoff.Exponential{Initial: r.cfg.MinInterval, Max: r.cfg.Period, Multiplier: 2}
	failures := 0
	for {
		if r.lookup(ctx, u) {
			failures = 0
		} else {
			failures++
		}
		if ctx.Err() != nil {
			return
		}
		last := clk.Now()
		next := r.cfg.Period
		if failures > 0 {
			next = retry.Ceiling(failures)
		}
		period := clk.NewTimerAt(last.Add(next))
		var soon clock.Timer // the lookup ResolveNow asked for, once armed
		var soonC <-chan time.Time
		stop := func() {
			period.Stop()
			if soon != nil {
				soon.Stop()
			}
		}
	wait:
		for {
			select {
			case <-ctx.Done():
				stop()
				return
			case <-period.C():
				break wait
			case <-soonC:
				break wait
			case <-resolveNow:
				switch {
				case soonC != nil:
					// The lookup already due will answer this request too.
				case clk.Since(last) >= r.cfg.MinInterval:
					break wait
				default:
					soon = clk.NewTimerAt(last.Add(r.cfg.MinInterval))
					soonC = soon.C()
				}
			}
		}
		// Stopped before the lookup, so that a test seeing the lookup's
		// report and then a pending timer knows it is the next period's.
		stop()
	}
}

// result is one lookup's outcome: when ok, addrs is the set to report (nil
// for an empty one); err, if not nil, is reported after it, or alone when
// the lookup found no set.
type result struct {
	addrs []discovery.Address
	ok    bool
	err   error
}

// lookup does one lookup within Config.Timeout and reports it to u, unless
// ctx ended meanwhile; it returns whether it found a set.
func (r *Resolver) lookup(ctx context.Context, u discovery.Updates) bool {
	lctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	var res result
	if r.target.SRV() {
		res = r.lookupSRV(lctx)
	} else {
		res = r.lookupHost(lctx)
	}
	if ctx.Err() != nil {
		return false // Resolve is ending; its caller no longer listens
	}
	if res.ok {
		u.Update(res.addrs)
	}
	if res.err != nil {
		u.Error(res.err)
	}
	return res.ok
}

func (r *Resolver) lookupHost(ctx context.Context) result {
	ips, err := r.res.LookupIPAddr(ctx, r.target.Host)
	if err != nil {
		return result{err: r.lookupError("A/AAAA records", err)}
	}
	if len(ips) > r.cfg.MaxPeers {
		return result{err: r.overCap(fmt.Sprintf("the A/AAAA answer has %d addresses", len(ips)))}
	}
	addrs := make([]discovery.Address, 0, len(ips))
	for _, ip := range ips {
		addrs = append(addrs, discovery.Address{HostPort: hostPort(ip, r.target.Port)})
	}
	sortAddrs(addrs)
	return result{addrs: addrs, ok: true}
}

func (r *Resolver) lookupSRV(ctx context.Context) result {
	_, srvs, err := r.res.LookupSRV(ctx, "", "", r.target.Host)
	var partial error
	if err != nil {
		if len(srvs) == 0 {
			return result{err: r.lookupError("SRV records", err)}
		}
		// Go left out records with invalid names and kept the others.
		partial = r.lookupError("SRV records (some left out)", err)
	}
	// The lowest priority's records, but for "." (no service here).
	var recs []*net.SRV
	for _, s := range srvs {
		switch {
		case s.Target == ".":
		case len(recs) == 0 || s.Priority < recs[0].Priority:
			recs = append(recs[:0], s)
		case s.Priority == recs[0].Priority:
			recs = append(recs, s)
		}
	}
	if len(recs) == 0 {
		return result{ok: true, err: partial}
	}

	if len(recs) > r.cfg.MaxPeers {
		// Each record is at least one peer.
		return result{err: r.overCap(fmt.Sprintf("the SRV answer has %d records", len(recs)))}
	}
	names := make([]string, 0, len(recs))
	for _, s := range recs {
		names = append(names, s.Target)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	// refs[i] is the number of records naming names[i]: each of its
	// addresses is that many peers.
	refs := make([]int, len(names))
	for _, s := range recs {
		i, _ := slices.BinarySearch(names, s.Target)
		refs[i]++
	}
	ips, errs, found := r.lookupTargets(ctx, names, refs)
	if found > r.cfg.MaxPeers {
		return result{err: r.overCap(fmt.Sprintf("the SRV answer's %d records and their targets' addresses make at least %d peers (counted when the lookups stopped)",
			len(recs), found))}
	}
	var missing []string
	var firstMissing error
	for i, name := range names {
		switch err := errs[i]; {
		case err == nil:
		case isNotFound(err):
			// The instance is gone (or not yet there) while the SRV
			// records still list it: leave it out, and say so.
			missing = append(missing, name)
			if firstMissing == nil {
				firstMissing = err
			}
		default:
			// The DNS server is in trouble: a smaller set would be a
			// guess, so report none.
			return result{err: r.lookupError("the address of SRV target "+name, err)}
		}
	}

	var addrs []discovery.Address
	for _, s := range recs {
		i, _ := slices.BinarySearch(names, s.Target)
		for _, ip := range ips[i] {
			addrs = append(addrs, discovery.Address{
				HostPort: hostPort(ip, strconv.Itoa(int(s.Port))),
				Weight:   float64(s.Weight),
				Metadata: map[string]any{"target": s.Target},
			})
		}
	}
	if len(missing) > 0 {
		more := ""
		if len(missing) > 1 {
			more = fmt.Sprintf(" (and %d more: %v)", len(missing)-1, missing[1:])
		}
		if len(addrs) == 0 {
			return result{err: fmt.Errorf("%w%s; none of the %d SRV targets has an address", r.lookupError("the address of SRV target "+missing[0], firstMissing), more, len(names))}
		}
		partial = errors.Join(partial, fmt.Errorf("%w%s; left out of the set, which has the other %d targets' %d peers",
			r.lookupError("the address of SRV target "+missing[0], firstMissing), more, len(names)-len(missing), len(addrs)))
	}
	sortAddrs(addrs)
	return result{addrs: addrs, ok: true, err: partial}
}

// lookupTargets looks up the addresses of names, at most maxParallel at
// once, and returns when every lookup has, with the number of peers found
// (names[i]'s addresses count refs[i] times each). Once that number is over
// MaxPeers it starts no lookup and cancels those in flight: the caller
// reports the cap, and what was found is dropped.
func (r *Resolver) lookupTargets(ctx context.Context, names []string, refs []int) ([][]net.IPAddr, []error, int) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ips := make([][]net.IPAddr, len(names))
	errs := make([]error, len(names))
	var next, found atomic.Int64
	limit := int64(r.cfg.MaxPeers)
	var wg sync.WaitGroup
	for range min(maxParallel, len(names)) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(names) && found.Load() <= limit; i = int(next.Add(1) - 1) {
				ips[i], errs[i] = r.res.LookupIPAddr(ctx, names[i])
				if found.Add(int64(len(ips[i])*refs[i])) > limit {
					cancel()
				}
			}
		})
	}
	wg.Wait()
	return ips, errs, int(found.Load())
}

// overCap is the error of a lookup whose answer (what) makes more peers
// than MaxPeers.
func (r *Resolver) overCap(what string) error {
	return fmt.Errorf("%w: %s: %s, more than Config.MaxPeers (%d); no set reported, the last good one stays",
		ErrOverCap, r.target, what, r.cfg.MaxPeers)
}

// ErrOverCap is the error a lookup reports (wrapped, with the target and
// the numbers) when its answer makes more peers than Config.MaxPeers.
var ErrOverCap = errors.New("dns: the answer is over the cap on peers")

// lookupError describes a failed lookup of what: the target, the cause,
// and what to check. It wraps the resolver's error (a *net.DNSError as a
// rule; errors.As finds it).
func (r *Resolver) lookupError(what string, err error) error {
	var de *net.DNSError
	if !errors.As(err, &de) {
		return fmt.Errorf("dns: %s: %s: %w", r.target, what, err)
	}
	if r.target.Server != "" {
		// Go names the server of /etc/resolv.conf that it meant to ask;
		// serverResolver asked the target's.
		c := *de
		c.Server = r.target.Server
		de = &c
	}
	var hint string
	switch {
	case de.IsNotFound:
		hint = "no such name, or no records of that type under it, which Go's resolver does not tell apart; check the name"
	case de.IsTimeout || errors.Is(err, context.DeadlineExceeded):
		hint = fmt.Sprintf("no answer within %v; check that the DNS server is up and reachable, or raise Config.Timeout", r.cfg.Timeout)
	case de.IsTemporary:
		hint = "SERVFAIL, or the DNS server could not be reached; it may be overloaded, or unable to reach the zone's own servers"
	default:
		hint = "the DNS server's answer is unusable; check its configuration"
	}
	return fmt.Errorf("dns: %s: %s: %w (%s)", r.target, what, de, hint)
}

func isNotFound(err error) bool {
	var de *net.DNSError
	return errors.As(err, &de) && de.IsNotFound
}

// hostPort returns ip:port, IPv6 as [ip]:port, with the zone of a
// link-local address kept.
func hostPort(ip net.IPAddr, port string) string {
	h := ip.IP.String()
	if ip.Zone != "" {
		h += "%" + ip.Zone
	}
	return net.JoinHostPort(h, port)
}

// sortAddrs sorts by host:port, and the same host:port by weight, highest
// first (the Channel's Client keeps the first of an address listed twice).
func sortAddrs(addrs []discovery.Address) {
	slices.SortFunc(addrs, func(a, b discovery.Address) int {
		return cmp.Or(cmp.Compare(a.HostPort, b.HostPort), cmp.Compare(b.Weight, a.Weight))
	})
}
