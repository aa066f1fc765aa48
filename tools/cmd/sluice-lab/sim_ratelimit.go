package main

import (
	"fmt"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/sluice-rpc/sluice/pacing"
	"github.com/sluice-rpc/sluice/tools/cmd/internal/cli"
	"github.com/sluice-rpc/sluice/tools/internal/chart"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
	"github.com/sluice-rpc/sluice/tools/internal/sim/ratesim"
)

// maxSimRuns bounds --runs, each about 0.2 s of CPU.
const maxSimRuns = 100

var simRatelimitHelp = cli.Help{
	Synopsis: `sluice-lab sim ratelimit [--seed N] [--runs N] [--reserve F] [--chart FILE] [-o json]`,
	About: `Replays, in virtual time, the rate-throttling study of Heroku's client rate
throttling article: a GCRA server and 10 greedy clients for 30 minutes, each
client paced by one of Sluice's pacers, the very code a channel runs. It
prints, per pacer, the article's four metrics beside the figures the article
published (tools/benchmarks/README.md), and can chart each client's sleep.

` + cli.OutputJSONHelp + ` It holds the two scenarios and, per
pacer, the four metrics, the requests sent and allowed, and the article's
figures (null where it published none).

Exit status: 0 when the simulation ran, 1 when the chart could not be
written, 2 on a usage error.`,
	Examples: `sluice-lab sim ratelimit
sluice-lab sim ratelimit --runs 40
sluice-lab sim ratelimit --chart sleep.png
sluice-lab sim ratelimit -o json | jq '.pacers[] | {name, retry_rate}'`,
}

func simRatelimitCmd(args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("sluice-lab sim ratelimit", simRatelimitHelp, stdout, stderr)
	seed := fs.Uint64("seed", 1, "random seed; the same seed gives the same table")
	runs := fs.Int("runs", 1, fmt.Sprintf("average the metrics over `N` runs (seeds seed, seed+1, ...; at most %d, about 0.2 s each)", maxSimRuns))
	reserve := fs.Float64("reserve", 0, "the reserve pacer's reserve, a `FRACTION` of the limit in [0, 1) (0: the default, 0.003)")
	chartPath := fs.String("chart", "", "also draw each client's sleep over the 30 minutes, per pacer, to this .png or .svg `FILE`")
	asJSON, code, ok := cli.AddOutputFlag(fs, false).Parse(args)
	if !ok {
		return code
	}
	if *runs < 1 || *runs > maxSimRuns {
		return fs.UsageError("--runs is %d, must be in 1..%d", *runs, maxSimRuns)
	}
	entries := ratesim.Entries()
	var invalid error
	for i := range entries {
		if entries[i].Config.Strategy == pacing.StrategyReserve {
			entries[i].Config.Reserve = *reserve
			if err := entries[i].Config.Validate(); err != nil {
				invalid = fmt.Errorf("--reserve: %v", err)
			}
		}
	}
	steady, clear := ratesim.Steady(), ratesim.Clear()
	compare := func(entries []ratesim.Entry) ([]ratesim.Row, error) {
		return ratesim.Compare(entries, steady, clear, *seed, *runs)
	}
	report := func(rows []ratesim.Row) simRatelimitReport { return ratelimitReport(*seed, *runs, steady, clear, rows) }
	table := func(w io.Writer, rows []ratesim.Row) error {
		fmt.Fprintf(w, "Rate throttling (Heroku's client rate throttling article), virtual time, seed %d", *seed)
		if *runs > 1 {
			fmt.Fprintf(w, ", mean of %d runs", *runs)
		}
		fmt.Fprintf(w, "\nsteady: %d greedy clients, %v, GCRA bucket %d refilled at %d per hour, starting empty, %v per request\n",
			steady.Clients, steady.Duration, steady.Capacity, steady.Capacity, steady.Latency)
		fmt.Fprintf(w, "clear:  %d requests in a bucket that is not refilled, clients starting at %v of sleep, done at remaining <= %d\n",
			clear.Start, clear.InitialSleep, clear.StopRemaining)
		fmt.Fprint(w, "(in brackets: the article's published figures)\n\n")
		return ratesim.WriteTable(w, rows)
	}
	return simulate(fs, asJSON, *chartPath, entries, invalid, "", compare, report, table, writeSleepChart)
}

