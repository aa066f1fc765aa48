package ratesim

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/sluice-rpc/sluice/pacing"
)

// Figures are the four metrics of Heroku's article for one strategy.
type Figures struct {
	// RetryRate is the average retry rate, a fraction (0.0307 for 3.07%).
	RetryRate float64
	// MaxSleep is the longest sleep of any client.
	MaxSleep time.Duration
	// RequestStdev is the standard deviation of request counts.
	RequestStdev float64
	// Clear is the time to clear the 4500-request workload.
	Clear time.Duration
}

// cells formats f for WriteTable.
func (f Figures) cells() [4]string {
	return [4]string{fmt.Sprintf("%.2f %%", 100*f.RetryRate), fmt.Sprintf("%.2f s", f.MaxSleep.Seconds()),
		fmt.Sprintf("%.2f", f.RequestStdev), fmt.Sprintf("%.2f s", f.Clear.Seconds())}
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Entry is one row of the comparison: a pacer configuration, and the
// article's figures for it, if any.
type Entry struct {
	Name      string
	Config    pacing.Config
	Published *Figures
}

// Entries are the comparison's rows.
func Entries() []Entry {
	return []Entry{
		{Name: "null", Config: pacing.Config{Strategy: pacing.StrategyNull}},
		{Name: "exponential backoff x2", Config: pacing.Config{Strategy: pacing.StrategyExponentialBackoff, Multiplier: 2},
			Published: &Figures{0.6008, secs(854.89), 387.82, secs(74.23)}},
		{Name: "exponential backoff x1.2", Config: pacing.Config{Strategy: pacing.StrategyExponentialBackoff},
			Published: &Figures{0.8041, secs(46.72), 147.84, secs(74.33)}},
		{Name: "exp. increase, gradual decrease", Config: pacing.Config{Strategy: pacing.StrategyGradualDecrease},
			Published: &Figures{0.4056, secs(139.91), 867.73, secs(115.54)}},
		{Name: "exp. increase, proportional decrease", Config: pacing.Config{Strategy: pacing.StrategyProportionalDecrease},
			Published: &Figures{0.0366, secs(17.31), 101.94, secs(551.10)}},
		{Name: "exp. increase, prop. remaining decrease", Config: pacing.Config{Strategy: pacing.StrategyProportionalRemainingDecrease},
			Published: &Figures{0.0307, secs(17.32), 78.44, secs(84.23)}},
		{Name: "reserve (Sluice)", Config: pacing.Config{Strategy: pacing.StrategyReserve}},
	}
}

// Row is one entry's outcome in both scenarios.
type Row struct {
	Entry
	// Steady and Clear are the first run's results, for charts.
	Steady, Clear Result
	// Mean holds the metrics averaged over all runs.
	Mean Figures
	// Requests and Successes are the mean requests sent and allowed in
	// the steady runs.
	Requests, Successes float64
	// Cleared reports that every clear run finished before its Duration.
	Cleared bool
}

// Compare runs every entry in both scenarios, runs times with the seeds
// seed, seed+1, ..., and averages the metrics.
func Compare(entries []Entry, steady, clear Scenario, seed uint64, runs int) ([]Row, error) {
	runs = max(runs, 1)
	rows := make([]Row, 0, len(entries))
	for _, e := range entries {
		row := Row{Entry: e, Cleared: true}
		for k := range runs {
			st, err := Run(steady, e.Config, seed+uint64(k))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", e.Name, err)
			}
			cl, err := Run(clear, e.Config, seed+uint64(k))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", e.Name, err)
			}
			if k == 0 {
				row.Steady, row.Clear = st, cl
			}
			n := float64(runs)
			row.Mean.RetryRate += st.RetryRate() / n
			row.Mean.MaxSleep += time.Duration(float64(st.MaxSleep()) / n)
			row.Mean.RequestStdev += st.RequestStdev() / n
			row.Mean.Clear += time.Duration(float64(cl.End) / n)
			row.Requests += float64(st.Requests()) / n
			row.Successes += float64(st.Successes()) / n
			row.Cleared = row.Cleared && cl.Stopped
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// WriteTable prints rows as a Markdown table, the article's figures in
// brackets.
func WriteTable(w io.Writer, rows []Row) error {
	if _, err := fmt.Fprintln(w, "| pacer | avg retry rate | max sleep | stdev requests | time to clear | requests | allowed |"); err != nil {
		return err
	}
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		cells := r.Mean.cells()
		if !r.Cleared {
			cells[3] = "> " + cells[3]
		}
		if p := r.Published; p != nil {
			for i, c := range p.cells() {
				cells[i] += " (" + c + ")"
			}
		}
		if _, err := fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %d | %d |\n", r.Name, cells[0], cells[1], cells[2], cells[3],
			int64(math.Round(r.Requests)), int64(math.Round(r.Successes))); err != nil {
			return err
		}
	}
	return nil
}
