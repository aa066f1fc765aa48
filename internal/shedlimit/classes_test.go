package shedlimit

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/criticality"
	"github.com/sluice-rpc/sluice/shed"
)

const (
	cp = criticality.CriticalPlus
	cr = criticality.Critical
	sp = criticality.SheddablePlus
	sh = criticality.Sheddable
)

// fixedLimiter is a Limiter with a fixed limit of n on a fake clock.
func fixedLimiter(t *testing.T, n int) *Limiter {
	t.Helper()
	return newLimiter(t, func(c *shed.Config) { c.MinLimit, c.MaxLimit = n, n })
}

// acquire admits a request of class c from caller at now, failing the
// test unless the outcome is want. It returns the Token.
func acquire(t *testing.T, l *Limiter, now time.Time, c criticality.Class, caller string, want bool) Token {
	t.Helper()
	tok, ok := l.AcquireForAt(now, c, caller)
	if ok != want {
		t.Fatalf("%v from %q with %d in flight (limit %d, level %v): admitted %v, want %v", c, caller, l.InFlight(), l.Limit(), l.Level(), ok, want)
	}
	return tok
}

// TestAcquireForHeadroom: under a limit of 8 (headroom 2) a lower class is
// refused once 6 are in flight while a higher class is about, and a higher
// class finds the last two slots.
func TestAcquireForHeadroom(t *testing.T) {
	l := fixedLimiter(t, 8)
	for range 5 {
		acquire(t, l, t0, cp, "a", true)
	}
	acquire(t, l, t0, sh, "a", true) // the 6th
	acquire(t, l, t0, sh, "a", false)
	acquire(t, l, t0, cr, "a", true)  // critical is above the level
	acquire(t, l, t0, cp, "a", true)  // the 8th
	acquire(t, l, t0, cr, "a", false) // critical is not the highest class: the limit holds
	// The highest class may borrow a headroom (2) beyond the limit while
	// the boundary class holds room.
	acquire(t, l, t0, cp, "a", true)
	acquire(t, l, t0, cp, "a", true)
	acquire(t, l, t0, cp, "a", false)
	if got := l.Refusing(); got != 0 {
		t.Errorf("Refusing: got %v, want none (the level has not moved)", got)
	}
}

// TestAcquireForOneClassUsesTheLimit: a lone class, even sheddable, may
// take the whole limit: there is no one to leave room to.
func TestAcquireForOneClassUsesTheLimit(t *testing.T) {
	l := fixedLimiter(t, 8)
	for range 8 {
		acquire(t, l, t0, sh, "a", true)
	}
	acquire(t, l, t0, sh, "a", false)
}

// TestLevelRisesAndFalls: while critical_plus overflows a limit held by
// critical, the level rises a class per window up to critical (sheddable
// and sheddable_plus refused wholesale, Refusing names the highest),
// never to critical_plus; with nothing refused it falls a class per window.
func TestLevelRisesAndFalls(t *testing.T) {
	l := fixedLimiter(t, 4)
	now := t0
	var held []Token
	for range 4 {
		held = append(held, acquire(t, l, now, cr, "a", true))
	}
	for _, want := range []criticality.Class{sp, cr, cr} {
		for range 5 {
			acquire(t, l, now, cp, "a", false)
		}
		acquire(t, l, now, sp, "a", false) // sheddable_plus is about
		now = now.Add(l.cfg.Window)
		acquire(t, l, now, sh, "a", false) // ends the window
		if got := l.Level(); got != want {
			t.Fatalf("level after a window of overflow: got %v, want %v", got, want)
		}
		if got := l.Refusing(); got != want-1 {
			t.Errorf("Refusing at level %v: got %v, want %v", want, got, want-1)
		}
	}
	for _, tok := range held {
		l.ReleaseAt(tok, now)
	}
	// Quiet: each window ends with nothing refused.
	for _, want := range []criticality.Class{sp, sh} {
		now = now.Add(l.cfg.Window)
		acquire(t, l, now, cr, "a", true)
		if got := l.Level(); got != want {
			t.Errorf("level after a quiet window: got %v, want %v", got, want)
		}
	}
	acquire(t, l, now, sh, "a", true)
}

