package deploy

import (
	"fmt"
	"io"
	"strings"

	"github.com/sluice-rpc/sluice/tools/internal/fleet"
	"github.com/sluice-rpc/sluice/tools/internal/table"
)

// WriteTable writes r as a Markdown table, with a line saying what was
// run before it and the notes after it.
func (r *Result) WriteTable(w io.Writer) error {
	c := r.Config
	if _, err := fmt.Fprintf(w, "%d instances (child processes, echo with a %v service time), %d clients, %g calls/s open loop, no retry policy, %v timeout; "+
		"%v warmup, %v steady, then %d replacements each followed by a settle of %v ± 25%%; DNS: re-resolution every %v (MinInterval %v); Shutdown grace %v, quiet %v.\n\n",
		c.Instances, c.ServiceTime, c.Clients, c.Rate, c.Timeout, c.Warmup, c.Steady, c.Replacements, c.Settle,
		c.DNSPeriod, c.DNSMinInterval, c.Grace, c.Quiet); err != nil {
		return err
	}
	rows := [][]string{{"row", "calls", "failed (by code)", "steady p50 / p99", "deploys p50 / p99", "deploys max", "first call after available: median / max", "instances that served no call"}}
	for _, rr := range r.Rows {
		first := "-"
		if n := len(rr.Replacements) - rr.NoFirstCall; n > 0 {
			first = fmt.Sprintf("%v / %v", rr.FirstCallMedian, rr.FirstCallMax)
		}
		if rr.NoFirstCall > 0 {
			first += fmt.Sprintf(" (%d never called)", rr.NoFirstCall)
		}
		rows = append(rows, []string{rr.Title, fmt.Sprint(rr.Calls), failures(rr), pair(rr.Steady), pair(rr.Deploys), rr.Deploys.Max.String(), first,
			fmt.Sprintf("%d of %d", rr.Idle, rr.Instances)})
	}
	if err := table.Write(w, rows, true, false); err != nil {
		return err
	}
	var notes []string
	for _, rr := range r.Rows {
		if !rr.Row.discovery() {
			continue
		}
		verdict := "within"
		if rr.OverBound {
			verdict = "OVER"
		}
		fails := "no call failed"
		if rr.Failed > 0 {
			fails = fmt.Sprintf("%d calls FAILED", rr.Failed)
		}
		notes = append(notes, fmt.Sprintf("%s: %s; p99 during the deploys %v, %s the bound max(2 x steady p99, steady p99 + 5 ms) = %v.",
			rr.Title, fails, rr.Deploys.P99, verdict, rr.Bound))
	}
	for _, rr := range r.Rows {
		if rr.Row == RowTChannel && rr.Idle > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d of %d instances served no call. tchannel-go's default peer scorer (preferIncoming) "+
				"ranks a peer without a connection below every connected one, so a client sends all its calls to the peers it connected to first, "+
				"and a restarted instance gets calls only once every connected peer is gone.", rr.Title, rr.Idle, rr.Instances))
		}
	}
	notes = append(notes,
		"Steady: calls that arrived after the warmup and returned before the first replacement began; deploys: calls in flight at some moment from the start of the first replacement to the end of the last (the settles between them included). Latency of the successful calls, from each call's arrival.",
		"First call after available: from a new instance's registration being written (etcd), its SRV record being added (DNS), or its listening (in place), to its first request.",
		"The static rows replace each instance in place, the old one Closing and exiting before the new one listens on the same port: a fixed peer list cannot learn a new port.")
	if r.Etcd != "" {
		notes = append(notes, "etcd: "+r.Etcd+".")
	}
	_, err := fmt.Fprintf(w, "\n%s\n", strings.Join(notes, "\n"))
	return err
}

// pair writes a stretch's p50 / p99.
func pair(s Stretch) string {
	if s.Calls == s.Failed {
		return "-"
	}
	return fmt.Sprintf("%v / %v", s.P50, s.P99)
}

// failures writes a row's failed calls, by code, the most frequent first.
func failures(rr RowResult) string {
	if rr.Failed == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%s)", rr.Failed, fleet.Codes(rr.FailedByCode, "%[2]d %[1]s"))
}
