package load

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// Report is what a run measured. Latencies are from each call's scheduled
// arrival (a rate run) or its start (unbounded) to its result, in three
// sets never mixed: successful, failed, and refused locally. In JSON a
// set with no call has null quantiles, and an unbounded run a null
// offered_rps.
type Report struct {
	// Mode is "rate" (open loop) or "unbounded" (closed loop).
	Mode string `json:"mode"`
	// Connections is the channels the calls went through; Concurrency is
	// Config.Concurrency with its default; MaxInFlight the most calls in
	// flight in all (Connections x Concurrency when unbounded).
	Connections int `json:"connections"`
	Concurrency int `json:"concurrency"`
	MaxInFlight int `json:"max_in_flight"`
	// WarmupCalls were made before the run, and are in no other figure.
	WarmupCalls int `json:"warmup_calls"`
	// Calls were made: OK got a response; Failed an error after the call
	// was let through (BUSY, TIMEOUT, APPLICATION...); Refused were
	// refused in this process, nothing sent (codes.Code.IsLocal).
	Calls   int `json:"calls"`
	OK      int `json:"ok"`
	Failed  int `json:"failed"`
	Refused int `json:"refused"`
	// Elapsed is from the first arrival to the last result.
	Elapsed Seconds `json:"elapsed_s"`
	// OfferedRPS is the arrival rate asked for, nil in an unbounded run;
	// Throughput the successful calls per second of Elapsed.
	OfferedRPS     *float64  `json:"offered_rps"`
	Throughput     float64   `json:"throughput_rps"`
	Latency        Quantiles `json:"latency_ms"`
	FailedLatency  Quantiles `json:"failed_latency_ms"`
	RefusedLatency Quantiles `json:"refused_latency_ms"`
	// Attempts is the attempts the calls sent (retries and hedges too);
	// ExtraPercent is (AttemptsPerCall - 1) * 100.
	Attempts        int     `json:"attempts"`
	AttemptsPerCall float64 `json:"attempts_per_call"`
	ExtraPercent    float64 `json:"extra_requests_percent"`
	// Sent, Busy and Throttled are the peers' counts over the run
	// (peer.Counts); a peer that left counts what it was last read to have.
	Sent      uint64 `json:"sent"`
	Busy      uint64 `json:"busy"`
	Throttled uint64 `json:"throttled"`
	// Errors counts the failed and refused calls by code (CodeOf), and
	// APPLICATION for application errors.
	Errors map[string]int `json:"errors"`
	// Exceptions counts the application errors Config.Exception named,
	// most first.
	Exceptions []ExceptionCount `json:"application_errors,omitzero"`
	PerPeer    []PeerReport     `json:"per_peer,omitzero"`
	// Late counts calls that started more than 1 ms after their arrival
	// time: the client fell behind the schedule.
	Late     int      `json:"late"`
	Timeline []Second `json:"timeline,omitzero"`
	// Start is when a rate run's first call arrived, and Records its
	// calls (Config.Record).
	Start   time.Time `json:"-"`
	Records []Record  `json:"-"`
}

// Record is one call of a rate run (Config.Record): its arrival from the
// run's Start, its latency, its code ("" for a success), whether it was
// refused locally, and the host:port of its last attempt ("" for none).
type Record struct {
	At, Latency time.Duration
	Code        string
	Local       bool
	Peer        string
}

// Second is what became of the calls that arrived in one second of a run,
// as Report counts them (Busy: the failed ones that ended BUSY); its
// quantiles are null in JSON when no call succeeded.
type Second struct {
	Start   Seconds `json:"start_s"`
	Calls   int     `json:"calls"`
	OK      int     `json:"ok"`
	Failed  int     `json:"failed"`
	Refused int     `json:"refused"`
	Busy    int     `json:"busy"`
	P50     Millis  `json:"p50_ms"`
	P99     Millis  `json:"p99_ms"`
}

// MarshalJSON writes s with null quantiles when no call of the second
// succeeded.
func (s Second) MarshalJSON() ([]byte, error) {
	type plain Second
	if s.OK > 0 {
		return json.Marshal(plain(s))
	}
	return json.Marshal(struct {
		plain
		P50 *Millis `json:"p50_ms"`
		P99 *Millis `json:"p99_ms"`
	}{plain: plain(s)})
}

