package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/sluice-rpc/sluice/tools/cmd/internal/cli"
	"github.com/sluice-rpc/sluice/tools/internal/chart"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
	"github.com/sluice-rpc/sluice/tools/internal/sim/shedsim"
)

var simShedHelp = cli.Help{
	Synopsis: `sluice-lab sim shed [--model pool|cpu] [--workers N] [--service D] [--load X]
[--duration D] [--step AT:D]... [--guard adaptive|fixed:N|none] [--seed N] [--chart FILE] [-o json]`,
	About: `Simulates, in virtual time, a server guarded by the adaptive concurrency limit
a Sluice server sheds load with (ShedConfig.Adaptive), driving the very code
a server runs: requests arrive at random at --load times the capacity of a
pool of --workers workers with a queue in front (or a CPU-bound handler on
--workers cores), and --step changes the service time during the run. It
prints, second by second, the requests offered, admitted and shed, goodput,
latency quantiles, the limit and the no-load latency it probes
(docs/serving.md).

` + cli.OutputJSONHelp + ` It holds the scenario and the
seconds; a second in which no request finished has null quantiles, and
the limits are null where the guard has none.

Exit status: 0 when the simulation ran, 1 when the chart could not be
written, 2 on a usage error.`,
	Examples: `sluice-lab sim shed
sluice-lab sim shed --step 30s:4ms --step 60s:2ms --duration 90s --chart shed.png
sluice-lab sim shed --model cpu --workers 2 --service 1ms --load 10
sluice-lab sim shed --guard none --duration 10s
sluice-lab sim shed --duration 20s -o json | jq '.seconds[] | [.t_ms, .goodput]'`,
}

// stepsFlag is --step, repeatable: AT:SERVICE.
type stepsFlag []shedsim.Step

func (s *stepsFlag) String() string {
	parts := make([]string, len(*s))
	for i, st := range *s {
		parts[i] = fmt.Sprintf("%v:%v", st.At, st.Service)
	}
	return strings.Join(parts, ",")
}

func (s *stepsFlag) Set(v string) error {
	at, d, ok := strings.Cut(v, ":")
	if !ok {
		return fmt.Errorf("want AT:SERVICE, such as 30s:4ms")
	}
	a, err := time.ParseDuration(at)
	if err != nil {
		return fmt.Errorf("time %q: %v", at, err)
	}
	sv, err := time.ParseDuration(d)
	if err != nil {
		return fmt.Errorf("service time %q: %v", d, err)
	}
	*s = append(*s, shedsim.Step{At: millis.Duration(a), Service: millis.Duration(sv)})
	return nil
}

// parseGuard reads --guard: adaptive, none or fixed:N.
func parseGuard(v string) (shedsim.Guard, int, error) {
	switch {
	case v == string(shedsim.Adaptive) || v == string(shedsim.None):
		return shedsim.Guard(v), 0, nil
	case strings.HasPrefix(v, "fixed:"):
		n, err := strconv.Atoi(strings.TrimPrefix(v, "fixed:"))
		if err != nil || n < 1 {
			return "", 0, fmt.Errorf("--guard %q: the fixed limit must be a whole number >= 1", v)
		}
		return shedsim.Fixed, n, nil
	}
	return "", 0, fmt.Errorf("--guard is %q, want adaptive, fixed:N or none", v)
}

