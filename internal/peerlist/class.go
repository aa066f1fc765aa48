package peerlist

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/busy"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/criticality"
	"github.com/sluice-rpc/sluice/peer"
)

// A peer's busy throttling is per criticality class (package
// criticality): a Busy answered to a call of class k throttles the calls
// of class k and below to that peer, never those of a higher class, so
// that a server refusing sheddable calls does not get its critical calls
// throttled too. Each class has a busy limiter and a pushback rest, which
// take the Busy answers to calls of that class and above: the TChannel
// busy semantics (halve per busy, recover per window) for each.
//
// Critical, the default, keeps the peer's own limiter and rest, so that
// calls of the default class pay nothing for the others. The others' are
// made the first time a call of another class gets a Busy from the peer,
// or a Busy names a class its server refuses (classState): a peer that
// never sees either costs one nil pointer. Until then no Busy was
// answered but to Critical calls, so the Sheddable and SheddablePlus
// calls share Critical's limiter and rest (which took exactly the answers
// theirs would have), and CriticalPlus calls, which no answer has
// throttled, are held only by the limiter's ceiling (see allowPlus). The
// lower classes' limiters, once made, start from the ceiling: they
// forget the Critical answers of before, and learn from those after.
//
// A Busy answer may also name the highest class its server refuses at the
// moment (a Sluice server's class-aware shedding does): then the calls of
// that class and below are refused locally, never sent to the peer, for
// the answer's pushback hint (at most the busy window), or
// DefaultRefusal without one, each such answer setting it anew. Higher
// classes keep going.

// DefaultRefusal is how long the calls of a class a peer's server refuses
// are refused locally after a Busy that names it but gives no pushback
// hint: two of the adaptive shedder's windows (shed.DefaultWindow, 100
// ms), so that the server's limit has been decided again at least once
// before the class is sent to it again; short enough that a class the
// server takes again comes back within a fraction of a second (the
// refused calls cost it nothing meanwhile, and the next Busy refuses
// again at once).
const DefaultRefusal = 200 * time.Millisecond

// restState is a pushback rest (see Peer.EndPushedBack): when it ends,
// Unix nanoseconds (0: none), and the level of pending calls the peer is
// held to until then.
type restState struct {
	until   atomic.Int64
	pending atomic.Int64
}

// classState is a peer's busy state for the classes other than Critical
// (whose are the Peer's own), and the class its server refuses.
type classState struct {
	// lim and rest are the limiter and rest of Sheddable, SheddablePlus
	// and CriticalPlus (Critical's entries are unused).
	lim  [criticality.CriticalPlus + 1]*busy.Limiter
	rest [criticality.CriticalPlus + 1]restState
	// refusal is the refused class (low refusalBits bits) and until when,
	// in nanoseconds after origin (the rest): one word, so that a reader
	// never pairs one answer's class with another's end.
	refusal atomic.Uint64
	origin  int64 // Unix nanoseconds
}

// refusalBits holds a class in the packed refusal.
const refusalBits = 3

// classes returns p's classState, making it at time now if p has none.
func (p *Peer) classes(now time.Time) *classState {
	if cs := p.cls.Load(); cs != nil {
		return cs
	}
	cs := &classState{origin: now.UnixNano()}
	for _, c := range [...]criticality.Class{criticality.Sheddable, criticality.SheddablePlus, criticality.CriticalPlus} {
		// The Peer's limiter was made from the same configuration, which
		// was valid then.
		lim, err := busy.New(p.limiter.Config())
		if err != nil {
			panic(fmt.Sprintf("peerlist: a peer's busy configuration no longer valid: %v", err))
		}
		cs.lim[c] = lim
	}
	if !p.cls.CompareAndSwap(nil, cs) {
		return p.cls.Load() // another answer made it first
	}
	return cs
}

// refuses reports whether the peer's server refuses calls of class c at
// ns (Unix nanoseconds), as its latest Busy said.
func (cs *classState) refuses(ns int64, c criticality.Class) bool {
	v := cs.refusal.Load()
	return v != 0 && c <= criticality.Class(v&(1<<refusalBits-1)) && ns-cs.origin < int64(v>>refusalBits)
}

// refusing returns the class the peer's server refuses at ns (0: none).
func (cs *classState) refusing(ns int64) criticality.Class {
	if v := cs.refusal.Load(); v != 0 && ns-cs.origin < int64(v>>refusalBits) {
		return criticality.Class(v & (1<<refusalBits - 1))
	}
	return 0
}

// limits returns the limiter and rest a call of class c to p goes by (a
// nil rest: none).
func (p *Peer) limits(c criticality.Class) (*busy.Limiter, *restState) {
	if c == criticality.Critical {
		return p.limiter, &p.rest
	}
	if cs := p.cls.Load(); cs != nil && c.Valid() {
		return cs.lim[c], &cs.rest[c]
	}
	if c == criticality.CriticalPlus {
		return nil, nil // allowPlus
	}
	return p.limiter, &p.rest
}

// allowsClass reports whether p takes a call of class c other than
// Critical at now, counting it against the class's limiter if so; held
// is as for take.
func (p *Peer) allowsClass(now time.Time, c criticality.Class, held int64) bool {
	lim, r := p.limits(c)
	if r != nil && !p.restAllows(r, now.UnixNano(), c, held) {
		return false
	}
	if lim == nil {
		return p.allowPlus(now)
	}
	return lim.AllowAt(now)
}