// simRatelimitReport is `sluice-lab sim ratelimit -o json`'s report.
type simRatelimitReport struct {
	Seed   uint64            `json:"seed"`
	Runs   int               `json:"runs"`
	Steady ratesim.Scenario  `json:"steady"`
	Clear  ratesim.Scenario  `json:"clear"`
	Pacers []simRatelimitRow `json:"pacers"`
}

// simRatelimitRow is one pacer's figures, means over the runs, beside
// the article's (null where it has none). Requests and Successes are the
// steady runs' requests sent and allowed; Cleared says every clear run
// finished in time.
type simRatelimitRow struct {
	Name      string            `json:"name"`
	Strategy  pacing.Strategy   `json:"strategy"`
	Figures   ratelimitFigures  `json:"figures"`
	Published *ratelimitFigures `json:"published"`
	Requests  float64           `json:"requests"`
	Successes float64           `json:"successes"`
	Cleared   bool              `json:"cleared"`
}

// ratelimitFigures are the article's four metrics.
type ratelimitFigures struct {
	RetryRate    float64         `json:"retry_rate"` // a fraction
	MaxSleep     millis.Duration `json:"max_sleep_ms"`
	RequestStdev float64         `json:"request_stdev"`
	Clear        millis.Duration `json:"time_to_clear_ms"`
}

func ratelimitReport(seed uint64, runs int, steady, clear ratesim.Scenario, rows []ratesim.Row) simRatelimitReport {
	out := simRatelimitReport{Seed: seed, Runs: runs, Steady: steady, Clear: clear}
	figures := func(f ratesim.Figures) ratelimitFigures {
		return ratelimitFigures{RetryRate: f.RetryRate, MaxSleep: millis.Duration(f.MaxSleep), RequestStdev: f.RequestStdev, Clear: millis.Duration(f.Clear)}
	}
	for _, r := range rows {
		row := simRatelimitRow{Name: r.Name, Strategy: r.Config.Strategy, Figures: figures(r.Mean),
			Requests: r.Requests, Successes: r.Successes, Cleared: r.Cleared}
		if r.Published != nil {
			row.Published = new(figures(*r.Published))
		}
		out.Pacers = append(out.Pacers, row)
	}
	return out
}

// writeSleepChart draws one panel per pacer (the null pacer, which never
// sleeps, left out): each client's sleep over the steady run, one line per
// client, as a step function.
func writeSleepChart(path string, rows []ratesim.Row) error {
	var plots []*plot.Plot
	for _, r := range rows {
		if r.Config.Strategy == pacing.StrategyNull || r.Config.Strategy == "" {
			continue
		}
		res := r.Steady
		p := panel(fmt.Sprintf("%s: retry %.2f%%, max sleep %.1f s, stdev %.0f",
			r.Name, 100*res.RetryRate(), res.MaxSleep().Seconds(), res.RequestStdev()), "minutes", "sleep (s), one line per client")
		p.X.Min, p.X.Max = 0, res.End.Minutes()
		for i, c := range res.Clients {
			xys := make(plotter.XYs, 0, 2*len(c.Series)+1)
			for k, pt := range c.Series {
				x := pt.At.Minutes()
				if k > 0 {
					xys = append(xys, plotter.XY{X: x, Y: c.Series[k-1].Sleep.Seconds()})
				}
				xys = append(xys, plotter.XY{X: x, Y: pt.Sleep.Seconds()})
			}
			xys = append(xys, plotter.XY{X: res.End.Minutes(), Y: c.Series[len(c.Series)-1].Sleep.Seconds()})
			l, err := plotter.NewLine(xys)
			if err != nil {
				return err
			}
			l.Color = plotutil.Color(i)
			l.Width = vg.Points(1)
			p.Add(l)
		}
		plots = append(plots, p)
	}
	return chart.WriteGrid(path, plots, 2, 3.6*vg.Inch)
}