func simShedCmd(args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("sluice-lab sim shed", simShedHelp, stdout, stderr)
	model := fs.String("model", "pool", "the server: pool (N workers and a queue) or cpu (a CPU-bound handler on N cores)")
	workers := fs.Int("workers", 8, "`N`: the pool's workers or the cores")
	service := fs.Duration("service", 2*time.Millisecond, "each request's service time at the start")
	loadX := fs.Float64("load", 2, "the offered rate as a multiple of the starting capacity")
	duration := fs.Duration("duration", 60*time.Second, "simulated time (1s to 24h)")
	var steps stepsFlag
	fs.Var(&steps, "step", "change the service time at a moment: `AT:SERVICE`, such as 30s:4ms (repeatable, in order)")
	guard := fs.String("guard", "adaptive", "what sheds: adaptive (shed's defaults), fixed:N (a fixed limit of N), none")
	seed := fs.Uint64("seed", 1, "random seed; the same seed gives the same run")
	chartPath := fs.String("chart", "", "draw limit, latency and goodput over time to `FILE` (.png or .svg)")
	asJSON, code, ok := cli.AddOutputFlag(fs, true).Parse(args)
	if !ok {
		return code
	}
	g, fixed, err := parseGuard(*guard)
	if err != nil {
		return fs.UsageError("%v", err)
	}
	sc := shedsim.Scenario{Model: shedsim.Model(*model), Workers: *workers, Service: *service, Steps: steps,
		Load: *loadX, Duration: *duration, Guard: g, FixedLimit: fixed, Seed: *seed}
	return simulate(fs, asJSON, *chartPath, sc, sc.Validate(), "shedsim: ", shedsim.Run, shedReport, writeShedTable, writeShedChart)
}

// simShedReport is `sluice-lab sim shed -o json`'s report.
type simShedReport struct {
	Scenario simShedScenario `json:"scenario"`
	Seconds  []simShedSecond `json:"seconds"`
}

// simShedScenario is the run's scenario, as its flags set it; Capacity
// is requests per second at the starting service time, FixedLimit null
// but for the fixed guard.
type simShedScenario struct {
	Model      shedsim.Model   `json:"model"`
	Workers    int             `json:"workers"`
	Service    millis.Duration `json:"service_ms"`
	Capacity   float64         `json:"capacity"`
	Steps      []shedsim.Step  `json:"steps"`
	Load       float64         `json:"load"`
	Duration   millis.Duration `json:"duration_ms"`
	Guard      shedsim.Guard   `json:"guard"`
	FixedLimit *int            `json:"fixed_limit"`
	Seed       uint64          `json:"seed"`
}

// simShedSecond is shedsim.Second with null where there is no value:
// P50 and P99 when no request finished in the second, the limits with no
// guard, NoLoad but for the adaptive guard.
type simShedSecond struct {
	T        millis.Duration  `json:"t_ms"`
	Service  millis.Duration  `json:"service_ms"`
	Offered  int              `json:"offered"`
	Admitted int              `json:"admitted"`
	Shed     int              `json:"shed"`
	Done     int              `json:"done"`
	Goodput  float64          `json:"goodput"`
	P50      *millis.Duration `json:"p50_ms"`
	P99      *millis.Duration `json:"p99_ms"`
	Limit    *float64         `json:"limit"`
	MinLimit *float64         `json:"min_limit"`
	MaxLimit *float64         `json:"max_limit"`
	NoLoad   *millis.Duration `json:"no_load_ms"`
	InFlight int              `json:"in_flight"`
}

func shedReport(res shedsim.Result) simShedReport {
	sc := res.Scenario
	out := simShedReport{Scenario: simShedScenario{Model: sc.Model, Workers: sc.Workers, Service: millis.Duration(sc.Service), Capacity: sc.Capacity(),
		Steps: sc.Steps, Load: sc.Load, Duration: millis.Duration(sc.Duration), Guard: sc.Guard, Seed: sc.Seed}}
	if sc.Guard == shedsim.Fixed {
		out.Scenario.FixedLimit = &sc.FixedLimit
	}
	for _, s := range res.Seconds {
		o := simShedSecond{T: millis.Duration(s.T), Service: millis.Duration(s.Service), Offered: s.Offered, Admitted: s.Admitted, Shed: s.Shed, Done: s.Done,
			Goodput: s.Goodput, InFlight: s.InFlight}
		if s.Done > 0 {
			o.P50, o.P99 = (*millis.Duration)(&s.P50), (*millis.Duration)(&s.P99)
		}
		if sc.Guard != shedsim.None {
			o.Limit, o.MinLimit, o.MaxLimit = &s.Limit, &s.MinLimit, &s.MaxLimit
		}
		if sc.Guard == shedsim.Adaptive {
			o.NoLoad = (*millis.Duration)(&s.NoLoad)
		}
		out.Seconds = append(out.Seconds, o)
	}
	return out
}

