package amplification

import (
	"fmt"
	"io"

	"github.com/sluice-rpc/sluice/tools/internal/table"
)

// WriteTable writes the result as a Markdown table, one row per run.
func (r *Result) WriteTable(w io.Writer) error {
	c := r.Config
	if _, err := fmt.Fprintf(w, "client -> A -> B -> leaf, %d servers per layer, every layer retrying UNEXPECTED (maxAttempts 3); "+
		"%g calls/s open loop, %v a run (recovery: leaves down %v first), %v timeout; flaky leaves fail %g%%; "+
		"deadline: leaves work %v and then fail %g%%, %v timeout, late = less than %v left, counted after a %v warm-up.\n\n",
		c.Servers, c.Rate, c.Duration, c.DownFor, c.Timeout, 100*c.FlakyRate, c.Work, 100*c.DeadlineFailRate, c.DeadlineTimeout, c.Work, deadlineWarmup); err != nil {
		return err
	}
	rows := [][]string{{"scenario", "mode", "calls", "success", "leaf_per_call", "B per call", "A per call", "recover_ms",
		"late attempts", "late retries", "late runs", "skipped (deadline)", "refused (deadline)"}}
	for _, rr := range r.Rows {
		rec := "-"
		if rr.Scenario == Recovery {
			rec = "never"
			if rr.RecoverMS != nil {
				rec = fmt.Sprintf("%.0f", *rr.RecoverMS)
			}
		}
		row := []string{string(rr.Scenario), string(rr.Mode), fmt.Sprint(rr.Calls), fmt.Sprintf("%.2f%%", 100*rr.Success),
			fmt.Sprintf("%.3f", rr.LeafPerCall), fmt.Sprintf("%.3f", rr.BPerCall), fmt.Sprintf("%.3f", rr.APerCall), rec}
		for _, n := range []*int64{rr.LateAttempts, rr.LateRetries, rr.LateRuns, rr.SkippedDeadline, rr.RefusedDeadline} {
			if n == nil {
				row = append(row, "-")
			} else {
				row = append(row, fmt.Sprint(*n))
			}
		}
		rows = append(rows, row)
	}
	return table.Write(w, rows, true, false)
}
