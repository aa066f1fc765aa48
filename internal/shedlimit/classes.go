package shedlimit

import (
	"hash/maphash"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/criticality"
)

// CallerSlots is how many callers a Limiter tells apart: its caller table
// has that many entries and one more, the overflow bucket that every
// caller without an entry shares. The table never grows.
const CallerSlots = 32

// evictScore is the score below which an idle caller's entry may be given
// to a new caller. A caller's score is its requests near the limit in the
// last window plus half its score of the window before: a caller seen in
// one request once (an invented name) scores 1, then less and less; a
// caller that keeps sending scores far above.
const evictScore = 2

// smallShare bounds the max-min fair share from below: it is at least
// 1/smallShare of the window's admissions near the limit, or of the limit
// if that is more. With more callers than admissions the max-min share of
// each falls towards nothing and every caller is over it: a flood of
// invented names, each sending one request, would mark every real caller
// over (or, all being over, none, so that a heavy caller went unchecked).
// With the bound, a caller asking for no more than overShare/smallShare
// of that is never over its share, however many callers there are; one
// asking for more is judged by its max-min share as before.
const smallShare = 4

// overShare is how far beyond its max-min fair share of the last window's
// admissions a caller's demand must go before the caller is over its
// share, refused before the others.
const overShare = 1.5

// classState is what a Limiter keeps for class- and caller-aware admission
// (AcquireFor).
type classState struct {
	// level is the lowest class admitted (criticality.Sheddable: all of
	// them): classes below it are refused wholesale.
	level atomic.Uint32
	// reserve is the share of the limit, in 1/1024ths, the boundary class
	// leaves to higher classes: from minReserve up to maxReserve, raised
	// while a higher class overflows the limit, lowered while none does.
	reserve atomic.Uint32
	// tickAt is when the window ends (since the Limiter's epoch), read
	// without the mutex while a class is refused wholesale, so that the
	// level comes down on a server that has gone quiet.
	tickAt atomic.Int64

	mu sync.Mutex
	// top is the highest class seen near the limit in this window; guard
	// the highest in this window or the last: the boundary class leaves
	// headroom only when a higher class may need it.
	top, guard criticality.Class
	// In this window: fullRefused counts the requests of a class above
	// the level refused at the full limit, and heldRefused those of them
	// refused while the boundary class held room (more reserve would have
	// helped); boundaryRefused the requests of the boundary class (the
	// level) refused at its reserve; admitted the requests admitted near
	// the limit, and above those near it of a class above the level.
	fullRefused, heldRefused, boundaryRefused int64
	admitted, above                           int64
	// limit is the limit the last request near it was judged by.
	limit int64
	// seen has bit c set when a request of class c came near the limit
	// in this window.
	seen uint8
	// low counts the requests in flight that AcquireFor admitted of the
	// class at the level then: the room the boundary class holds (or a
	// lower one, refused since the level rose). On a cache line of its
	// own, away from the fields every request reads.
	_       [64]byte
	low     atomic.Int64
	_       [64]byte
	seed    maphash.Seed
	callers [CallerSlots + 1]callerEntry
	demands [CallerSlots + 1]int64 // scratch for tick
}

// callerEntry is one caller's row in the caller table.
type callerEntry struct {
	name     string
	hash     uint64
	used     bool
	over     bool         // over its share: refused at the headroom
	inFlight atomic.Int32 // requests admitted near the limit, not released
	demand   int64        // requests near the limit in this window
	score    int64        // see evictScore
}

// overflowSlot is the index of the overflow bucket in the caller table.
const overflowSlot = CallerSlots

// The boundary class's reserve, in 1/1024ths of the limit: its bounds,
// how much a window whose higher classes overflowed the limit adds and how
// much a window whose higher classes all fitted takes away. It climbs in a
// few windows and comes down over a couple of seconds, so that it settles
// just above what the higher classes need.
const (
	minReserve  = 256 // a quarter
	maxReserve  = 896 // seven eighths
	reserveUp   = 128
	reserveDown = 16
)

// The classes above the boundary overflow the limit when more than one in
// overflowShare of their requests near it is refused while the boundary
// class holds room (its reserve grows), and flood it when more than one in
// floodShare is refused (the boundary class is refused wholesale).
const (
	overflowShare = 250
	floodShare    = 10
)

// headroom is how much of a limit the boundary class and callers over
// their share leave to the others: a quarter, at least one request once
// the limit is 2.
func headroom(limit int64) int64 {
	if limit < 2 {
		return 0
	}
	return max(1, limit/4)
}

// AcquireFor is Acquire for a request of class c (0, or any invalid
// class, counts as criticality.Critical) from caller (a TChannel caller
// name): it admits higher classes first and shares the limit between
// callers; see package shed's doc. Give the Token back to Release or
// Cancel as usual. A refused request should be answered busy with
// Pushback and Refusing.
func (l *Limiter) AcquireFor(c criticality.Class, caller string) (Token, bool) {
	// The clock is read once the admission needs it, after the limit's
	// counters: as Acquire does, which costs a request less.
	return l.acquireFor(unread, c, caller)
}

