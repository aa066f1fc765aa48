package tchconn

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/internal/tframe"
)

// Load reports (server to client, ConnID): a Sluice server tells its
// Sluice clients how loaded it is, after ordinary answers, so that they
// balance on it and refuse early what it would refuse. The pairs:
//
//	load.u    its utilisation in thousandths (0 idle, 1000 full; more
//	          is over its capacity)
//	load.qps  the calls it served a second (answered other than with a
//	          system error), all clients together
//	refusing  the highest criticality class it refuses wholesale (its
//	          digit, 1 sheddable to 4 critical_plus), 0 or absent: none
//
// A pair may be left out when the server does not know it. The server
// makes one report frame for all its connections at most every 100 ms
// (channel's loadInterval); a connection carries it after an answer,
// checking every loadEvery answers whether a newer one is out, so that a
// report costs a frame per connection per 100 ms at most, and nothing is
// allocated per answer.

// Keys of a load report.
const (
	keyLoadU    = "load.u"
	keyLoadQPS  = "load.qps"
	keyRefusing = "refusing"
)

// loadEvery is how many answers a connection writes between two looks
// for a newer load report.
const loadEvery = 8

// Load is a server's load report as a client reads it. Zero fields were
// not reported.
type Load struct {
	// Utilisation is in thousandths; HasUtilisation says whether it was
	// reported.
	Utilisation    int64
	HasUtilisation bool
	// QPS is the calls the server answered a second.
	QPS int64
	// Refusing is the highest criticality class the server refuses
	// (1-4), 0 for none.
	Refusing uint8
}

// AppendLoad appends the signal frame of load report l (ConnID) to dst.
func AppendLoad(dst []byte, l Load) []byte {
	var kvs [][2]string
	if l.HasUtilisation {
		kvs = append(kvs, [2]string{keyLoadU, strconv.FormatInt(max(l.Utilisation, 0), 10)})
	}
	kvs = append(kvs, [2]string{keyLoadQPS, strconv.FormatInt(max(l.QPS, 0), 10)},
		[2]string{keyRefusing, strconv.Itoa(int(l.Refusing))})
	return tframe.AppendSignal(dst, tframe.ConnID, kvs)
}

// LoadReporter returns the server's current load report: a frame made by
// AppendLoad, and its generation, which changes whenever the frame does.
// The frame is shared by every connection and must not change once
// returned. It is called on a connection's writer, with tchannel-go's
// write waiting: it must be quick and must not block.
type LoadReporter func() (gen uint64, frame []byte)

// ReportLoad has the Guard's signalled inbound connections carry fn's
// reports after their answers (nil: no reports).
func (g *Guard) ReportLoad(fn LoadReporter) {
	if fn == nil {
		g.loadReporter.Store(nil)
		return
	}
	g.loadReporter.Store(&fn)
}

// OnLoad has fn called with each load report a server sends on one of the
// Guard's outbound connections, on that connection's reader, with the
// target the connection was dialed for (see SetTarget): it must not
// block.
func (g *Guard) OnLoad(fn func(target string, l Load)) {
	if fn == nil {
		g.onLoad.Store(nil)
		return
	}
	g.onLoad.Store(&fn)
}

// Served returns the number of answers tchannel-go wrote on the Guard's
// inbound connections that were not system errors (Busy, Unexpected, ...):
// results and application errors, the work served. A load report's rate
// counts them, so that a server answering Busy does not look like one
// that serves more. An answer counts once its first frame is written,
// so a report never counts a Busy whose frame is still on its way.
func (g *Guard) Served() uint64 { return g.served.Load() }

// SetTarget records the host:port an outbound connection was dialed for,
// which load reports name (OnLoad). Call it before the connection is used.
func (c *Conn) SetTarget(hostPort string) { c.target = hostPort }

// LastLoad returns the last load report the server at the other end of
// an outbound connection sent, and whether it sent any.
func (c *Conn) LastLoad() (Load, bool) {
	p := c.lastLoad.Load()
	if p == nil {
		return Load{}, false
	}
	return *p, true
}

// afterAnswer is called with wmu held after an answer (a call response or
// an error frame) was written on a signalled inbound connection: every
// loadEvery answers it writes the server's load report, if it has a newer
// one than this connection carried.
func (c *Conn) afterAnswer() {
	if c.loadCount++; c.loadCount >= loadEvery {
		c.carryLoad()
	}
}

// carryLoad writes the server's load report if it has a newer one than
// this connection carried (afterAnswer; wmu held).
func (c *Conn) carryLoad() {
	c.loadCount = 0
	fn := c.g.loadReporter.Load()
	if fn == nil {
		return
	}
	gen, f := (*fn)()
	if gen == c.loadGen || len(f) == 0 {
		return
	}
	c.loadGen = gen
	c.writeOwn(f)
}

// ReadLoadPair reads a signal frame's pair into l if it is a load
// report's, and reports whether it is (tests and tools read reports so).
func ReadLoadPair(l *Load, k, v []byte) bool { return readLoad(l, k, v) }

// readLoad reads a load report's pair into l; it reports whether the key
// is one of a load report's.
func readLoad(l *Load, k, v []byte) bool {
	switch string(k) {
	case keyLoadU:
		l.Utilisation, l.HasUtilisation = parseUint(v), true
	case keyLoadQPS:
		l.QPS = parseUint(v)
	case keyRefusing:
		if n := parseUint(v); n <= 4 {
			l.Refusing = uint8(n)
		}
	default:
		return false
	}
	return true
}

// MinLoadGap is the shortest time between two load reports an outbound
// connection passes on: later ones are dropped. A Sluice server sends at
// most one a connection per 100 ms (channel's loadInterval), so an honest
// server's reports all pass; a hostile one that sends a report frame after
// every other frame costs its client one report per gap, not a pass over
// the peer list per frame.
const MinLoadGap = 50 * time.Millisecond

// gotLoad keeps a load report from the server and passes it on, unless
// one came less than MinLoadGap before.
func (c *Conn) gotLoad(l Load) {
	now := time.Now().UnixNano()
	if last := c.loadAt.Load(); last != 0 && now-last < int64(MinLoadGap) {
		return
	}
	c.loadAt.Store(now)
	c.lastLoad.Store(&l)
	if fn := c.g.onLoad.Load(); fn != nil && c.target != "" {
		(*fn)(c.target, l)
	}
}

// parseUint reads a decimal number of at most 12 digits; anything else is 0.
func parseUint(v []byte) int64 {
	if len(v) == 0 || len(v) > 12 {
		return 0
	}
	var n int64
	for _, b := range v {
		if b < '0' || b > '9' {
			return 0
		}
		n = n*10 + int64(b-'0')
	}
	return n
}

// loadState is a Conn's load-report state.
type loadState struct {
	loadCount int                  // inbound: answers since the last look (wmu)
	loadGen   uint64               // inbound: the generation last carried (wmu)
	target    string               // outbound: the host:port dialed
	lastLoad  atomic.Pointer[Load] // outbound: the last report read
	loadAt    atomic.Int64         // outbound: when it was read, Unix ns
}
