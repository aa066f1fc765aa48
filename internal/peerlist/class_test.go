package peerlist

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/busy"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/criticality"
	"github.com/sluice-rpc/sluice/peer"
)

const (
	shed     = criticality.Sheddable
	shedPlus = criticality.SheddablePlus
	crit     = criticality.Critical
	critPlus = criticality.CriticalPlus
)

// chooseN makes n choices of class c and returns how many found a peer.
func chooseN(l *List, n int, c criticality.Class, now time.Time) int {
	ok := 0
	for range n {
		if _, err := l.ChooseClassAt(nil, now, c); err == nil {
			ok++
		}
	}
	return ok
}

// busyN answers n attempts of class c to p Busy, without a hint.
func busyN(p *Peer, n int, c criticality.Class, now time.Time) {
	for range n {
		p.Begin()
		p.EndBusy(now, time.Millisecond, c, 0, 0)
	}
}

// A Busy answered to sheddable calls halves the sheddable calls' limit
// (3000 answers: 38 calls the next second, as for any class), and no
// other class's; the peer made its per-class state only then.
func TestBusyToSheddableThrottlesOnlySheddable(t *testing.T) {
	l, clk := newList(t, busy.DefaultCeiling, hp(0))
	p := l.Get(hp(0))
	busyN(p, 3000, crit, clk.Now())
	clk.Add(time.Second)
	if p.cls.Load() != nil {
		t.Fatal("Busy answers to critical calls made per-class state: every peer would pay for it")
	}
	clk.Add(10 * time.Second) // the critical limit recovers to the ceiling
	busyN(p, 3000, shed, clk.Now())
	if p.cls.Load() == nil {
		t.Fatal("no per-class state after Busy answers to sheddable calls")
	}
	clk.Add(time.Second)
	now := clk.Now()
	if got := chooseN(l, 100, shed, now); got != 38 {
		t.Errorf("sheddable calls taken in the window after 3000 Busy: %d, want 38", got)
	}
	for _, c := range []criticality.Class{shedPlus, crit, critPlus} {
		if got := chooseN(l, 1000, c, now); got != 1000 {
			t.Errorf("%s calls taken after Busy answers to sheddable ones: %d of 1000", c, got)
		}
	}
	if lim := p.Counts().Limit; lim != busy.DefaultCeiling {
		t.Errorf("the peer's (critical) limit: %v, want the ceiling", lim)
	}
}

// A Busy answered to critical calls throttles critical and lower calls,
// before and after the peer has per-class state, and never critical_plus
// ones.
func TestBusyToCriticalThrottlesLowerClassesNotCriticalPlus(t *testing.T) {
	for _, withState := range []bool{false, true} {
		l, clk := newList(t, busy.DefaultCeiling, hp(0))
		p := l.Get(hp(0))
		if withState {
			busyN(p, 1, shed, clk.Now())
			clk.Add(time.Minute) // recovered; the state stays
		}
		busyN(p, 3000, crit, clk.Now())
		clk.Add(time.Second)
		now := clk.Now()
		if withState {
			// Each class has its limiter, each at 38.
			for _, c := range []criticality.Class{shed, shedPlus, crit} {
				if got := chooseN(l, 100, c, now); got != 38 {
					t.Errorf("with per-class state: %s calls taken after 3000 Busy to critical ones: %d, want 38", c, got)
				}
			}
		} else {
			// The lower classes share critical's limiter until a Busy
			// answers one of them: 38 calls between them.
			if got := chooseN(l, 20, crit, now) + chooseN(l, 100, shed, now) + chooseN(l, 100, shedPlus, now); got != 38 {
				t.Errorf("calls of critical and below taken after 3000 Busy to critical ones: %d, want 38", got)
			}
		}
		if got := chooseN(l, 1000, critPlus, now); got != 1000 {
			t.Errorf("withState %v: critical_plus calls taken after Busy to critical ones: %d of 1000", withState, got)
		}
	}
}

