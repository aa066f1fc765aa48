package faults

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/tools/internal/fleet"
	"github.com/sluice-rpc/sluice/tools/internal/table"
)

// WriteTable writes one row per result: as aligned text, or as a Markdown
// table when markdown is set. tools/benchmarks/README.md ("Fault
// injection") explains the columns; "sched" is Result.SchedDelay.
func WriteTable(w io.Writer, rs []*Result, markdown bool) error {
	rows := [][]string{{"scenario", "setup", "calls", "ok", "errors", "att/call", "exec/call", "conn/call", "conn/s >1s",
		"dials/call", "p50", "max >1s", "max-deadline", "fault->last pick", "faulty 1st", "goroutines", "heap MiB", "late", "sched"}}
	for _, r := range rs {
		rows = append(rows, r.row())
	}
	return table.Write(w, rows, markdown, false)
}

// row is r's line of the table.
func (r *Result) row() []string {
	f2 := func(x float64) string { return fmt.Sprintf("%.2f", x) }
	dash := func(ok bool, s string) string {
		if !ok {
			return "-"
		}
		return s
	}
	pick := "-"
	if r.Faulty != "" {
		switch {
		case r.Config.FaultAt > 0 && r.FaultAt == 0:
			pick = "not injected"
		case !r.PickedAfterFault:
			pick = "never"
		default:
			pick = sec(r.LastPick.D())
			if r.Elapsed.D()-r.FaultAt.D()-r.LastPick.D() < r.Config.Deadline.D()+100*time.Millisecond {
				pick += " (end)"
			}
		}
	}
	return []string{
		string(r.Config.Scenario), string(r.Config.Setup),
		fmt.Sprint(r.Calls), fmt.Sprint(r.OK), dash(len(r.Errors) > 0, fleet.Codes(r.Errors, "%s %d")),
		f2(r.AttemptsPerCall()), f2(r.ExecutionsPerCall()), f2(r.ConnectsPerCall()),
		dash(r.Elapsed.D() > time.Second, fmt.Sprintf("%.1f", r.ConnectsPerSecondAfter1s())),
		f2(r.DialsPerCall()),
		ms(r.P50.D()), dash(r.CallsAfter1s > 0, ms(r.MaxAfter1s.D())), ms(r.OverDeadline()),
		pick, dash(r.FirstShare >= 0, percent(r.FirstShare)),
		fmt.Sprintf("%d->%d", r.GoroutinesBefore, r.GoroutinesAfter),
		fmt.Sprintf("%.1f->%.1f", mib(r.HeapBefore), mib(r.HeapAfter)),
		fmt.Sprint(r.Late), ms(r.SchedDelay.D()),
	}
}

// percent formats a share in percent, to a tenth under 10% (the contract
// bounds a slow peer's share at 0.5%): "0.3%", "7.9%", "34%".
func percent(share float64) string {
	if 100*share < 9.95 {
		return fmt.Sprintf("%.1f%%", 100*share)
	}
	return fmt.Sprintf("%.0f%%", 100*share)
}

// WriteChecks writes, for each result, the promises of c it breaks and the
// harness problems it met, one line each, and returns how many results
// broke a promise.
func WriteChecks(w io.Writer, c Contract, rs []*Result) (failed int, err error) {
	var b strings.Builder
	for _, r := range rs {
		name := string(r.Config.Scenario) + "/" + string(r.Config.Setup)
		v := c.Check(r)
		if len(v) > 0 {
			failed++
		}
		for _, s := range v {
			fmt.Fprintf(&b, "FAIL %s: %s\n", name, s)
		}
		for _, p := range r.Problems {
			fmt.Fprintf(&b, "PROBLEM %s: %s\n", name, p)
		}
		if len(v) == 0 && len(r.Problems) == 0 {
			fmt.Fprintf(&b, "ok   %s\n", name)
		}
	}
	_, err = io.WriteString(w, b.String())
	return failed, err
}
