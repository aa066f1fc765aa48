package peerlist

import (
	"errors"
	"math"
	"sync/atomic"
	"time"

	"github.com/uber/tchannel-go"

	"github.com/sluice-rpc/sluice/busy"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/criticality"
	"github.com/sluice-rpc/sluice/internal/balancing"
	"github.com/sluice-rpc/sluice/internal/pool"
	"github.com/sluice-rpc/sluice/internal/recorder"
	"github.com/sluice-rpc/sluice/peer"
)

// Errors Choose returns besides peer.ErrThrottled, peer.ErrNoPeers and
// peer.ErrUnavailable: the call may wait for a change and choose again.
var (
	// ErrConnecting: no peer is Ready yet, but some are connecting: wait
	// on List.Changed and choose again.
	ErrConnecting = errors.New("no peer is connected yet; some are connecting")
	// ErrResolving: the list's peers come from a resolver that has not
	// answered yet: wait on List.Changed and choose again.
	ErrResolving = errors.New("no peers yet: the service's resolver has not answered")
)

// Peer is one host:port serving a service, with its busy limiter and the
// load and latency the chooser weighs.
type Peer struct {
	hostPort string
	conn     *pool.Conn // nil in a list without a pool: always Ready
	limiter  *busy.Limiter
	m        *recorder.Peer

	weight  atomic.Uint64 // math.Float64bits of the weight, > 0
	pending atomic.Int64
	latency atomic.Int64 // exponentially weighted moving average, nanoseconds
	learned atomic.Int64 // when latency was last updated, Unix nanoseconds
	// rest is the Critical calls' pushback rest: until it ends Choose
	// takes the peer for them only while it has fewer calls pending than
	// the rest's level.
	rest    restState
	samples atomic.Int64 // successful calls in the current estimate
	sent    atomic.Uint64
	busy    atomic.Uint64
	refused atomic.Uint64
	// cls is the busy state of the classes other than Critical, made the
	// first time it is needed (see class.go); nil until then.
	cls atomic.Pointer[classState]

	l *List // the list holding the peer: its balancing and ejection cap
	// queued: the peer is in its list's feed of changes (List.queue).
	queued atomic.Bool
	added  int64 // when it was added, Unix nanoseconds (Ready since, without a pool)

	// slow marks a peer whose latency estimate stands far above the
	// others' (see balancing.Slow): it is chosen only as a probe, once per
	// balancing.ProbeInterval (probedAt, Unix nanoseconds), and its estimate is the
	// latency of its latest probe.
	slow     atomic.Bool
	probedAt atomic.Int64

	errorsInRow  atomic.Int64  // UNEXPECTED and NETWORK answers in a row
	lastAnswer   atomic.Int32  // answerWorking or answerFailing: its last telling answer (answerNone: none since it was added or ejected)
	ejectedUntil atomic.Int64  // end of its ejection, Unix nanoseconds; 0: none
	ejections    atomic.Uint64 // times ejected
	ejectK       int           // the last ejection's multiplier; l.ejectMu
	ejectEnd     int64         // when the last ejection ends or ended; l.ejectMu

	loadState // its server's load reports (load.go)
}

// HostPort returns the peer's address.
func (p *Peer) HostPort() string { return p.hostPort }

// Weight returns the peer's weight, its share relative to the list's other
// peers as discovery reported it (1 unless List.Set said otherwise).
func (p *Peer) Weight() float64 { return math.Float64frombits(p.weight.Load()) }

// TChannel returns the tchannel-go peer that sends to this address (nil in
// lists without a pool).
func (p *Peer) TChannel() *tchannel.Peer {
	if p.conn == nil {
		return nil
	}
	return p.conn.TChannel()
}

// State returns the state of the peer's connection (always Ready in a list
// without a pool).
func (p *Peer) State() peer.State {
	if p.conn == nil {
		return peer.Ready
	}
	return p.conn.State()
}

// LastFailure returns why the peer's connection failed the last time, or
// nil if it never has (and always in a list without a pool). It is set
// before the peer enters TransientFailure, and kept once the peer is
// Ready again.
func (p *Peer) LastFailure() *pool.Failure {
	if p.conn == nil {
		return nil
	}
	return p.conn.Failure()
}

// Lost reports that an attempt found no usable connection to the peer
// although it was Ready: the peer stops being chosen until its connector
// has looked into it, and is Ready again at once if the connection is in
// fact fine.
func (p *Peer) Lost() {
	if p.conn != nil {
		p.conn.Lost()
	}
}

// ConnChanged tells the peer that its connection's State changed: it
// goes into its list's feed of changes (List.TakeChanged).
func (p *Peer) ConnChanged() { p.l.queue(p) }

// Limiter returns the peer's busy limiter.
func (p *Peer) Limiter() *busy.Limiter { return p.limiter }

// Pending returns the number of attempts claimed for the peer (see Claim:
// from the choice, just before they are sent) still waiting for a
// response.
func (p *Peer) Pending() int64 { return p.pending.Load() }