// TestReserveGrows: the boundary class leaves more room while a higher
// class keeps being refused at the limit with the boundary class holding
// slots, and less once it is not.
func TestReserveGrows(t *testing.T) {
	l := fixedLimiter(t, 16)
	now := t0
	// One sheddable and fifteen critical_plus in flight, and four more
	// critical_plus borrowed beyond the limit (its headroom); a
	// critical_plus refused now and then, once in 100 (more than 1 in
	// overflowShare, less than 1 in floodShare).
	held := []Token{acquire(t, l, now, sh, "a", true)}
	for range 15 + headroom(16) {
		held = append(held, acquire(t, l, now, cp, "a", true))
	}
	before := l.cls.reserve.Load()
	for w := 0; w < 3; w++ {
		for range 100 {
			l.ReleaseAt(held[len(held)-1], now)
			held[len(held)-1] = acquire(t, l, now, cp, "a", true)
		}
		acquire(t, l, now, cp, "a", false)
		now = now.Add(l.cfg.Window)
		l.ReleaseAt(held[len(held)-1], now)
		held[len(held)-1] = acquire(t, l, now, cp, "a", true) // ends the window
	}
	grown := l.cls.reserve.Load()
	if grown <= before {
		t.Fatalf("reserve after 3 windows of overflow: got %d/1024, want above %d/1024", grown, before)
	}
	if got := l.Level(); got != sh {
		t.Errorf("level: got %v, want %v (the overflow is slight)", got, sh)
	}
	// Now with the limit never overflowing (15 in flight).
	l.ReleaseAt(held[len(held)-1], now)
	for w := 0; w < 2; w++ {
		now = now.Add(l.cfg.Window)
		l.ReleaseAt(acquire(t, l, now, cp, "a", true), now)
	}
	if got := l.cls.reserve.Load(); got >= grown {
		t.Errorf("reserve after 2 windows without overflow: got %d/1024, want below %d/1024", got, grown)
	}
}

// TestCallerOverItsShareRefusedFirst: a caller whose demand went far
// beyond its share of the last window is refused at the headroom, while a
// caller within its share still finds the last slots; the heavy caller is
// still admitted below the headroom.
func TestCallerOverItsShareRefusedFirst(t *testing.T) {
	heavyThenLight(t, func(*Limiter, time.Time) {})
}

// TestInventedCallersDoNotHideAHeavyOne is TestCallerOverItsShareRefusedFirst
// with a flood of invented caller names, each sending one request, in the
// window the heavy caller overflows: more callers than admissions shrink
// the max-min share towards nothing, and without its lower bound
// (smallShare) every caller, the light one included, was over it, so none
// was. The heavy caller is still refused at the headroom, the light one
// still finds the last slots.
func TestInventedCallersDoNotHideAHeavyOne(t *testing.T) {
	heavyThenLight(t, func(l *Limiter, now time.Time) {
		for i := range 500 {
			acquire(t, l, now, cr, fmt.Sprintf("invented-%d", i), false)
		}
	})
}

// heavyThenLight runs, on a limit of 8, a window in which a heavy caller
// fills the limit and asks for 50 more and a light one for 2, then
// meanwhile (the limit still full); and checks the next window: the heavy
// caller is admitted up to the headroom (6 in flight), the light one to
// the limit.
func heavyThenLight(t *testing.T, meanwhile func(l *Limiter, now time.Time)) {
	l := fixedLimiter(t, 8) // headroom 2
	now := t0
	var held []Token
	for range 8 {
		held = append(held, acquire(t, l, now, cr, "heavy", true))
	}
	for range 50 {
		acquire(t, l, now, cr, "heavy", false)
	}
	for range 2 {
		acquire(t, l, now, cr, "light", false)
	}
	meanwhile(l, now)
	// Half are done; in the next window the heavy caller is over its share.
	for _, tok := range held[4:] {
		l.ReleaseAt(tok, now)
	}
	now = now.Add(l.cfg.Window)
	acquire(t, l, now, cr, "heavy", true) // 5th
	acquire(t, l, now, cr, "heavy", true) // 6th: limit - headroom
	acquire(t, l, now, cr, "heavy", false)
	acquire(t, l, now, cr, "light", true) // 7th
	acquire(t, l, now, cr, "light", true) // 8th
	acquire(t, l, now, cr, "light", false)
}

// TestCallersAlikeShareFirstComeFirstServed: callers that all send beyond
// their shares, alike, are none of them over: each may take the last slot.
func TestCallersAlikeShareFirstComeFirstServed(t *testing.T) {
	l := fixedLimiter(t, 8)
	now := t0
	for range 8 {
		acquire(t, l, now, cr, "a", true)
	}
	for range 20 {
		acquire(t, l, now, cr, "a", false)
		acquire(t, l, now, cr, "b", false)
	}
	now = now.Add(l.cfg.Window)
	acquire(t, l, now, cr, "b", false) // ends the window
	for i := range l.cls.callers {
		if e := &l.cls.callers[i]; e.over {
			t.Errorf("caller %q over its share, want none", e.name)
		}
	}
}

