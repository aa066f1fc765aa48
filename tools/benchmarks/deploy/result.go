package deploy

import (
	"fmt"
	"slices"
	"time"

	"github.com/sluice-rpc/sluice/tools/benchmarks/load"
)

// Result is a whole comparison.
type Result struct {
	Config Config `json:"config"`
	// Etcd says what ran the etcd Run started, if it did.
	Etcd string      `json:"etcd,omitzero"`
	Rows []RowResult `json:"rows"`
}

// RowResult is what one row measured.
type RowResult struct {
	Row   Row    `json:"row"`
	Title string `json:"title"`
	// Calls counts the calls made, the warmup's included; Failed those
	// that failed, FailedByCode by code, the calls still out when the
	// load's drain ended under Hung.
	Calls        int            `json:"calls"`
	Failed       int            `json:"failed"`
	FailedByCode map[string]int `json:"failed_by_code"`
	// Examples holds, for each code, the first failed call's error.
	Examples map[string]string `json:"examples,omitzero"`
	// Failures are the first MaxFailures failed calls, in arrival order.
	Failures []Failure `json:"failures,omitzero"`
	// Steady covers the calls that arrived after the warmup and returned
	// before the first replacement; Deploys those in flight at some moment
	// from the first replacement's start to the last's end.
	Steady  Stretch `json:"steady"`
	Deploys Stretch `json:"deploys"`
	// Bound is the most Deploys.P99 may be (bound); OverBound reports
	// that it was more.
	Bound     load.Millis `json:"bound_ms"`
	OverBound bool        `json:"over_bound"`
	// FirstCallMedian and FirstCallMax are of the time from a new
	// instance's being available to its first call; NoFirstCall counts
	// the new instances that got none.
	FirstCallMedian load.Millis `json:"first_call_median_ms"`
	FirstCallMax    load.Millis `json:"first_call_max_ms"`
	NoFirstCall     int         `json:"no_first_call"`
	// Instances counts the servers started; Idle those that handled no
	// call.
	Instances    int           `json:"instances"`
	Idle         int           `json:"idle"`
	Replacements []Replacement `json:"replacements"`
	// Elapsed is the load's length.
	Elapsed load.Seconds `json:"elapsed_s"`
}

// MaxFailures bounds RowResult.Failures.
const MaxFailures = 100

// Hung is the code of the calls still out drainSlack after the last
// call's deadline: their arrival is not known, so neither Failures nor a
// Stretch counts them.
const Hung = "HUNG"

// Failure is one failed call.
type Failure struct {
	// At is its arrival, from the load's start.
	At      load.Seconds `json:"at_s"`
	Latency load.Millis  `json:"latency_ms"`
	Code    string       `json:"code"`
}

// Stretch is what became of the calls that arrived in a stretch of a run.
type Stretch struct {
	// Calls arrived in it; Failed of them failed.
	Calls  int `json:"calls"`
	Failed int `json:"failed"`
	// P50, P99 and Max are the successful calls' latency.
	P50 load.Millis `json:"p50_ms"`
	P99 load.Millis `json:"p99_ms"`
	Max load.Millis `json:"max_ms"`
}

// Replacement is one replacement: times are from the load's start.
type Replacement struct {
	Old string `json:"old"`
	New string `json:"new"`
	// Start is when it began, Available when the new instance was
	// available, Left when the old one had exited.
	Start     load.Seconds `json:"start_s"`
	Available load.Seconds `json:"available_s"`
	Left      load.Seconds `json:"left_s"`
	// Leave is the old instance's time from being asked to leave to its
	// exit.
	Leave load.Millis `json:"leave_ms"`
	// FirstCall is the time from Available to the new instance's first
	// call; nil if it got none.
	FirstCall *load.Millis `json:"first_call_ms"`
	// OldHandled counts the requests the old instance handled.
	OldHandled int64 `json:"old_handled"`
}