// Latency returns the peer's latency estimate (0 until a call completes).
func (p *Peer) Latency() time.Duration { return time.Duration(p.latency.Load()) }

// Claim counts a call chosen for the peer as pending, before it is sent,
// so that the choices made meanwhile see it. Follow it with Sent when the
// attempt goes out, or Unclaim if it does not.
func (p *Peer) Claim() { p.pending.Add(1) }

// claimBelow claims a call for the peer if it has fewer than limit
// pending, and reports whether it did: the check and the count are one
// atomic step.
func (p *Peer) claimBelow(limit int64) bool {
	for n := p.pending.Load(); n < limit; n = p.pending.Load() {
		if p.pending.CompareAndSwap(n, n+1) {
			return true
		}
	}
	return false
}

// Unclaim gives back a claim whose attempt was never sent (its connection
// closed before it could be): it counts nothing against the peer.
func (p *Peer) Unclaim() { p.pending.Add(-1) }

// Sent records that a claimed attempt went out to the peer. Call End
// when it completes.
func (p *Peer) Sent() {
	p.sent.Add(1)
	if !p.m.Nop {
		p.m.Sent.Inc(1)
	}
}

// End records, at time now, the completion of an attempt Claim counted:
// its latency and its outcome code. A busy answer is told to the peer's
// limiter. Successful transports update the latency estimate, and so do
// attempts cut off (CANCELLED, TIMEOUT) after longer than the estimate;
// errors do not: a peer failing fast must not look fast.
func (p *Peer) End(now time.Time, latency time.Duration, code codes.Code) {
	p.end(now, latency, code, criticality.Critical, 0, 0)
}

// EndPushedBack is End for a Busy answer that carried a pushback hint
// asking to wait d > 0 (a Sluice server's load shedding sends one). The
// server said it is full: until the hint passes (at most the busy
// limiter's window), the peer takes no more calls at once than it had
// pending when the answer came, so that new calls replace finished ones
// instead of adding to the server's queue. Choose passes it over while it
// is at that level, counting the requests it refuses as throttled; a
// client with nothing else pending rests the peer for d. Each such answer
// during the rest lowers the level again, and a rest without one ends at
// the hinted time. The level is checked when the peer is chosen and the
// call counted just after (Claim), so callers choosing at the same
// instant may each pass it: it is exceeded by at most that many.
//
// A Busy with no hint halves the peer's busy limit, as the design says;
// under sustained overload a shedding server answers Busy thousands of
// times a second, and halving per answer would cut the peer off entirely,
// then let it recover fourfold a second into the next flood. Resting the
// whole peer for the hint instead (tried first) left a server idle while
// its clients waited, then flooded it: with a server of twice its clients'
// offered load, goodput fell to 60-65% of the server's capacity.
//
// It is EndBusy for a Critical call; a Busy to a call of another class
// rests the peer only for that class and those below (see EndBusy).
func (p *Peer) EndPushedBack(now time.Time, latency, d time.Duration) {
	p.end(now, latency, codes.Busy, criticality.Critical, d, 0)
}

// pushedBack starts or extends rest r at time now, hinted to last d.
func (p *Peer) pushedBack(r *restState, now time.Time, d time.Duration) {
	// The level is what the server held when it refused, less what reached
	// it since; during a rest, a further refusal can only lower it. Two
	// answers racing may each apply their level; either is a level the
	// server refused at.
	level := max(p.pending.Load(), 0)
	if r.until.Load() > now.UnixNano() {
		level = min(level, r.pending.Load())
	}
	r.pending.Store(level)
	// At most one busy window: a hint of minutes (a server's "do not retry
	// this soon") must not cut the peer off.
	until := now.Add(min(d, p.limiter.Config().Window)).UnixNano()
	for old := r.until.Load(); until > old && !r.until.CompareAndSwap(old, until); old = r.until.Load() {
	}
}