// TestCallerTableBounded: a flood of invented caller names takes no more
// than the fixed table and its overflow bucket, allocates nothing, and
// cannot take the entries of callers that keep sending; once they stop,
// their entries go to new callers, except entries with requests in
// flight.
func TestCallerTableBounded(t *testing.T) {
	l := fixedLimiter(t, 4*CallerSlots) // headroom CallerSlots: far below 2*CallerSlots
	now := t0
	var held []Token
	for range 2 * CallerSlots {
		held = append(held, acquire(t, l, now, cr, "filler", true))
	}
	// Real callers fill the table: each sends three requests near the
	// limit a window, one of which it holds at first.
	real := make([]string, CallerSlots)
	for i := range real {
		real[i] = fmt.Sprintf("real-%d", i)
	}
	send := func() {
		for _, r := range real {
			for range 3 {
				if tok, ok := l.AcquireForAt(now, cr, r); ok {
					l.ReleaseAt(tok, now)
				}
			}
		}
	}
	var realHeld []Token
	for _, r := range real {
		realHeld = append(realHeld, acquire(t, l, now, cr, r, true))
	}
	send()
	// Only real-0 keeps a request in flight: the others' entries are kept
	// by their scores alone.
	for _, tok := range realHeld[1:] {
		l.ReleaseAt(tok, now)
	}
	slots := func() map[string]int {
		m := map[string]int{}
		for i := range CallerSlots {
			if e := &l.cls.callers[i]; e.used {
				m[e.name] = i
			}
		}
		return m
	}
	flood := 0
	for w := 0; w < 5; w++ {
		now = now.Add(l.cfg.Window)
		// The flood first in the window: the real callers' entries are
		// kept by their scores.
		allocs := testing.AllocsPerRun(1000, func() {
			flood++
			if tok, ok := l.AcquireForAt(now, cr, fakeNames[flood%len(fakeNames)]); ok {
				l.ReleaseAt(tok, now)
			}
		})
		if allocs != 0 {
			t.Errorf("window %d: %v allocations per flooded request, want 0", w, allocs)
		}
		send()
	}
	in := slots()
	for _, r := range real {
		if _, ok := in[r]; !ok {
			t.Errorf("caller %q lost its entry to the flood", r)
		}
	}
	if len(in) != CallerSlots {
		t.Errorf("table entries: got %d, want %d", len(in), CallerSlots)
	}
	if _, ok := in["filler"]; ok {
		t.Error(`"filler" has an entry, want none (it was only admitted far from the limit)`)
	}
	if got := l.cls.callers[overflowSlot].score; got == 0 {
		t.Error("the overflow bucket saw none of the flood")
	}

	// The real callers stop; real-0 still has a request in flight.
	for _, tok := range held {
		l.ReleaseAt(tok, now)
	}
	cs := &l.cls
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for range 4 { // their scores decay below evictScore
		now = now.Add(l.cfg.Window)
		cs.tickIfDue(now.Sub(l.epoch), l.cfg.Window)
	}
	got := 0
	for _, name := range fakeNames[:4*CallerSlots] {
		slot := cs.slotOf(name)
		cs.callers[slot].demand++ // as nearLimit counts it
		if slot != overflowSlot {
			got++
		}
	}
	if got != CallerSlots-1 {
		t.Errorf("new callers given entries: got %d, want %d (all but the one with a request in flight)", got, CallerSlots-1)
	}
	if i, ok := in["real-0"]; !ok || cs.callers[i].name != "real-0" {
		t.Error(`"real-0", with a request in flight, lost its entry`)
	}
}

// fakeNames are invented caller names, made before the allocation count.
var fakeNames = func() []string {
	s := make([]string, 4096)
	for i := range s {
		s[i] = fmt.Sprintf("invented-%d", i)
	}
	return s
}()

// TestAcquireForAllocatesNothing: far from the limit and near it.
func TestAcquireForAllocatesNothing(t *testing.T) {
	l := fixedLimiter(t, 8)
	for _, n := range []int{0, 7} {
		var held []Token
		for range n {
			held = append(held, acquire(t, l, t0, cr, "a", true))
		}
		if got := testing.AllocsPerRun(100, func() {
			if tok, ok := l.AcquireForAt(t0, cp, "b"); ok {
				l.ReleaseAt(tok, t0)
			}
		}); got != 0 {
			t.Errorf("with %d in flight: %v allocations, want 0", n, got)
		}
		for _, tok := range held {
			l.ReleaseAt(tok, t0)
		}
	}
}

// TestLevelSkipsAbsentClasses: a class with no request near the limit is
// no boundary: the level rises past it in one window.
func TestLevelSkipsAbsentClasses(t *testing.T) {
	l := fixedLimiter(t, 4)
	now := t0
	for range 4 {
		acquire(t, l, now, cr, "a", true)
	}
	acquire(t, l, now, sh, "a", false) // the window's first near the limit: sheddable is about
	for range 5 {
		acquire(t, l, now, cp, "a", false)
	}
	now = now.Add(l.cfg.Window)
	acquire(t, l, now, cp, "a", false) // ends the window
	if got := l.Level(); got != cr {
		t.Fatalf("level after a window of overflow with no sheddable_plus: got %v, want critical", got)
	}
}
