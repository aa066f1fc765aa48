package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/tools/cmd/internal/cli"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/sluice-rpc/sluice/tools/internal/chart"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
	"github.com/sluice-rpc/sluice/tools/internal/sim/doormansim"
)

var simDoormanHelp = cli.Help{
	Synopsis: `sluice-lab sim doorman [--scenario NAME] [--seed N] [--duration D] [--chart FILE] [-o json]`,
	About: `Runs a tree of Doorman servers and their clients in virtual time: Sluice's
own leasing server and client code on a fake clock, over an in-memory
transport. Clients change their demand at random; with mishaps, demands
spike, intermediate servers crash and restart empty, and the root's master
fails over. It prints the parameters, then what the Doorman design judges a
tree by (capacity used, overshoot, the longest re-convergence), the mishaps
and a row per simulated minute; tools/benchmarks/README.md has the figures.

Scenarios (the first three are the design doc's):
` + scenarioList() + `
` + cli.OutputJSONHelp + ` It holds the scenario (the
algorithm by name), the summary (capacity used null when the run ends in
learning mode, re-convergence null when nothing unsettled the tree), the
mishaps and every sample.

Exit status: 0 when the simulation ran, 1 when the chart could not be
written, 2 on a usage error.`,
	Examples: `sluice-lab sim doorman
sluice-lab sim doorman --scenario tree-mishaps --seed 7 --chart tree.png
sluice-lab sim doorman --scenario large -o json > large.json`,
}

func scenarioList() string {
	var b strings.Builder
	for _, sc := range doormansim.Scenarios() {
		fmt.Fprintf(&b, "  %-13s %s (%v)\n", sc.Name, sc.About, sc.Duration)
	}
	return b.String()
}

func simDoormanCmd(args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("sluice-lab sim doorman", simDoormanHelp, stdout, stderr)
	name := fs.String("scenario", "root", "the scenario `NAME`: root, tree, tree-mishaps or large")
	seed := fs.Uint64("seed", 1, "random seed; the same seed gives the same run")
	duration := fs.Duration("duration", 0, "simulated time `D`, 1s to 24h (default the scenario's)")
	chartPath := fs.String("chart", "", "draw total wants, total has and capacity over time to `FILE` (.png or .svg)")
	asJSON, code, ok := cli.AddOutputFlag(fs, true).Parse(args)
	if !ok {
		return code
	}
	sc, ok := doormansim.Lookup(*name)
	if !ok {
		var names []string
		for _, s := range doormansim.Scenarios() {
			names = append(names, s.Name)
		}
		return fs.UsageError("unknown scenario %q; want one of %s", *name, strings.Join(names, ", "))
	}
	sc.Seed = *seed
	if *duration != 0 {
		sc.Duration = millis.Duration(*duration)
	}
	return simulate(fs, asJSON, *chartPath, sc, sc.Validate(), "doormansim: ", doormansim.Run, doormanReport, writeDoormanTable, writeDoormanChart)
}

// simDoormanReport is `sluice-lab sim doorman -o json`'s report: the run,
// with null where the table says n/a.
type simDoormanReport struct {
	Scenario simDoormanScenario  `json:"scenario"`
	Summary  simDoormanSummary   `json:"summary"`
	Mishaps  []doormansim.Mishap `json:"mishaps"`
	Samples  []doormansim.Sample `json:"samples"`
}

// simDoormanScenario is the scenario with its learning mode's length
// (not "negative: the lease length") and its number of clients.
type simDoormanScenario struct {
	doormansim.Scenario
	Learning   millis.Duration `json:"learning_ms"`
	NumClients int             `json:"num_clients"`
}

// simDoormanSummary is the summary, null where there is no figure.
type simDoormanSummary struct {
	doormansim.Summary
	// Used is null when the run ends before the root's learning mode.
	Used *float64 `json:"used"`
	// Reconverge is null when no change after learning mode unsettled
	// the tree, MishapReconverge when no mishap did.
	Reconverge            *millis.Duration `json:"reconverge_ms"`
	ReconvergeAfter       *string          `json:"reconverge_after"`
	MishapReconverge      *millis.Duration `json:"mishap_reconverge_ms"`
	MishapReconvergeAfter *string          `json:"mishap_reconverge_after"`
}

func doormanReport(res doormansim.Result) simDoormanReport {
	sc, sum := res.Scenario, res.Summary
	out := simDoormanReport{Scenario: simDoormanScenario{Scenario: sc, Learning: millis.Duration(sc.LearningDuration()), NumClients: sc.NumClients()},
		Summary: simDoormanSummary{Summary: sum}, Mishaps: res.Mishaps, Samples: res.Samples}
	if sc.Duration > sum.From {
		out.Summary.Used = &sum.Used
	}
	if sum.ReconvergeAfter != "" {
		out.Summary.Reconverge, out.Summary.ReconvergeAfter = &sum.Reconverge, &sum.ReconvergeAfter
	}
	if sum.MishapReconvergeAfter != "" {
		out.Summary.MishapReconverge, out.Summary.MishapReconvergeAfter = &sum.MishapReconverge, &sum.MishapReconvergeAfter
	}
	return out
}