// timeline groups results by the second they arrived in.
func timeline(rs []result) []Second {
	var ts []*tally
	for _, c := range rs {
		for i := int(c.At / time.Second); len(ts) <= i; {
			ts = append(ts, newTally(true, false))
		}
		ts[c.At/time.Second].add(c, c.Latency)
	}
	secs := make([]Second, len(ts))
	for i, t := range ts {
		r := t.report(0)
		secs[i] = Second{Start: Seconds(time.Duration(i) * time.Second), Calls: r.Calls, OK: r.OK, Failed: r.Failed,
			Refused: r.Refused, Busy: r.Errors["BUSY"], P50: r.Latency.P50, P99: r.Latency.P99}
	}
	return secs
}

// Seconds is a duration that reads as seconds in JSON.
type Seconds time.Duration

// MarshalJSON writes s as a number of seconds.
func (s Seconds) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf("%.6f", time.Duration(s).Seconds())), nil
}

// UnmarshalJSON reads a number of seconds; null leaves s as it is.
func (s *Seconds) UnmarshalJSON(b []byte) error {
	return unmarshalUnit(b, time.Second, (*time.Duration)(s))
}

// unmarshalUnit reads b, a number of units, into d, rounding (0.5005 s is
// 500500000 ns, not 500499999); null leaves d as it is.
func unmarshalUnit(b []byte, unit time.Duration, d *time.Duration) error {
	if string(b) == "null" {
		return nil
	}
	var f float64
	if _, err := fmt.Sscan(string(b), &f); err != nil {
		return fmt.Errorf("load: %s is not a number of %v", b, unit)
	}
	*d = time.Duration(math.Round(f * float64(unit)))
	return nil
}

// Quantiles are latency quantiles (nearest rank), mean and maximum of
// Count calls: exact in a rate run, within 0.4% (a histogram's) but for
// Max and Mean in an unbounded one. Of no call, they encode as null.
type Quantiles struct {
	Count int    `json:"count"`
	P50   Millis `json:"p50"`
	P90   Millis `json:"p90"`
	P95   Millis `json:"p95"`
	P99   Millis `json:"p99"`
	P999  Millis `json:"p999"`
	Max   Millis `json:"max"`
	Mean  Millis `json:"mean"`
}

// MarshalJSON writes q, or null when it has no call.
func (q Quantiles) MarshalJSON() ([]byte, error) {
	if q.Count == 0 {
		return []byte("null"), nil
	}
	type plain Quantiles
	return json.Marshal(plain(q))
}

// Millis is a duration that reads as milliseconds in JSON.
type Millis time.Duration

// MarshalJSON writes m as a number of milliseconds.
func (m Millis) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf("%.3f", float64(m)/float64(time.Millisecond))), nil
}

// UnmarshalJSON reads a number of milliseconds; null leaves m as it is.
func (m *Millis) UnmarshalJSON(b []byte) error {
	return unmarshalUnit(b, time.Millisecond, (*time.Duration)(m))
}

// String formats m like a time.Duration rounded to 3 significant digits.
func (m Millis) String() string { return roundDuration(time.Duration(m)).String() }

func roundDuration(d time.Duration) time.Duration {
	for unit := time.Duration(1); unit < time.Hour; unit *= 10 {
		if d < 1000*unit {
			return d.Round(unit)
		}
	}
	return d
}

// Quantile returns the q-quantile (nearest rank) of sorted, 0 when empty.
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// quantiles sorts lat and returns its quantiles.
func quantiles(lat []time.Duration) Quantiles {
	slices.Sort(lat)
	var total time.Duration
	for _, d := range lat {
		total += d
	}
	return newQuantiles(len(lat), total, func(q float64) time.Duration { return Quantile(lat, q) })
}

// newQuantiles returns the Quantiles of n calls of latency sum in all,
// their q-quantile at(q); all zero when n is 0.
func newQuantiles(n int, sum time.Duration, at func(q float64) time.Duration) Quantiles {
	if n == 0 {
		return Quantiles{}
	}
	return Quantiles{Count: n, P50: Millis(at(0.50)), P90: Millis(at(0.90)), P95: Millis(at(0.95)),
		P99: Millis(at(0.99)), P999: Millis(at(0.999)), Max: Millis(at(1)), Mean: Millis(sum / time.Duration(n))}
}