func writeShedTable(w io.Writer, res shedsim.Result) error {
	sc := res.Scenario
	what := "a pool of %d workers with a queue"
	if sc.Model == shedsim.CPU {
		what = "a CPU-bound handler on %d cores"
	}
	fmt.Fprintf(w, "Server: "+what+", service time %v (capacity %.0f/s); offered %.2f x capacity, Poisson; guard %s", sc.Workers, sc.Service, sc.Capacity(), sc.Load, sc.Guard)
	if sc.Guard == shedsim.Fixed {
		fmt.Fprintf(w, " (limit %d)", sc.FixedLimit)
	}
	fmt.Fprintf(w, "; seed %d\n", sc.Seed)
	for _, st := range sc.Steps {
		fmt.Fprintf(w, "Step: at %v the service time becomes %v\n", st.At, st.Service)
	}
	fmt.Fprintf(w, "\n%6s %8s %8s %8s %8s %8s %9s %9s %16s %9s\n", "t", "service", "offered", "admitted", "shed", "goodput", "p50", "p99", "limit (min-max)", "no-load")
	for _, s := range res.Seconds {
		limit := "-"
		if sc.Guard != shedsim.None {
			limit = fmt.Sprintf("%.1f (%.1f-%.1f)", s.Limit, s.MinLimit, s.MaxLimit)
		}
		fmt.Fprintf(w, "%6v %8v %8d %8d %8d %7.1f%% %9v %9v %16s %9v\n", s.T, s.Service, s.Offered, s.Admitted, s.Shed,
			100*s.Goodput, s.P50.Round(time.Microsecond), s.P99.Round(time.Microsecond), limit, s.NoLoad.Round(time.Microsecond))
	}
	return nil
}

// writeShedChart draws the limit, the latency quantiles and goodput over
// the run, one panel each.
func writeShedChart(path string, res shedsim.Result) error {
	sc := res.Scenario
	limit := panel(fmt.Sprintf("Limit: %s guard, %s model, %d workers", sc.Guard, sc.Model, sc.Workers), "seconds", "requests in flight")
	lat := panel("Latency of served requests", "seconds", "ms")
	good := panel(fmt.Sprintf("Goodput at %.2f x capacity offered", sc.Load), "seconds", "served / capacity")
	limit.Legend.Top, lat.Legend.Top, good.Legend.Top = true, true, true
	var lo, hi, est, workers, p50, p99, gp plotter.XYs
	for _, s := range res.Seconds {
		x := s.T.Seconds()
		lo, hi, est = append(lo, plotter.XY{X: x, Y: s.MinLimit}), append(hi, plotter.XY{X: x, Y: s.MaxLimit}), append(est, plotter.XY{X: x, Y: s.Limit})
		workers = append(workers, plotter.XY{X: x, Y: float64(sc.Workers)})
		p50 = append(p50, plotter.XY{X: x, Y: float64(s.P50) / 1e6})
		p99 = append(p99, plotter.XY{X: x, Y: float64(s.P99) / 1e6})
		gp = append(gp, plotter.XY{X: x, Y: s.Goodput})
	}
	lines := map[*plot.Plot]int{}
	for _, l := range []struct {
		p    *plot.Plot
		name string
		xys  plotter.XYs
	}{
		{limit, "limit", est}, {limit, "lowest in the second", lo}, {limit, "highest in the second", hi}, {limit, "workers", workers},
		{lat, "p50", p50}, {lat, "p99", p99}, {good, "goodput", gp},
	} {
		if sc.Guard == shedsim.None && l.p == limit && l.name != "workers" {
			continue
		}
		if err := addLine(l.p, l.name, l.xys, lines[l.p]); err != nil {
			return err
		}
		lines[l.p]++
	}
	return chart.WriteGrid(path, []*plot.Plot{limit, lat, good}, 1, 3*vg.Inch)
}