func writeDoormanTable(w io.Writer, res doormansim.Result) error {
	sc, sum := res.Scenario, res.Summary
	fmt.Fprintf(w, "Scenario %s: %s\n", sc.Name, sc.About)
	tree := "clients at the root"
	if len(sc.Fanout) > 0 {
		tree = "fanout " + strings.ReplaceAll(strings.Trim(fmt.Sprint(sc.Fanout), "[]"), " ", " x ") + " under the root"
	}
	fmt.Fprintf(w, "Tree: %s, %d clients per leaf (%d in all) wanting %g each; capacity %g, %s\n",
		tree, sc.Clients, sc.NumClients(), sc.Wants, sc.Capacity, sc.Algorithm)
	fmt.Fprintf(w, "Leases: %v, refresh %v at the root (halved per level), learning mode %v; clients renew at most every %v\n",
		sc.LeaseLength, sc.RefreshInterval, sc.LearningDuration(), sc.ClientMinRefresh)
	fmt.Fprintf(w, "Demand: each client every %v-%v, uniform within ±%.0f%% of its base\n", sc.ChangeMin, sc.ChangeMax, 100*sc.Step)
	if sc.MishapEvery > 0 {
		fmt.Fprintf(w, "Mishaps: every %v on average (uniform within ±50%%): a spike of +%g for %v, an intermediate crash (down %v, back empty), or a root failover (%v without a master)\n",
			sc.MishapEvery, sc.SpikeWants, sc.SpikeLength, sc.Downtime, sc.FailoverGap)
	} else {
		fmt.Fprintln(w, "Mishaps: none")
	}
	fmt.Fprintf(w, "Run: %v simulated, a sample every %v, seed %d; %d RPCs\n\n", sc.Duration, sc.Sample, sc.Seed, sum.RPCs)

	if sc.Duration > sum.From {
		fmt.Fprintf(w, "capacity used (from %v, the end of the root's learning mode): %.2f%% on average\n", sum.From, 100*sum.Used)
	} else {
		fmt.Fprintf(w, "capacity used: n/a (the run ends before the root's learning mode, %v)\n", sum.From)
	}
	if sum.Over == 0 {
		fmt.Fprintf(w, "overshoot: none (the clients never held more than %g)\n", sc.Capacity)
	} else {
		fmt.Fprintf(w, "overshoot: %d samples in %d episodes; max %.2f (%.2f%%), mean while over %.2f (%.2f%%)\n",
			sum.Over, sum.Episodes, sum.Max, 100*sum.Max/sc.Capacity, sum.MeanOver, 100*sum.MeanOver/sc.Capacity)
	}
	if sum.ReconvergeAfter != "" {
		fmt.Fprintf(w, "longest re-convergence (to >= %.0f%% of min(wants, capacity), within capacity): %v, after %s\n",
			100*doormansim.ConvergedWithin, sum.Reconverge, sum.ReconvergeAfter)
	}
	if sum.MishapReconvergeAfter != "" {
		fmt.Fprintf(w, "longest re-convergence after a mishap: %v, after %s\n", sum.MishapReconverge, sum.MishapReconvergeAfter)
	}
	for _, m := range res.Mishaps {
		fmt.Fprintf(w, "mishap at %v: %s %s\n", m.T, m.Kind, m.Target)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%8s %10s %10s %10s %10s %8s\n", "minute", "wants", "has", "min has", "max has", "used")
	for start := 0; start < len(res.Samples); {
		end := start
		m := res.Samples[start].T.D() / time.Minute
		var wants, has, used float64
		lo, hi := math.Inf(1), math.Inf(-1)
		for ; end < len(res.Samples) && res.Samples[end].T.D()/time.Minute == m; end++ {
			s := res.Samples[end]
			wants += s.Wants
			has += s.Has
			lo, hi = math.Min(lo, s.Has), math.Max(hi, s.Has)
			if want := math.Min(s.Wants, s.Capacity); want > 0 {
				used += s.Has / want
			}
		}
		n := float64(end - start)
		fmt.Fprintf(w, "%8d %10.1f %10.1f %10.1f %10.1f %7.1f%%\n", m, wants/n, has/n, lo, hi, 100*used/n)
		start = end
	}
	return nil
}

// writeDoormanChart draws total wants, total has and capacity over the
// run, with the mishaps marked.
func writeDoormanChart(path string, res doormansim.Result) error {
	sc := res.Scenario
	most := 0.0
	for _, s := range res.Samples {
		most = math.Max(most, s.Has)
	}
	p := panel(fmt.Sprintf("Doorman %s, seed %d: %.2f%% of capacity used, at most %.2f%% held", sc.Name, sc.Seed,
		100*res.Summary.Used, 100*most/sc.Capacity), "minutes", "capacity")
	p.Legend.Left = true // below the lines, over the start's learning mode
	var wants, has, capacity plotter.XYs
	for _, s := range res.Samples {
		x := s.T.D().Minutes()
		wants = append(wants, plotter.XY{X: x, Y: s.Wants})
		has = append(has, plotter.XY{X: x, Y: s.Has})
		capacity = append(capacity, plotter.XY{X: x, Y: s.Capacity})
	}
	for i, xys := range []plotter.XYs{wants, has, capacity} {
		if err := addLine(p, []string{"total wants", "total has", "capacity"}[i], xys, i); err != nil {
			return err
		}
	}
	if len(res.Mishaps) > 0 {
		var pts plotter.XYs
		for _, m := range res.Mishaps {
			pts = append(pts, plotter.XY{X: m.T.D().Minutes(), Y: 0})
		}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return err
		}
		sc.Shape = draw.TriangleGlyph{}
		sc.Color = plotutil.Color(3)
		sc.Radius = vg.Points(4)
		p.Add(sc)
		p.Legend.Add("mishap", sc)
	}
	return chart.WriteGrid(path, []*plot.Plot{p}, 1, 5*vg.Inch)
}
