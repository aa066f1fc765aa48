package peer

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/busy"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/stats"
	"github.com/uber/tchannel-go"
)

// Errors Choose returns. Neither means a request was sent.
var (
	// ErrThrottled: every peer's busy limiter refused the request after busy
	// responses. Back off, or let the limit recover (within a second or so).
	ErrThrottled = errors.New("every peer is throttled after busy responses; nothing was sent")
	// ErrNoPeers: the service has no peers. Add one first.
	ErrNoPeers = errors.New("no peers for the service; add a peer first")
)

// Peer is one host:port serving a service, with its busy limiter and the
// load and latency the chooser weighs.
type Peer struct {
	hostPort string
	tch      *tchannel.Peer
	limiter  *busy.Limiter
	m        *stats.Peer

	pending atomic.Int64
	latency atomic.Int64 // exponentially weighted moving average, nanoseconds
	learned atomic.Int64 // when latency was last updated, Unix nanoseconds
	samples atomic.Int64 // successful calls in the current estimate
	sent    atomic.Uint64
	busy    atomic.Uint64
	refused atomic.Uint64
}

// HostPort returns the peer's address.
func (p *Peer) HostPort() string { return p.hostPort }

// TChannel returns the tchannel-go peer that sends to this address (nil in
// lists built without a channel).
func (p *Peer) TChannel() *tchannel.Peer { return p.tch }

// Limiter returns the peer's busy limiter.
func (p *Peer) Limiter() *busy.Limiter { return p.limiter }

// Pending returns the number of calls sent to the peer still waiting for a
// response.
func (p *Peer) Pending() int64 { return p.pending.Load() }

// Latency returns the peer's latency estimate (0 until a call completes).
func (p *Peer) Latency() time.Duration { return time.Duration(p.latency.Load()) }

// Begin records that an attempt is being sent to the peer. Call End when it
// completes.
func (p *Peer) Begin() {
	p.pending.Add(1)
	p.sent.Add(1)
	p.m.Sent.Inc(1)
}

// End records, at time now, the completion of an attempt Begin counted:
// its latency and its outcome code. A busy answer is told to the peer's
// limiter. Only successful transports update the latency estimate: a peer
// failing fast must not look fast.
func (p *Peer) End(now time.Time, latency time.Duration, code codes.Code) {
	p.pending.Add(-1)
	if code == codes.Busy {
		p.busy.Add(1)
		p.m.Busy.Inc(1)
		p.limiter.RecordBusyAt(now)
	}
	p.m.Limit.Update(p.limiter.LimitAt(now))
	if code != codes.OK {
		return
	}
	// EWMA with weight 1/8: cheap, and forgets a slow spell within dozens of
	// calls. A stale estimate restarts from this sample instead of being
	// blended with it. Races between concurrent updates lose a sample at
	// worst.
	old := p.latency.Load()
	if old == 0 || now.UnixNano()-p.learned.Load() > int64(latencyTTL) {
		p.latency.Store(int64(latency))
		p.samples.Store(1)
	} else {
		p.latency.Store(old + (int64(latency)-old)/8)
		p.samples.Add(1)
	}
	p.learned.Store(now.UnixNano())
}

// A latency estimate steers peer choice only while it is fresh (updated
// within latencyTTL) and rests on at least minLatencySamples calls. A peer
// that looked slow is not chosen while others look faster, so its estimate
// would never be corrected: once stale it ties with the others, gets a few
// calls, and is judged again on fresh samples, not on one noisy call.
const (
	latencyTTL        = time.Second
	minLatencySamples = 4
)

// latencyAt returns the latency estimate if it counts at time now, else 0
// (unknown).
func (p *Peer) latencyAt(now time.Time) int64 {
	if now.UnixNano()-p.learned.Load() > int64(latencyTTL) || p.samples.Load() < minLatencySamples {
		return 0
	}
	return p.latency.Load()
}

// Counts are a peer's totals since it was added.
type Counts struct {
	HostPort  string
	Sent      uint64        // attempts sent
	Busy      uint64        // busy responses received
	Throttled uint64        // requests its limiter refused
	Pending   int64         // attempts awaiting a response
	Limit     float64       // busy limit in force now, requests per second
	Latency   time.Duration // latency estimate (0 until a call succeeds)
}

// Counts returns the peer's totals.
func (p *Peer) Counts() Counts {
	return Counts{
		HostPort: p.hostPort, Sent: p.sent.Load(), Busy: p.busy.Load(),
		Throttled: p.refused.Load(), Pending: p.pending.Load(), Limit: p.limiter.Limit(),
		Latency: time.Duration(p.latency.Load()),
	}
}

// ValidateHostPort checks that hostPort is host:port with a numeric port in
// 1..65535.
func ValidateHostPort(hostPort string) error {
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		return fmt.Errorf("peer: bad host:port %q: %v", hostPort, err)
	}
	if host == "" {
		return fmt.Errorf("peer: bad host:port %q: the host is empty", hostPort)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("peer: bad host:port %q: port must be a number in 1..65535", hostPort)
	}
	return nil
}