// unread stands for the time of an AcquireFor not read yet (see at).
const unread = time.Duration(math.MinInt64)

// at returns since, or the time since the epoch now if since is unread.
func (l *Limiter) at(since time.Duration) time.Duration {
	if since != unread {
		return since
	}
	return l.clk.Since(l.epoch)
}

// AcquireForAt is AcquireFor at time now.
func (l *Limiter) AcquireForAt(now time.Time, c criticality.Class, caller string) (Token, bool) {
	return l.acquireFor(now.Sub(l.epoch), c, caller)
}

// Refusing returns the highest class the Limiter refuses wholesale now (it
// refuses that class and every class below), or 0 when it refuses none
// wholesale. The boundary class, admitted while the limit has headroom, is
// not named: a client that refused it locally would starve it.
func (l *Limiter) Refusing() criticality.Class {
	return criticality.Class(l.cls.level.Load() - 1)
}

// Level returns the lowest class the Limiter admits now: the boundary
// class, admitted while the limit has headroom when a higher class is
// about.
func (l *Limiter) Level() criticality.Class { return criticality.Class(l.cls.level.Load()) }

// acquireFor is AcquireFor at since (the time since the epoch).
func (l *Limiter) acquireFor(since time.Duration, c criticality.Class, caller string) (Token, bool) {
	cs := &l.cls
	if !c.Valid() {
		c = criticality.Critical
	}
	lvl := cs.level.Load()
	if lvl > uint32(criticality.Sheddable) {
		since = l.at(since)
		if int64(since) >= cs.tickAt.Load() {
			cs.mu.Lock()
			cs.tickIfDue(since, l.cfg.Window)
			cs.mu.Unlock()
			lvl = cs.level.Load()
		}
		if uint32(c) < lvl {
			return l.refuse(since)
		}
	}
	s := l.admit.Load()
	limit, probe := int64(uint32(s)), uint32(s>>32)
	n := l.inFlight.Add(1)
	h := headroom(limit)
	hb := max(h, limit*int64(cs.reserve.Load())>>10)
	if n <= limit-hb-h {
		// Far from the limit: no class or caller needs protecting.
		tok := Token{start: l.at(since), probe: probe}
		if uint32(c) == lvl {
			cs.low.Add(1)
			tok.low = true
		}
		return tok, true
	}
	return l.nearLimit(l.at(since), c, caller, n, limit, h, hb, probe)
}

// refuse is a refusal at since, without a request counted in flight.
func (l *Limiter) refuse(since time.Duration) (Token, bool) {
	if uint32(l.admit.Load()>>32) != 0 {
		l.refused(l.epoch.Add(since))
	}
	return Token{}, false
}

// nearLimit decides on a request counted in flight as the n-th, near the
// limit: the boundary class is admitted only within limit-hb, callers over
// their share only within limit-h, the others within the limit.
func (l *Limiter) nearLimit(since time.Duration, c criticality.Class, caller string, n, limit, h, hb int64, probe uint32) (Token, bool) {
	cs := &l.cls
	cs.mu.Lock()
	cs.tickIfDue(since, l.cfg.Window)
	cs.limit = limit
	lvl := criticality.Class(cs.level.Load())
	if c < lvl {
		cs.mu.Unlock()
		l.inFlight.Add(-1)
		return l.refuse(since)
	}
	slot := cs.slotOf(caller)
	e := &cs.callers[slot]
	e.demand++
	cs.top = max(cs.top, c)
	cs.seen |= 1 << c
	if c > lvl {
		cs.above++
	}
	boundary := c == lvl && c < max(cs.top, cs.guard)
	thr := limit
	switch {
	case boundary:
		thr = limit - hb
	case e.over:
		thr = limit - h
	case c > lvl && c >= max(cs.top, cs.guard) && cs.low.Load() > 0:
		// The highest class about, while requests of the boundary class
		// hold room it needs: it may go up to a headroom beyond the limit,
		// which those requests give back as they end (none of their class
		// replaces them meanwhile). Else a dip of the adaptive limit
		// refuses the class the limit is there to serve.
		thr = limit + h
		if probe != 0 {
			thr = limit + headroom(l.normal.Load())
		}
	case probe != 0 && c > lvl && c >= max(cs.top, cs.guard) && lvl > criticality.Sheddable:
		// A latency probe while lower classes are refused: the highest
		// class keeps a headroom of the normal limit beyond the probe's.
		// The probe pins the limit low (ProbeLimit) for tens of
		// milliseconds every ProbeInterval to measure the no-load latency;
		// without this, each probe refused a burst of the protected
		// class (at three times capacity, 60 critical_plus calls per
		// probe, most of its refusals). Its requests are probe samples
		// too: within a quarter of the limit above ProbeLimit they do not
		// queue on a server whose limit sits above its worker count.
		thr = limit + headroom(l.normal.Load())
	}
	if n > thr {
		if probe == 0 { // a probe's low limit says nothing of overload
			switch {
			case boundary:
				cs.boundaryRefused++
			case thr >= limit: // at the full limit, or beyond it
				cs.fullRefused++
				if cs.low.Load() > 0 {
					cs.heldRefused++
				}
			}
		}
		cs.mu.Unlock()
		l.inFlight.Add(-1)
		return l.refuse(since)
	}
	e.inFlight.Add(1)
	cs.admitted++
	tok := Token{start: since, probe: probe, slot: uint16(slot) + 1}
	if c == lvl {
		cs.low.Add(1)
		tok.low = true
	}
	cs.mu.Unlock()
	return tok, true
}