// The configured ceiling binds critical_plus calls too, though Busy
// answers to critical calls do not.
func TestCriticalPlusKeepsTheCeiling(t *testing.T) {
	l, clk := newList(t, 5, hp(0))
	if got := chooseN(l, 10, critPlus, clk.Now()); got != 5 {
		t.Errorf("critical_plus calls taken under a ceiling of 5: %d", got)
	}
}

// A pushback answered to a sheddable call rests the peer for sheddable
// calls only, for the hint.
func TestPushbackToSheddableRestsOnlySheddable(t *testing.T) {
	l, clk := newList(t, busy.DefaultCeiling, hp(0))
	p := l.Get(hp(0))
	p.Begin()
	p.Begin()
	p.EndBusy(clk.Now(), time.Millisecond, shed, 20*time.Millisecond, 0) // level 1, 1 pending
	now := clk.Now()
	if _, err := l.ChooseClassAt(nil, now, shed); !errors.Is(err, peer.ErrThrottled) {
		t.Fatalf("sheddable during its rest: %v, want ErrThrottled", err)
	}
	for _, c := range []criticality.Class{shedPlus, crit, critPlus} {
		if got := chooseN(l, 100, c, now); got != 100 {
			t.Errorf("%s calls during a sheddable rest: %d of 100", c, got)
		}
	}
	clk.Add(20 * time.Millisecond)
	if _, err := l.ChooseClassAt(nil, clk.Now(), shed); err != nil {
		t.Fatalf("sheddable after the hint: %v", err)
	}
}

// A Busy naming the class its server refuses refuses that class and
// those below locally, with an error naming it, for DefaultRefusal
// without a hint; each such answer sets it anew; a higher class goes on.
func TestRefusalRefusesTheClassAndBelow(t *testing.T) {
	l, clk := newList(t, busy.DefaultCeiling, hp(0))
	p := l.Get(hp(0))
	start := clk.Now()
	p.Begin()
	p.EndBusy(start, time.Millisecond, shed, 0, shedPlus)
	for _, c := range []criticality.Class{shed, shedPlus} {
		_, err := l.ChooseClassAt(nil, start, c)
		var re *RefusedError
		if !errors.As(err, &re) || !errors.Is(err, peer.ErrThrottled) {
			t.Fatalf("%s call to a peer refusing sheddable_plus: %v, want a RefusedError", c, err)
		}
		if re.HostPort != hp(0) || re.Class != c || re.Refusing != shedPlus || !strings.Contains(err.Error(), "sheddable_plus") {
			t.Errorf("refusal error %+v: %v", re, err)
		}
	}
	for _, c := range []criticality.Class{crit, critPlus} {
		if got := chooseN(l, 100, c, start); got != 100 {
			t.Errorf("%s calls to a peer refusing sheddable_plus: %d of 100", c, got)
		}
	}
	clk.Add(DefaultRefusal / 2)
	p.Begin()
	p.EndBusy(clk.Now(), time.Millisecond, shedPlus, 0, shed) // anew: sheddable only
	clk.Add(DefaultRefusal - time.Millisecond)
	if got := chooseN(l, 1, shed, clk.Now()); got != 0 {
		t.Error("sheddable taken within the renewed refusal")
	}
	if got := chooseN(l, 1, shedPlus, clk.Now()); got != 1 {
		t.Error("sheddable_plus refused after an answer refusing only sheddable")
	}
	clk.Add(time.Millisecond)
	if got := chooseN(l, 1, shed, clk.Now()); got != 1 {
		t.Error("sheddable refused after the refusal's end")
	}
}