// stretchOf summarises the calls in of.
func stretchOf(calls []call, of func(call) bool) Stretch {
	var s Stretch
	var lat []time.Duration
	for _, c := range calls {
		if !of(c) {
			continue
		}
		s.Calls++
		if c.code != "" {
			s.Failed++
			continue
		}
		lat = append(lat, c.latency)
	}
	slices.Sort(lat)
	s.P50, s.P99, s.Max = load.Millis(load.Quantile(lat, 0.50)), load.Millis(load.Quantile(lat, 0.99)), load.Millis(load.Quantile(lat, 1))
	return s
}

// bound is the most the p99 during the deploys may be, given the steady
// p99: max(2 x steady, steady + 5 ms).
func bound(steadyP99 time.Duration) time.Duration {
	return max(2*steadyP99, steadyP99+5*time.Millisecond)
}

// summarize makes row's result from its calls, the hung ones still out,
// replacements and stopped instances; start is the load's start,
// steadyFrom the warmup's end.
func summarize(row Row, calls []call, hung int, reps []replacement, all []*instance, start, steadyFrom time.Time, end time.Time) RowResult {
	r := RowResult{Row: row, Title: row.Title(), Calls: len(calls) + hung, Failed: hung, FailedByCode: map[string]int{},
		Elapsed: load.Seconds(end.Sub(start)), Instances: len(all)}
	if hung > 0 {
		r.FailedByCode[Hung] = hung
		r.Examples = map[string]string{Hung: fmt.Sprintf("%d calls still out %v after the last call's deadline", hung, drainSlack)}
	}
	for _, in := range all {
		if in.handled == 0 {
			r.Idle++
		}
	}
	slices.SortFunc(calls, func(a, b call) int { return a.at.Compare(b.at) })
	for _, c := range calls {
		if c.code != "" {
			r.Failed++
			r.FailedByCode[c.code]++
			if _, ok := r.Examples[c.code]; !ok && c.err != nil {
				if r.Examples == nil {
					r.Examples = map[string]string{}
				}
				r.Examples[c.code] = c.err.Error()
			}
			if len(r.Failures) < MaxFailures {
				r.Failures = append(r.Failures, Failure{At: load.Seconds(c.at.Sub(start)), Latency: load.Millis(c.latency), Code: c.code})
			}
		}
	}
	deployFrom, deployTo := end, end
	if len(reps) > 0 {
		last := reps[len(reps)-1]
		deployFrom, deployTo = reps[0].start, last.left
		if last.available.After(deployTo) {
			deployTo = last.available
		}
	}
	// A call in flight when the first replacement began is the deploys'.
	counted := func(c call) bool { return !c.at.Before(steadyFrom) }
	r.Steady = stretchOf(calls, func(c call) bool { return counted(c) && c.at.Add(c.latency).Before(deployFrom) })
	r.Deploys = stretchOf(calls, func(c call) bool {
		return counted(c) && c.at.Before(deployTo) && !c.at.Add(c.latency).Before(deployFrom)
	})
	b := bound(time.Duration(r.Steady.P99))
	r.Bound, r.OverBound = load.Millis(b), time.Duration(r.Deploys.P99) > b
	var firsts []time.Duration
	for _, rep := range reps {
		out := Replacement{Old: rep.old.addr, New: rep.new.addr, OldHandled: rep.old.handled,
			Start: load.Seconds(rep.start.Sub(start)), Available: load.Seconds(rep.available.Sub(start)),
			Left: load.Seconds(rep.left.Sub(start)), Leave: load.Millis(rep.left.Sub(rep.leaveFrom))}
		if first := rep.new.firstAt.Sub(rep.available); rep.new.firstAt.IsZero() {
			r.NoFirstCall++
		} else {
			out.FirstCall = new(load.Millis(first))
			firsts = append(firsts, first)
		}
		r.Replacements = append(r.Replacements, out)
	}
	slices.Sort(firsts)
	r.FirstCallMedian, r.FirstCallMax = load.Millis(load.Quantile(firsts, 0.5)), load.Millis(load.Quantile(firsts, 1))
	return r
}