// allowPlus is the limiter of a CriticalPlus call to a peer that no Busy
// has answered but Critical calls: Critical's limiter counts it, and
// when that limiter refuses, the call goes all the same unless the
// limiter's limit stands at its ceiling (the configured cap on requests
// per window, which binds every class): Busy answers to Critical calls
// lowered it, and they do not throttle a higher class.
func (p *Peer) allowPlus(now time.Time) bool {
	return p.limiter.AllowAt(now) || p.limiter.LimitAt(now) < p.limiter.Config().Ceiling
}

// restAllows reports whether a peer under rest r may take one more call
// of class c at ns: r is over, or the peer has fewer calls pending than
// its level (not counting held, the call's own claim: see take), and its
// server does not refuse c.
func (p *Peer) restAllows(r *restState, ns int64, c criticality.Class, held int64) bool {
	if u := r.until.Load(); u == 0 || ns >= u {
		return true
	}
	if cs := p.cls.Load(); cs != nil && cs.refuses(ns, c) {
		return false
	}
	return p.pending.Load()-held < r.pending.Load()
}

// EndBusy is End for a Busy answer to a call of class c (Critical if not
// valid): rest is the answer's pushback hint (0: none; see
// EndPushedBack), refusing the class its message says the server refuses
// (0: none). The answer throttles the calls of class c and below to the
// peer, and the refusal refuses those of class refusing and below until
// the hint passes (at most the busy window), or for DefaultRefusal
// without a hint. Nothing of it applies when the peer's limiter is
// disabled.
func (p *Peer) EndBusy(now time.Time, latency time.Duration, c criticality.Class, rest time.Duration, refusing criticality.Class) {
	if !c.Valid() {
		c = criticality.Critical
	}
	p.end(now, latency, codes.Busy, c, rest, refusing)
}

// busyFor applies a Busy answer to a call of class k at now, with
// pushback hint d (0: none) and refused class refusing (0: none); the
// peer's limiter is not disabled.
func (p *Peer) busyFor(now time.Time, k criticality.Class, d time.Duration, refusing criticality.Class) {
	cs := p.cls.Load()
	if cs == nil && (k != criticality.Critical || refusing.Valid()) {
		cs = p.classes(now)
	}
	if k >= criticality.Critical {
		p.throttle(p.limiter, &p.rest, now, d)
	}
	if cs != nil {
		for c := criticality.Sheddable; c <= k; c++ {
			if c != criticality.Critical {
				p.throttle(cs.lim[c], &cs.rest[c], now, d)
			}
		}
	}
	if refusing.Valid() {
		p.refuse(cs, now, refusing, d)
	}
}

// throttle applies one Busy answer to a class's limiter and rest: a rest
// for the hint d, else a busy counted by the limiter.
func (p *Peer) throttle(lim *busy.Limiter, r *restState, now time.Time, d time.Duration) {
	if d > 0 {
		p.pushedBack(r, now, d)
	} else {
		lim.RecordBusyAt(now)
	}
}

// refuse has p refuse the calls of class c and below from now on, for the
// hint d (at most the busy window), or DefaultRefusal if d is 0.
func (p *Peer) refuse(cs *classState, now time.Time, c criticality.Class, d time.Duration) {
	if d <= 0 {
		d = DefaultRefusal
	}
	d = min(d, p.limiter.Config().Window)
	ns := now.UnixNano()
	until := ns + int64(d)
	if until <= cs.origin {
		return // a clock read before the state was made: nothing to refuse
	}
	cs.refusal.Store(uint64(until-cs.origin)<<refusalBits | uint64(c))
	// Each refused class's rest is held at least as long, so that its
	// calls look at the refusal (restAllows): the rests are what every
	// choice looks at already.
	for k := criticality.Sheddable; k <= c; k++ {
		if k == criticality.Critical {
			hold(&p.rest, ns, until)
		} else {
			hold(&cs.rest[k], ns, until)
		}
	}
}

// hold extends rest r to end no earlier than until, at ns. A rest not in
// force starts with no level (the refusal alone holds the peer). Should a
// pushback start a rest at the same instant, its level may be lost; the
// refusal still holds, and the next pushback sets a level again.
func hold(r *restState, ns, until int64) {
	for {
		old := r.until.Load()
		if until <= old {
			return
		}
		if old <= ns {
			r.pending.Store(math.MaxInt64)
		}
		if r.until.CompareAndSwap(old, until) {
			return
		}
	}
}

// RefusedError is the error of a choice whose every Ready peer refused
// the call, one of them at least because its server said it refuses the
// call's class (see EndBusy). It is peer.ErrThrottled (errors.Is): the
// call fails locally, nothing sent.
type RefusedError struct {
	// HostPort is a peer that refused the class.
	HostPort string
	// Class is the call's class; Refusing the highest class the peer's
	// server refuses, Class or above.
	Class, Refusing criticality.Class
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%v (the server at %s answered Busy refusing class %s and below for now; this call is %s)", peer.ErrThrottled, e.HostPort, e.Refusing, e.Class)
}

// Unwrap returns peer.ErrThrottled.
func (e *RefusedError) Unwrap() error { return peer.ErrThrottled }
