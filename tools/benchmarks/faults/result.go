package faults

import (
	"slices"
	"time"

	"github.com/sluice-rpc/sluice/tools/benchmarks/load"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

// Result is what one run measured; times are from the first call's start
// unless said otherwise.
type Result struct {
	// Config is the run's, with its defaults.
	Config Config `json:"config"`
	// Calls were made, OK of them succeeded; Errors counts the others by
	// code (channel.CallError.CodeName, or TIMEOUT and LOCAL).
	Calls  int            `json:"calls"`
	OK     int            `json:"ok"`
	Errors map[string]int `json:"errors"`
	// Attempts sums the attempts sent on the wire; Executions counts the
	// handler runs in the servers.
	Attempts   int `json:"attempts"`
	Executions int `json:"executions"`
	// Dials counts the client's TCP connection attempts; Accepts the
	// connections the peers accepted.
	Dials   int `json:"dials"`
	Accepts int `json:"accepts"`
	// Connects is Accepts, or Dials for Refused; ConnectsAfter1s from 1 s in.
	Connects        int `json:"connects"`
	ConnectsAfter1s int `json:"connects_after1s"`
	// FaultyConnects counts the failing peer's dials or accepts, the
	// more, from 1 s after its fault.
	FaultyConnects int `json:"faulty_connects"`
	// Elapsed runs to the last call's return.
	Elapsed millis.Duration `json:"elapsed_ms"`
	// P50, P99 and Max are latency quantiles over every call; MaxOK is
	// the slowest successful call.
	P50   millis.Duration `json:"p50_ms"`
	P99   millis.Duration `json:"p99_ms"`
	Max   millis.Duration `json:"max_ms"`
	MaxOK millis.Duration `json:"max_ok_ms"`
	// CallsAfter1s started 1 s or more in; MaxAfter1s is the slowest.
	CallsAfter1s int             `json:"calls_after1s"`
	MaxAfter1s   millis.Duration `json:"max_after1s_ms"`
	// Faulty is the failing peer's host:port ("" when all three fail
	// alike or none does); FaultAt is when its fault struck (0: from the
	// start).
	Faulty  string          `json:"faulty"`
	FaultAt millis.Duration `json:"fault_at_ms"`
	// PickedAfterFault reports whether a call starting after the fault
	// had Faulty among its peers; LastPick is when the last such call
	// started, from the fault.
	PickedAfterFault bool            `json:"picked_after_fault"`
	LastPick         millis.Duration `json:"last_pick_ms"`
	// FirstShare is the share of the calls from 1 s after the fault whose
	// first peer was Faulty; -1 when there were none.
	FirstShare float64 `json:"first_share"`
	// Streak reports that the erroring peer answered ErrorStreak
	// UNEXPECTEDs in a row, in its handler's order or the client's, the
	// first such run ending at StreakAt. Of the later calls that chose a
	// peer (CallsAfterStreak), PickedAfterStreak chose the erroring one.
	Streak            bool            `json:"streak"`
	StreakAt          millis.Duration `json:"streak_at_ms"`
	CallsAfterStreak  int             `json:"calls_after_streak"`
	PickedAfterStreak int             `json:"picked_after_streak"`
	// The goroutines (toxiproxy's left out) and live heap before the
	// client exists and after the run, its client closed and SettleLimit
	// passed; a Shared run counts the goroutines at once, no heap.
	GoroutinesBefore int    `json:"goroutines_before"`
	GoroutinesAfter  int    `json:"goroutines_after"`
	HeapBefore       uint64 `json:"heap_before"`
	HeapAfter        uint64 `json:"heap_after"`
	// Late counts calls that started over 2 ms behind schedule.
	Late int `json:"late"`
	// SchedDelay is the longest a goroutine sleeping 5 ms at a time woke
	// up late during the load; the contract's time bounds allow it.
	SchedDelay millis.Duration `json:"sched_delay_ms"`
	// HedgeDue counts calls still out HedgingDelay after they started.
	HedgeDue int `json:"hedge_due"`
	// Hung counts calls still out DrainLimit after the last started.
	Hung int `json:"hung"`
	// Truncated: an event log overflowed, the after-1s counts are lower
	// bounds.
	Truncated bool `json:"truncated"`
	// Problems are what went wrong in the harness; the figures may be off.
	Problems []string `json:"problems"`
}

// AttemptsPerCall, ExecutionsPerCall, ConnectsPerCall and DialsPerCall
// divide a count by Calls.
func (r *Result) AttemptsPerCall() float64   { return per(r.Attempts, r.Calls) }
func (r *Result) ExecutionsPerCall() float64 { return per(r.Executions, r.Calls) }
func (r *Result) ConnectsPerCall() float64   { return per(r.Connects, r.Calls) }
func (r *Result) DialsPerCall() float64      { return per(r.Dials, r.Calls) }

// ConnectsPerSecondAfter1s is ConnectsAfter1s per second from 1 s in to
// the last return; 0 if the run was shorter.
func (r *Result) ConnectsPerSecondAfter1s() float64 {
	if r.Elapsed.D() <= time.Second {
		return 0
	}
	return float64(r.ConnectsAfter1s) / (r.Elapsed.D() - time.Second).Seconds()
}

// AfterStreakShare is PickedAfterStreak / CallsAfterStreak; -1 when there
// is no such call.
func (r *Result) AfterStreakShare() float64 {
	if !r.Streak || r.CallsAfterStreak == 0 {
		return -1
	}
	return per(r.PickedAfterStreak, r.CallsAfterStreak)
}

// OverDeadline is how much later than its deadline the slowest call
// returned (negative: in time).
func (r *Result) OverDeadline() time.Duration { return (r.Max - r.Config.Deadline).D() }

func per(n, calls int) float64 {
	if calls == 0 {
		return 0
	}
	return float64(n) / float64(calls)
}

// summarize fills r's call figures from lo; faulty is the failing peer
// ("" if none).
func (r *Result) summarize(lo loadOutcome, faulty string) {
	faultAt := lo.faultAt
	r.Calls, r.Errors, r.Hung = len(lo.calls), map[string]int{}, lo.hung
	r.SchedDelay = millis.Duration(lo.schedDelay)
	r.Elapsed = millis.Duration(lo.end.Sub(lo.start))
	r.FirstShare = -1
	lat := make([]time.Duration, 0, len(lo.calls))
	after1s := lo.start.Add(time.Second)
	for _, c := range lo.calls {
		lat = append(lat, c.latency)
		r.Attempts += c.attempts
		if c.code == "" {
			r.OK++
			r.MaxOK = max(r.MaxOK, millis.Duration(c.latency))
		} else {
			r.Errors[c.code]++
		}
		if c.late {
			r.Late++
		}
		if c.latency > HedgingDelay {
			r.HedgeDue++
		}
		if !c.start.Before(after1s) {
			r.CallsAfter1s++
			r.MaxAfter1s = max(r.MaxAfter1s, millis.Duration(c.latency))
		}
	}
	slices.Sort(lat)
	r.P50, r.P99, r.Max = millis.Duration(load.Quantile(lat, 0.5)), millis.Duration(load.Quantile(lat, 0.99)), millis.Duration(load.Quantile(lat, 1))

	r.Faulty = faulty
	if faulty == "" || faultAt.IsZero() {
		return
	}
	r.FaultAt = millis.Duration(faultAt.Sub(lo.start))
	var first, counted int
	for _, c := range lo.calls {
		if c.start.Before(faultAt) || len(c.peers) == 0 {
			continue
		}
		if slices.Contains(c.peers, faulty) {
			if d := c.start.Sub(faultAt); !r.PickedAfterFault || d > r.LastPick.D() {
				r.PickedAfterFault, r.LastPick = true, millis.Duration(d)
			}
		}
		if c.start.Sub(faultAt) >= time.Second {
			counted++
			if c.peers[0] == faulty {
				first++
			}
		}
	}
	if counted > 0 {
		r.FirstShare = float64(first) / float64(counted)
	}
}

// summarizeStreak fills r's streak figures from lo; streakAt is when
// faulty's handler ended its first ErrorStreak failures in a row (zero:
// never).
func (r *Result) summarizeStreak(lo loadOutcome, faulty string, streakAt time.Time) {
	if seen := clientStreak(lo, faulty); !seen.IsZero() && (streakAt.IsZero() || seen.Before(streakAt)) {
		streakAt = seen
	}
	if streakAt.IsZero() {
		return
	}
	r.Streak, r.StreakAt = true, millis.Duration(streakAt.Sub(lo.start))
	for _, c := range lo.calls {
		if !c.start.After(streakAt) || len(c.peers) == 0 {
			continue
		}
		r.CallsAfterStreak++
		if slices.Contains(c.peers, faulty) {
			r.PickedAfterStreak++
		}
	}
}

// clientStreak returns when the calls that went to faulty alone, in the
// order they returned, had made ErrorStreak UNEXPECTEDs in a row; zero if
// never.
func clientStreak(lo loadOutcome, faulty string) time.Time {
	var seen []call
	for _, c := range lo.calls {
		if len(c.peers) == 1 && c.peers[0] == faulty {
			seen = append(seen, c)
		}
	}
	slices.SortFunc(seen, func(a, b call) int { return a.start.Add(a.latency).Compare(b.start.Add(b.latency)) })
	inRow := 0
	for _, c := range seen {
		if c.code != "UNEXPECTED" {
			inRow = 0
			continue
		}
		if inRow++; inRow == ErrorStreak {
			return c.start.Add(c.latency)
		}
	}
	return time.Time{}
}
