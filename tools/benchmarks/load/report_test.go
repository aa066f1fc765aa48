package load

import (
	"strings"
	"testing"
	"time"
)

// Successful, failed and refused calls each get their own quantiles: a
// refusal in microseconds does not pull down the successes' latency, nor a
// slow failure raise it.
func TestSummarizeKeepsTheSetsApart(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	var rs []result
	for i := 1; i <= 10; i++ {
		rs = append(rs, result{Record: Record{Latency: ms(10 + i)}, attempts: 1})
	}
	rs = append(rs,
		result{Record: Record{Latency: ms(500), Code: "TIMEOUT"}, attempts: 2},
		result{Record: Record{Latency: ms(300), Code: "APPLICATION"}, attempts: 1},
		result{Record: Record{Latency: 20 * time.Microsecond, Code: "THROTTLED", Local: true}},
		result{Record: Record{Latency: 30 * time.Microsecond, Code: "UNAVAILABLE", Local: true}},
		result{Record: Record{Latency: 40 * time.Microsecond, Code: "UNAVAILABLE", Local: true}},
	)
	r := summarize(rs, time.Second)
	if r.Calls != 15 || r.OK != 10 || r.Failed != 2 || r.Refused != 3 {
		t.Fatalf("calls %d ok %d failed %d refused %d, want 15, 10, 2, 3", r.Calls, r.OK, r.Failed, r.Refused)
	}
	for _, tc := range []struct {
		name      string
		got, want Quantiles
	}{
		{"ok", r.Latency, Quantiles{Count: 10, P50: Millis(ms(15)), P90: Millis(ms(19)), P95: Millis(ms(20)), P99: Millis(ms(20)),
			P999: Millis(ms(20)), Max: Millis(ms(20)), Mean: Millis(15500 * time.Microsecond)}},
		{"failed", r.FailedLatency, Quantiles{Count: 2, P50: Millis(ms(300)), P90: Millis(ms(500)), P95: Millis(ms(500)), P99: Millis(ms(500)),
			P999: Millis(ms(500)), Max: Millis(ms(500)), Mean: Millis(ms(400))}},
		{"refused", r.RefusedLatency, Quantiles{Count: 3, P50: Millis(30 * time.Microsecond), P90: Millis(40 * time.Microsecond),
			P95: Millis(40 * time.Microsecond), P99: Millis(40 * time.Microsecond), P999: Millis(40 * time.Microsecond),
			Max: Millis(40 * time.Microsecond), Mean: Millis(30 * time.Microsecond)}},
	} {
		if tc.got != tc.want {
			t.Errorf("%s latency %+v, want %+v", tc.name, tc.got, tc.want)
		}
	}
	if r.Errors["UNAVAILABLE"] != 2 || r.Errors["THROTTLED"] != 1 || r.Errors["TIMEOUT"] != 1 || r.Errors["APPLICATION"] != 1 {
		t.Errorf("errors %v", r.Errors)
	}
	if r.Throughput != 10 || r.Attempts != 13 {
		t.Errorf("throughput %v attempts %d, want 10/s (successes only) and 13", r.Throughput, r.Attempts)
	}
	var sb strings.Builder
	r.Print(&sb)
	for _, want := range []string{
		"calls       15 in 1.00s: 10 ok, 2 failed, 3 refused locally; throughput 10.0 calls/s\n",
		"latency     ok       p50 15ms  p90 19ms  p95 20ms  p99 20ms",
		"latency     failed   p50 300ms  p90 500ms",
		"latency     refused  p50 30µs  p90 40µs",
		"errors      APPLICATION 1, THROTTLED 1, TIMEOUT 1, UNAVAILABLE 2\n",
	} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("Print lacks %q:\n%s", want, sb.String())
		}
	}

	// Sets with no call are left out, or said to be empty.
	sb.Reset()
	summarize(rs[10:11], time.Second).Print(&sb)
	if s := sb.String(); !strings.Contains(s, "latency     ok       no call succeeded\n") || strings.Contains(s, "refused  p50") {
		t.Errorf("one failed call:\n%s", s)
	}
	// Calls all refused locally sent nothing: no "-100% extra requests".
	sb.Reset()
	summarize(rs[12:], time.Second).Print(&sb)
	if s := sb.String(); !strings.Contains(s, "attempts    none: no call was sent\n") || strings.Contains(s, "-100") {
		t.Errorf("calls refused locally:\n%s", s)
	}
}

// summarize returns the Report of a rate run's calls.
func summarize(rs []result, elapsed time.Duration) *Report {
	t := newTally(true, false)
	for _, c := range rs {
		t.add(c, c.Latency)
	}
	return t.report(elapsed)
}