// A refusal lasts the answer's pushback hint, at most the busy window; a
// refusal of critical refuses critical calls (the default class's own
// path) but not critical_plus ones.
func TestRefusalFollowsTheHintWithinTheWindow(t *testing.T) {
	l, clk := newList(t, busy.DefaultCeiling, hp(0))
	p := l.Get(hp(0))
	p.Begin()
	p.EndBusy(clk.Now(), time.Millisecond, crit, time.Hour, crit)
	if p.cls.Load() == nil {
		t.Fatal("a refusal made no per-class state")
	}
	clk.Add(busy.DefaultWindow - time.Millisecond)
	now := clk.Now()
	var re *RefusedError
	if _, err := l.ChooseClassAt(nil, now, crit); !errors.As(err, &re) || re.Refusing != crit {
		t.Fatalf("critical call within the window: %v, want a RefusedError naming critical", err)
	}
	if _, err := l.Choose(nil); err == nil {
		t.Fatal("Choose (critical) took a peer refusing critical")
	}
	if got := chooseN(l, 10, critPlus, now); got != 10 {
		t.Errorf("critical_plus calls to a peer refusing critical: %d of 10", got)
	}
	clk.Add(time.Millisecond)
	for _, c := range []criticality.Class{shed, shedPlus, crit} {
		if got := chooseN(l, 1, c, clk.Now()); got != 1 {
			t.Errorf("%s refused after one busy window", c)
		}
	}
	// A hint shorter than the window is the refusal's length.
	p.Begin()
	p.EndBusy(clk.Now(), time.Millisecond, shed, 30*time.Millisecond, shed)
	clk.Add(29 * time.Millisecond)
	if got := chooseN(l, 1, shed, clk.Now()); got != 0 {
		t.Error("sheddable taken within a 30 ms refusal")
	}
	clk.Add(time.Millisecond)
	if got := chooseN(l, 1, shed, clk.Now()); got != 1 {
		t.Error("sheddable refused after a 30 ms refusal")
	}
}

// A refusing peer is passed over for another; only when every peer
// refuses does the call fail.
func TestRefusalPassesOverThePeer(t *testing.T) {
	l, clk := newList(t, busy.DefaultCeiling, hp(0), hp(1))
	a, b := l.Get(hp(0)), l.Get(hp(1))
	a.Begin()
	a.EndBusy(clk.Now(), time.Millisecond, shed, 0, shed)
	for i := range 20 {
		if p, err := l.ChooseClassAt(nil, clk.Now(), shed); err != nil || p != b {
			t.Fatalf("choice %d: %v, %v; want %s", i, p, err, b.HostPort())
		}
	}
	if _, err := l.ChooseClassAt([]*Peer{b}, clk.Now(), shed); err != nil {
		t.Fatalf("with the other peer excluded: %v (it is taken again)", err)
	}
}

// With busy throttling disabled a refusal refuses nothing.
func TestRefusalWithThrottlingDisabled(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	l, err := New(Config{Service: "kv", Busy: busy.Config{Disabled: true}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := l.Add(hp(0))
	a.Begin()
	a.EndBusy(clk.Now(), time.Millisecond, shed, 0, critPlus)
	if got := chooseN(l, 10, shed, clk.Now()); got != 10 {
		t.Errorf("sheddable calls with throttling disabled: %d of 10", got)
	}
}

// A peer that leaves and comes back within DepartedGrace keeps its
// per-class state, refusal included.
func TestClassStateIsInherited(t *testing.T) {
	l, clk := newList(t, busy.DefaultCeiling, hp(0))
	a := l.Get(hp(0))
	a.Begin()
	a.EndBusy(clk.Now(), time.Millisecond, shed, 0, shed)
	l.Remove(hp(0))
	b, err := l.Add(hp(0))
	if err != nil {
		t.Fatal(err)
	}
	if got := chooseN(l, 1, shed, clk.Now()); got != 0 {
		t.Error("a refusal was cleared by leaving and coming back")
	}
	if b.cls.Load() != a.cls.Load() {
		t.Error("the per-class state was not taken up")
	}
}

// The default class's choice allocates nothing and looks at no per-class
// state; neither does a lower class's on a peer without any.
func BenchmarkChooseClass(b *testing.B) {
	for _, c := range []criticality.Class{crit, shed} {
		b.Run(c.String(), func(b *testing.B) {
			l, clk := newList(b, busy.DefaultCeiling, hp(0), hp(1), hp(2))
			now := clk.Now()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := l.ChooseClassAt(nil, now, c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
