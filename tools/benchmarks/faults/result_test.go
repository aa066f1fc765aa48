package faults

import (
	"testing"
	"time"
)

// The streak figures count the calls that chose a peer and started after
// the streak, and those of them that chose the erroring peer, first or
// not.
func TestSummarizeStreak(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const bad, good = "127.0.0.1:1", "127.0.0.1:2"
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	lo := loadOutcome{start: t0, end: at(100), calls: []call{
		{start: at(0), peers: []string{bad}, code: "UNEXPECTED"},
		{start: at(10), peers: []string{bad}}, // at the streak: before it
		{start: at(20), peers: []string{good}},
		{start: at(30), peers: []string{good, bad}},
		{start: at(40), peers: nil, code: "UNAVAILABLE"}, // chose no peer
		{start: at(50), peers: []string{bad}},
	}}
	var r Result
	r.summarizeStreak(lo, bad, at(10))
	if !r.Streak || r.StreakAt.D() != 10*time.Millisecond || r.CallsAfterStreak != 3 || r.PickedAfterStreak != 2 {
		t.Errorf("streak %v at %v, %d calls after, %d picked; want true, 10ms, 3, 2",
			r.Streak, r.StreakAt, r.CallsAfterStreak, r.PickedAfterStreak)
	}
	if got := r.AfterStreakShare(); got != 2.0/3 {
		t.Errorf("AfterStreakShare = %v, want 2/3", got)
	}

	var none Result
	none.summarizeStreak(lo, bad, time.Time{})
	if none.Streak || none.CallsAfterStreak != 0 || none.AfterStreakShare() != -1 {
		t.Errorf("no streak: %+v, share %v; want nothing counted, -1", none, none.AfterStreakShare())
	}
}

// The client's order counts too: answers its calls saw as ErrorStreak
// UNEXPECTEDs in a row, which its ejection counts, make a streak even when
// the handlers, running concurrently, decided them in another order.
func TestSummarizeStreakInTheClientsOrder(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const bad = "127.0.0.1:1"
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	lo := loadOutcome{start: t0, end: t0.Add(ms(100))}
	// Started one after another; the OK one returned last.
	for i, c := range []struct {
		code    string
		latency time.Duration
	}{{"UNEXPECTED", ms(1)}, {"UNEXPECTED", ms(1)}, {"", ms(50)}, {"UNEXPECTED", ms(1)}, {"UNEXPECTED", ms(1)}, {"UNEXPECTED", ms(1)}} {
		lo.calls = append(lo.calls, call{start: t0.Add(ms(i)), latency: c.latency, code: c.code, peers: []string{bad}})
	}
	var r Result
	r.summarizeStreak(lo, bad, time.Time{}) // the handlers saw none
	if !r.Streak || r.StreakAt.D() != ms(6) {
		t.Errorf("streak %v at %v; want the client's, ending at 6ms", r.Streak, r.StreakAt)
	}
	var none Result
	none.summarizeStreak(loadOutcome{start: t0, calls: lo.calls[:4]}, bad, time.Time{})
	if none.Streak {
		t.Errorf("a streak found in %d answers, fewer than %d", 4, ErrorStreak)
	}
}