// releaseSlot gives back what AcquireFor counted for a request: its room
// at the level and its place in its caller's entry.
func (l *Limiter) releaseSlot(t Token) {
	if t.low {
		l.cls.low.Add(-1)
	}
	if t.slot != 0 {
		l.cls.callers[t.slot-1].inFlight.Add(-1)
	}
}

// slotOf returns caller's entry in the table: its own, a free one, an idle
// one of a caller that sends little (evictScore), or the overflow bucket.
// Call it with cs.mu held.
func (cs *classState) slotOf(caller string) int {
	h := maphash.String(cs.seed, caller)
	free, idle := -1, -1
	for i := range CallerSlots {
		e := &cs.callers[i]
		switch {
		case !e.used:
			if free < 0 {
				free = i
			}
		case e.hash == h && e.name == caller:
			return i
		case e.demand == 0 && e.score < evictScore && e.inFlight.Load() == 0:
			if idle < 0 || e.score < cs.callers[idle].score {
				idle = i
			}
		}
	}
	i := free
	if i < 0 {
		i = idle
	}
	if i < 0 {
		return overflowSlot
	}
	e := &cs.callers[i]
	e.name, e.hash, e.used, e.over, e.demand, e.score = caller, h, true, false, 0, 0
	return i
}

// tickIfDue ends the window if it is over at since: it moves the level and
// sets each caller's share from the window's counts. Call it with cs.mu
// held.
func (cs *classState) tickIfDue(since, window time.Duration) {
	end := time.Duration(cs.tickAt.Load())
	if since < end {
		return
	}
	lvl := criticality.Class(cs.level.Load())
	top := cs.top
	quiet := since >= end+window // a window or more with nothing near the limit
	reserve := cs.reserve.Load()
	was := lvl
	squeezed := cs.heldRefused*overflowShare > cs.above
	switch {
	case quiet:
		lvl = criticality.Sheddable
		reserve = minReserve
	case cs.fullRefused*floodShare > cs.above && lvl+1 < top,
		squeezed && reserve >= maxReserve && lvl+1 < top:
		// The classes above the boundary overflowed the limit by far,
		// or with the most room left to them: refuse the boundary class
		// wholesale, while a class above the new boundary remains to
		// protect. A class with no request near the limit is no boundary:
		// the level passes it, so that it reaches the class to shed a
		// window sooner.
		lvl++
		for lvl+1 < top && cs.seen&(1<<lvl) == 0 {
			lvl++
		}
	case squeezed:
		// A class above the boundary overflowed the limit while the
		// boundary class held room: it leaves more.
		reserve = min(maxReserve, reserve+reserveUp)
	case lvl > criticality.Sheddable && (cs.fullRefused == 0 && cs.boundaryRefused == 0 || lvl >= top):
		// The boundary class fitted, or there is nothing above it.
		lvl--
	case cs.heldRefused == 0:
		reserve = max(minReserve, reserve-reserveDown)
	}
	lvl = max(criticality.Sheddable, lvl)
	if lvl != was {
		reserve = minReserve // a new boundary class
	}
	cs.level.Store(uint32(lvl))
	cs.reserve.Store(reserve)
	cs.shares(quiet)
	cs.guard, cs.top = top, 0
	if quiet {
		cs.guard = 0
	}
	cs.fullRefused, cs.boundaryRefused, cs.admitted, cs.above, cs.heldRefused, cs.seen = 0, 0, 0, 0, 0, 0
	cs.tickAt.Store(int64(since + window))
}

// shares marks the callers over their share: those whose demand near the
// limit in the window went overShare beyond their max-min fair share of
// the window's admissions, unless every caller did (alike, they share
// first come, first served). It ends the callers' window. Call it with
// cs.mu held.
func (cs *classState) shares(quiet bool) {
	ds := cs.demands[:0]
	var total int64
	for i := range cs.callers {
		if d := cs.callers[i].demand; d > 0 {
			ds = append(ds, d)
			total += d
		}
	}
	fair := int64(-1) // no one over
	if !quiet && total > cs.admitted && len(ds) > 1 {
		slices.Sort(ds)
		left := cs.admitted
		for i, d := range ds {
			share := left / int64(len(ds)-i)
			if d > share {
				fair = share
				break
			}
			left -= d
		}
		if fair >= 0 {
			fair = max(fair, max(cs.admitted, cs.limit)/smallShare)
		}
		if fair >= 0 && float64(ds[0]) > overShare*float64(fair) {
			fair = -1 // all over: none is
		}
	}
	for i := range cs.callers {
		e := &cs.callers[i]
		e.over = fair >= 0 && float64(e.demand) > overShare*float64(fair)
		e.score = e.score/2 + e.demand
		e.demand = 0
	}
}
