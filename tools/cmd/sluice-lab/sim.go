package main

import (
	"io"
	"slices"
	"strings"

	"github.com/sluice-rpc/sluice/tools/cmd/internal/cli"
	"github.com/sluice-rpc/sluice/tools/internal/chart"

	"github.com/sluice-rpc/sluice/busy"
	"github.com/sluice-rpc/sluice/tools/internal/sim/busysim"
)

var simHelp = cli.Help{
	Synopsis: `sluice-lab sim busy|ratelimit|shed|doorman [flags]`,
	About: `Simulations in virtual time, driving the very code a channel runs: busy
replays the busy-throttling design's scenarios on a fake clock; ratelimit
replays a rate-limit study (a GCRA server and greedy clients) for every
pacer; shed runs a server's adaptive concurrency limit against a queue;
doorman runs Doorman server trees and their clients through the design's
convergence scenarios.`,
	Examples: `sluice-lab sim busy --preset flappy
sluice-lab sim ratelimit --runs 10 --chart sleep.png
sluice-lab sim shed --step 30s:4ms --step 60s:2ms --duration 90s
sluice-lab sim doorman --scenario tree-mishaps --chart tree.png`,
}

// simGroup is `sluice-lab sim`.
func simGroup() cli.Command {
	return cli.NewGroup("sluice-lab sim", simHelp,
		cli.Leaf("busy", "TChannel's throttling on busy responses, second by second", simBusyCmd),
		cli.Leaf("ratelimit", "rate-limit pacers against a GCRA server, 30 simulated minutes", simRatelimitCmd),
		cli.Leaf("shed", "a server's adaptive concurrency limit against a queue, second by second", simShedCmd),
		cli.Leaf("doorman", "Doorman server trees converging as demands change and servers fail", simDoormanCmd))
}

var simBusyHelp = cli.Help{
	Synopsis: `sluice-lab sim busy [--preset steady|flappy | --rps N --rps-pattern P --busy N --busy-pattern P] [-o json]`,
	About: `Drives Sluice's busy limiter (busy.Limiter) on a fake clock, second by second,
and prints the requests sent and throttled, the busy answers and the limit,
with the limit's exponential recovery and, for comparison, a constant
recovery. The presets reproduce the two tables published with TChannel's
"Throttling on Busy Responses" design digit for digit; the other flags run
any scenario (patterns steady, flappy, linear_grow, linear_decrease).

` + cli.OutputJSONHelp + ` It holds the scenario and each run: its
strategy, every printed second and where the limit converged.

Exit status: 0 when the simulation ran, 2 on a usage error.`,
	Examples: `sluice-lab sim busy                      # the steady preset
sluice-lab sim busy --preset flappy
sluice-lab sim busy --rps 1000 --rps-pattern linear_grow --busy 200 --busy-pattern flappy
sluice-lab sim busy --preset flappy -o json | jq '.runs[].converged_at'`,
}

func simBusyCmd(args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("sluice-lab sim busy", simBusyHelp, stdout, stderr)
	preset := fs.String("preset", "", "a published scenario: steady or flappy (default steady when no other flag is set)")
	rps := fs.Int("rps", 5000, "requests per second offered")
	rpsPattern := fs.String("rps-pattern", "steady", "request `PATTERN`: steady, flappy, linear_grow, linear_decrease")
	busyN := fs.Int("busy", 3000, "busy responses per second (never more than the requests sent)")
	busyPattern := fs.String("busy-pattern", "steady", "busy `PATTERN`: steady, flappy, linear_grow, linear_decrease")
	asJSON, code, ok := cli.AddOutputFlag(fs, false).Parse(args)
	if !ok {
		return code
	}
	explicit := slices.ContainsFunc([]string{"rps", "rps-pattern", "busy", "busy-pattern"}, fs.IsSet)
	sc := busysim.Scenario{RPS: *rps, RPSPattern: busysim.Pattern(*rpsPattern), Busy: *busyN, BusyPattern: busysim.Pattern(*busyPattern)}
	switch {
	case *preset != "" && explicit:
		return fs.UsageError("--preset cannot be combined with --rps, --rps-pattern, --busy or --busy-pattern")
	case *preset != "":
		p, ok := busysim.Presets[*preset]
		if !ok {
			return fs.UsageError("unknown preset %q; want steady or flappy", *preset)
		}
		sc = p
	case !explicit:
		sc = busysim.Presets["steady"]
	}
	if err := sc.Validate(); err != nil {
		return fs.UsageError("%v", err)
	}
	w := stdout
	if asJSON {
		w = io.Discard
	}
	runs, err := busysim.RunBoth(w, sc)
	if err != nil {
		return fs.Failure("%v", err)
	}
	if !asJSON {
		return cli.ExitOK
	}
	out := simBusyReport{Scenario: sc}
	for _, r := range runs {
		run := simBusyRun{Strategy: r.Strategy.String(), StartLimit: r.StartLimit, Seconds: r.Seconds, Converged: r.Converged}
		if r.Strategy == busy.Constant {
			run.RecoverValue = &r.RecoverValue
		} else {
			run.RecoverRate = &r.RecoverRate
		}
		if r.Converged {
			run.ConvergedAt, run.Speed = &r.At, &r.Speed
		}
		out.Runs = append(out.Runs, run)
	}
	return fs.WriteJSON(out)
}

// simBusyReport is `sluice-lab sim busy -o json`'s report.
type simBusyReport struct {
	Scenario busysim.Scenario `json:"scenario"`
	Runs     []simBusyRun     `json:"runs"`
}

// simBusyRun is one run: the recover-rate one, then the constant one.
type simBusyRun struct {
	Strategy     string           `json:"strategy"`
	RecoverRate  *float64         `json:"recover_rate"`  // multiplicative
	RecoverValue *float64         `json:"recover_value"` // constant
	StartLimit   int64            `json:"start_limit"`
	Seconds      []busysim.Second `json:"seconds"`
	Converged    bool             `json:"converged"`
	ConvergedAt  *int             `json:"converged_at"` // the second, null if it did not
	Speed        *int             `json:"speed"`        // converged_at - 10
}

// simulate is the end sim ratelimit, shed and doorman share: --chart's
// path and the scenario checked (invalid is its error, prefix its
// package's), sc run, and the result reported as a table, as JSON
// (report) or drawn.
func simulate[S, R, J any](fs *cli.FlagSet, asJSON bool, chartPath string, sc S, invalid error, prefix string,
	run func(S) (R, error), report func(R) J, table func(io.Writer, R) error, draw func(string, R) error) int {
	if chartPath != "" {
		if err := chart.CheckPath(chartPath); err != nil {
			return fs.UsageError("--chart: %v", err)
		}
	}
	if invalid != nil {
		return fs.UsageError("%v", strings.TrimPrefix(invalid.Error(), prefix))
	}
	res, err := run(sc)
	if err != nil {
		return fs.Failure("%v", err)
	}
	return fs.Report(report(res), asJSON, func(w io.Writer) error { return table(w, res) }, chartPath,
		func(path string) error { return draw(path, res) })
}
