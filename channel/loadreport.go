package channel

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/criticality"
	"github.com/sluice-rpc/sluice/internal/shedlimit"
	"github.com/sluice-rpc/sluice/internal/tchconn"
)

// Load reports (docs/signals.md): a Sluice server tells its Sluice
// clients its utilisation, the calls it serves a second and the class it
// refuses, on the signal carrier after ordinary answers; its clients
// balance on the first two (peerlist.List.ReportLoad) and refuse early
// what the third names. Plain peers never see a report.

// loadInterval is how often a server makes a new load report: each
// signalled connection carries at most one report per loadInterval, after
// an answer.
const loadInterval = 100 * time.Millisecond

// WithUtilisation has the Channel's server report fn's figure as its
// utilisation to its Sluice clients: 0 idle, 1 at its capacity, averaged
// over recent time (a second or less), as gRPC's ORCA reports
// application utilisation. Clients weigh the server by the calls it
// answers a second over its utilisation, its capacity, so that servers of
// different sizes get shares in proportion to their capacities without
// configured weights. fn is called at most once per loadInterval, on a
// connection's writer: it must be quick and must not block. Without it,
// a server with a concurrency limit (ShedConfig.MaxInFlight, Adaptive)
// reports its requests in flight over that limit; a server with neither
// reports no utilisation, and its clients balance it as a plain peer.
func WithUtilisation(fn func() float64) Option {
	return func(o *options) { o.utilisation = fn }
}

// loadReports makes a server's load reports.
type loadReports struct {
	c  *Channel
	mu sync.Mutex // one refresh at a time; the others carry the last report
	// cur is the current report; refreshed, under mu, once older than
	// loadInterval.
	cur        atomic.Pointer[loadFrame]
	lastServed uint64
	lastAt     time.Time
}

// loadFrame is one report, shared by every connection.
type loadFrame struct {
	gen   uint64
	at    time.Time
	frame []byte
}

// startLoadReports has the Channel's server send load reports, when it
// knows a utilisation or a class it refuses, and its client side read
// them.
func (c *Channel) startLoadReports() {
	c.peers.g.OnLoad(c.gotLoad)
	if c.o.utilisation == nil && (c.shed == nil || !c.shed.limited()) {
		return
	}
	r := &loadReports{c: c, lastAt: time.Now(), lastServed: c.peers.g.Served()}
	r.cur.Store(&loadFrame{at: r.lastAt})
	c.loads = r
	c.peers.g.ReportLoad(r.report)
}

// report returns the current report, made again if it is older than
// loadInterval.
func (r *loadReports) report() (uint64, []byte) {
	cur := r.cur.Load()
	now := time.Now()
	if now.Sub(cur.at) < loadInterval || !r.mu.TryLock() {
		return cur.gen, cur.frame
	}
	defer r.mu.Unlock()
	if cur = r.cur.Load(); now.Sub(cur.at) < loadInterval {
		return cur.gen, cur.frame
	}
	// The calls served: answers written that were not system errors (a
	// Busy costs the server next to nothing: counted, a server shedding
	// would look bigger the more it sheds). Counting ended handlers less
	// error frames written had a Busy whose frame was still queued count
	// as served.
	served := r.c.peers.g.Served()
	var l tchconn.Load
	if el := now.Sub(r.lastAt).Seconds(); el > 0 {
		l.QPS = int64(math.Round(float64(served-r.lastServed) / el))
	}
	r.lastServed, r.lastAt = served, now
	if u, ok := r.c.utilisation(); ok {
		l.Utilisation, l.HasUtilisation = int64(math.Round(1000*u)), true
	}
	if r.c.shed != nil {
		l.Refusing = uint8(r.c.shed.refusing())
	}
	next := &loadFrame{gen: cur.gen + 1, at: now, frame: tchconn.AppendLoad(nil, l)}
	r.cur.Store(next)
	return next.gen, next.frame
}

// utilisation returns the server's utilisation to report, and whether it
// knows one: WithUtilisation's, else its requests in flight over its
// concurrency limit.
func (c *Channel) utilisation() (float64, bool) {
	if fn := c.o.utilisation; fn != nil {
		u := fn()
		if math.IsNaN(u) || u < 0 {
			return 0, false
		}
		return min(u, 60), true
	}
	if c.shed == nil {
		return 0, false
	}
	return c.shed.utilisation()
}

// gotLoad hands a load report from the server at hostPort to the peer
// lists that hold it.
func (c *Channel) gotLoad(hostPort string, l tchconn.Load) {
	now := c.o.clock.Now()
	c.mu.Lock()
	clients := make([]*Client, 0, len(c.clients))
	for _, cl := range c.clients {
		clients = append(clients, cl)
	}
	c.mu.Unlock()
	for _, cl := range clients {
		cl.list.ReportLoad(hostPort, now, l.QPS, l.Utilisation, l.HasUtilisation, criticality.Class(l.Refusing))
	}
}

// track notes a method's adaptive limit, for the load reports.
func (s *shedder) track(l *shedlimit.Limiter) {
	if l == nil {
		return
	}
	s.lmu.Lock()
	s.methods = append(s.methods, l)
	s.lmu.Unlock()
}

// limited reports whether the shedder has a concurrency limit.
func (s *shedder) limited() bool { return s.inFlight != nil || s.cfg.Adaptive != nil }

// limiters returns the shedder's concurrency limits.
func (s *shedder) limiters() []*shedlimit.Limiter {
	s.lmu.Lock()
	ls := append([]*shedlimit.Limiter(nil), s.methods...)
	s.lmu.Unlock()
	for _, l := range [...]*shedlimit.Limiter{s.inFlight, s.shared} {
		if l != nil {
			ls = append(ls, l)
		}
	}
	return ls
}

// utilisation returns the requests in flight over the limit, the
// highest of the shedder's concurrency limits.
func (s *shedder) utilisation() (float64, bool) {
	u, ok := 0.0, false
	for _, l := range s.limiters() {
		if n := l.Limit(); n > 0 {
			u, ok = max(u, float64(l.InFlight())/float64(n)), true
		}
	}
	return u, ok
}

// refusing returns the highest class the shedder's limits refuse
// wholesale (0: none, and always when first come, first served).
func (s *shedder) refusing() criticality.Class {
	var c criticality.Class
	if s.cfg.FirstComeFirstServed {
		return 0
	}
	for _, l := range s.limiters() {
		c = max(c, l.Refusing())
	}
	return c
}