// Print writes r for people, one topic a line, with the same figures as
// its JSON; the latency of failed and refused calls only when there were
// some.
func (r *Report) Print(w io.Writer) {
	switch {
	case r.Mode == ModeUnbounded:
		fmt.Fprintf(w, "load        unbounded: %s x %s in flight (%d in all), each call started when one returns\n",
			plural(r.Connections, "connection"), plural(r.Concurrency, "call"), r.MaxInFlight)
	case r.OfferedRPS != nil:
		fmt.Fprintf(w, "load        offered %.1f calls/s on %s, at most %s in flight in all\n",
			*r.OfferedRPS, plural(r.Connections, "connection"), plural(r.MaxInFlight, "call"))
	}
	if r.WarmupCalls > 0 {
		fmt.Fprintf(w, "warmup      %s one at a time before the run, left out of the figures below\n", plural(r.WarmupCalls, "call"))
	}
	fmt.Fprintf(w, "calls       %d in %.2fs: %d ok, %d failed, %d refused locally; throughput %.1f calls/s\n",
		r.Calls, time.Duration(r.Elapsed).Seconds(), r.OK, r.Failed, r.Refused, r.Throughput)
	if r.OK == 0 {
		fmt.Fprintf(w, "latency     ok       no call succeeded\n")
	}
	for _, set := range []struct {
		name string
		q    Quantiles
	}{{"ok", r.Latency}, {"failed", r.FailedLatency}, {"refused", r.RefusedLatency}} {
		if q := set.q; q.Count > 0 {
			fmt.Fprintf(w, "latency     %-8s p50 %v  p90 %v  p95 %v  p99 %v  p99.9 %v  max %v  mean %v\n",
				set.name, q.P50, q.P90, q.P95, q.P99, q.P999, q.Max, q.Mean)
		}
	}
	if r.Attempts == 0 {
		fmt.Fprintf(w, "attempts    none: no call was sent\n") // not "-100%% extra requests"
	} else {
		fmt.Fprintf(w, "attempts    %d (%.3f per call, %+.1f%% extra requests); %d sent to peers\n",
			r.Attempts, r.AttemptsPerCall, r.ExtraPercent, r.Sent)
	}
	fmt.Fprintf(w, "busy        %d busy answers, %d requests throttled by busy limiters\n", r.Busy, r.Throttled)
	fmt.Fprintf(w, "errors      %s\n", r.ErrorList())
	if r.Late > 0 {
		fmt.Fprintf(w, "late        %d calls started more than 1ms after their arrival time (client behind schedule)\n", r.Late)
	}
	r.printPeers(w)
}

// ErrorList lists the failed and refused calls by code, "BUSY 3,
// UNAVAILABLE 2", the application errors with their exceptions' names,
// "APPLICATION 5 (KeyNotFound 4, Conflict 1)", or says "none".
func (r *Report) ErrorList() string { return errorList(r.Errors, r.Exceptions) }

// errorList lists errors by code, those of APPLICATION with exceptions.
func errorList(errors map[string]int, exceptions []ExceptionCount) string {
	if len(errors) == 0 {
		return "none"
	}
	var parts []string
	for _, c := range slices.Sorted(maps.Keys(errors)) {
		part := fmt.Sprintf("%s %d", c, errors[c])
		if c == "APPLICATION" && len(exceptions) > 0 {
			ex := make([]string, len(exceptions))
			for j, e := range exceptions {
				ex[j] = fmt.Sprintf("%s %d", e.Exception, e.Calls)
			}
			part += " (" + strings.Join(ex, ", ") + ")"
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ", ")
}

// exceptionCounts returns counts as Report.Exceptions lists them: most
// first, ties by name; nil for none.
func exceptionCounts(counts map[string]int) []ExceptionCount {
	var out []ExceptionCount
	for e, n := range counts {
		out = append(out, ExceptionCount{Exception: e, Calls: n})
	}
	slices.SortFunc(out, func(a, b ExceptionCount) int {
		return cmp.Or(b.Calls-a.Calls, strings.Compare(a.Exception, b.Exception))
	})
	return out
}

// plural is "1 call", "2 calls".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