// end records the end of an attempt of class cls at now; a Busy answer's
// pushback hint is rest (0: none) and the class it says its server
// refuses refusing (0: none).
func (p *Peer) end(now time.Time, latency time.Duration, code codes.Code, cls criticality.Class, rest time.Duration, refusing criticality.Class) {
	p.pending.Add(-1)
	switch code {
	case codes.Unexpected, codes.Network:
		if p.lastAnswer.Load() != answerFailing {
			p.lastAnswer.Store(answerFailing)
		}
		if n := p.errorsInRow.Add(1); p.l != nil && n >= int64(balancing.Ejection(p.l.bal.Ejection).Threshold()) {
			p.l.eject(p, now)
		}
	case codes.OK, codes.Busy, codes.BadRequest:
		// The peer answered as a working server does. A timeout, a
		// cancellation or a DECLINED (a server draining, or one that
		// declines everything) says nothing either way.
		if p.errorsInRow.Load() != 0 {
			p.errorsInRow.Store(0)
		}
		if p.lastAnswer.Load() != answerWorking {
			p.lastAnswer.Store(answerWorking)
			if p.l != nil {
				p.l.sharedUntil.Store(0) // a failure the peers shared may be over
			}
		}
	}
	if code == codes.Busy {
		p.busy.Add(1)
		p.m.Busy.Inc(1)
		switch {
		case p.limiter.Disabled():
		case cls == criticality.Critical && !refusing.Valid() && p.cls.Load() == nil:
			p.throttle(p.limiter, &p.rest, now, rest) // the common case, in short
		default:
			p.busyFor(now, cls, rest, refusing)
		}
	}
	if !p.m.Nop {
		p.m.Limit.Update(p.limiter.LimitAt(now))
	}
	switch code {
	case codes.OK:
	case codes.Cancelled, codes.Timeout:
		// An attempt cut off (a hedge won, or the deadline came) took at
		// least this long: a sample if it raises the estimate, so that a
		// peer whose every attempt loses to a hedge is still seen to be
		// slow. One cut off earlier says only that it took at least so
		// long: once the estimate rests on enough samples (a slow peer's
		// always does) it says nothing; before, it counts as a sample of
		// the estimate, lowering nothing. Else one early outlier (a 58 ms
		// cut-off under the race detector, the others at 50.5 ms) stood
		// above every later cut-off, the estimate never reached its
		// samples, and the peer was never judged (the fault suite's hedged
		// slow peer, 8% of first attempts in 1 run of 8).
		if old := p.latency.Load(); old != 0 && int64(latency) < old {
			if p.samples.Load() >= minLatencySamples {
				return
			}
			latency = time.Duration(old)
		}
	default:
		return
	}
	// The mean of the first samples, then an EWMA with weight 1/8: cheap,
	// and forgets a slow spell within dozens of calls. Averaging the first
	// ones alike keeps one slow first call (a new connection's, often the
	// slowest) from weighing two thirds of the estimate the peer is first
	// judged on, after minLatencySamples, as seeding an EWMA with it would.
	// A stale estimate restarts from this sample instead of being blended
	// with it. Races between concurrent updates lose a sample at worst.
	old := p.latency.Load()
	if p.slow.Load() {
		// A slow peer's estimate is its latest probe, trusted alone: the
		// next choice judges it against the others' (see List.look).
		p.latency.Store(int64(latency))
		p.samples.Store(minLatencySamples)
	} else if old == 0 || now.UnixNano()-p.learned.Load() > int64(latencyTTL) {
		p.latency.Store(int64(latency))
		p.samples.Store(1)
	} else {
		n := min(p.samples.Add(1), latencyWeight)
		p.latency.Store(old + (int64(latency)-old)/n)
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
	// latencyWeight: after this many samples, each new one weighs 1/8.
	latencyWeight = 8
)

// latencyAt returns the latency estimate if it counts at time now, else 0
// (unknown).
func (p *Peer) latencyAt(now time.Time) int64 {
	if now.UnixNano()-p.learned.Load() > int64(latencyTTL) || p.samples.Load() < minLatencySamples {
		return 0
	}
	return p.latency.Load()
}

// latencyAny returns the latency estimate whatever its age, if it rests
// on enough samples, else 0.
func (p *Peer) latencyAny() int64 {
	if p.samples.Load() < minLatencySamples {
		return 0
	}
	return p.latency.Load()
}

// freshIfNotSlow and knownIfNotSlow are latencyAt and latencyAny of a peer
// not marked slow, 0 for one that is: the references another peer is
// judged against.
func (p *Peer) freshIfNotSlow(now time.Time) int64 {
	if p.slow.Load() {
		return 0
	}
	return p.latencyAt(now)
}

func (p *Peer) knownIfNotSlow() int64 {
	if p.slow.Load() {
		return 0
	}
	return p.latencyAny()
}

// Counts returns the peer's totals.
func (p *Peer) Counts() peer.Counts {
	return p.CountsAt(p.l.clk.Now())
}

// CountsAt returns the peer's totals at time now (from the list's clock).
func (p *Peer) CountsAt(now time.Time) peer.Counts {
	c := peer.Counts{
		HostPort: p.hostPort, Sent: p.sent.Load(), Busy: p.busy.Load(),
		Throttled: p.refused.Load(), Pending: p.pending.Load(), Limit: p.limiter.Limit(),
		Latency: time.Duration(p.latency.Load()), State: p.State(),
		Weight: p.Weight(), Effective: p.l.effectiveWeight(p, now),
		Ejections: p.ejections.Load(), Slow: p.slow.Load(),
	}
	if u := p.ejectedUntil.Load(); u > now.UnixNano() {
		c.Ejected = time.Unix(0, u)
	}
	return c
}

// readyAt returns when the peer last became Ready from cold (its first
// connection, or one after a failure or the remote's close), Unix
// nanoseconds: when its slow start began. A peer without a pool counts
// from when it was added.
func (p *Peer) readyAt() int64 {
	if p.conn == nil {
		return p.added
	}
	return p.conn.ReadySince()
}
