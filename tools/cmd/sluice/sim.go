package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/sluice-rpc/sluice/tools/internal/sim/busysim"
)

var simHelp = helpText{
	synopsis: `sluice sim busy|ratelimit|shed|doorman [flags]`,
	about: `Simulations in virtual time, driving the very code a channel runs: busy
replays the busy-throttling design's scenarios on a fake clock; ratelimit
replays a rate-limit study (a GCRA server and greedy clients) for every
pacer; shed runs a server's adaptive concurrency limit against a queue;
doorman runs Doorman server trees and their clients through the design's
convergence scenarios.`,
	examples: `sluice sim busy --preset flappy
sluice sim ratelimit --runs 10 --chart sleep.png
sluice sim shed --step 30s:4ms --step 60s:2ms --duration 90s
sluice sim doorman --scenario tree-mishaps --chart tree.png`,
}

func simCmd(args []string, stdout, stderr io.Writer) int {
	return group{name: "sluice sim", help: simHelp, subs: []command{
		{"busy", "TChannel's throttling on busy responses, second by second", simBusyCmd},
		{"ratelimit", "rate-limit pacers against a GCRA server, 30 simulated minutes", simRatelimitCmd},
		{"shed", "a server's adaptive concurrency limit against a queue, second by second", simShedCmd},
		{"doorman", "Doorman server trees converging as demands change and servers fail", simDoormanCmd},
	}}.run(args, stdout, stderr)
}

var simBusyHelp = helpText{
	synopsis: `sluice sim busy [--preset steady|flappy | --rps N --rps-pattern P --busy N --busy-pattern P]`,
	about: `Drives Sluice's busy limiter (busy.Limiter) on a fake clock, second by second,
and prints the requests sent and throttled, the busy answers and the limit,
with the limit's exponential recovery and, for comparison, a constant
recovery. The presets reproduce the two tables published with TChannel's
"Throttling on Busy Responses" design digit for digit; the other flags run
any scenario (patterns steady, flappy, linear_grow, linear_decrease).

Exit status: 0 when the simulation ran, 2 on a usage error.`,
	examples: `sluice sim busy                      # the steady preset
sluice sim busy --preset flappy
sluice sim busy --rps 1000 --rps-pattern linear_grow --busy 200 --busy-pattern flappy`,
}

func simBusyCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("sluice sim busy", simBusyHelp, stdout, stderr)
	preset := fs.String("preset", "", "a published scenario: steady or flappy (default steady when no other flag is set)")
	rps := fs.Int("rps", 5000, "requests per second offered")
	rpsPattern := fs.String("rps-pattern", "steady", "request `PATTERN`: steady, flappy, linear_grow, linear_decrease")
	busyN := fs.Int("busy", 3000, "busy responses per second (never more than the requests sent)")
	busyPattern := fs.String("busy-pattern", "steady", "busy `PATTERN`: steady, flappy, linear_grow, linear_decrease")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	explicit := 0
	fs.Visit(func(f *flag.Flag) {
		if f.Name != "preset" {
			explicit++
		}
	})
	sc := busysim.Scenario{RPS: *rps, RPSPattern: busysim.Pattern(*rpsPattern), Busy: *busyN, BusyPattern: busysim.Pattern(*busyPattern)}
	switch {
	case *preset != "" && explicit > 0:
		return fs.usageError("--preset cannot be combined with --rps, --rps-pattern, --busy or --busy-pattern")
	case *preset != "":
		p, ok := busysim.Presets[*preset]
		if !ok {
			return fs.usageError("unknown preset %q; want steady or flappy", *preset)
		}
		sc = p
	case explicit == 0:
		sc = busysim.Presets["steady"]
	}
	if err := sc.Validate(); err != nil {
		return fs.usageError("%v", err)
	}
	if err := busysim.RunBoth(stdout, sc); err != nil {
		return fs.failure("%v", err)
	}
	return exitOK
}

// report prints a simulation's result res: as indented JSON with asJSON,
// else with table; then, if chartPath is set, draws it with chart and
// says where (not in JSON mode, whose stdout is the JSON alone). It
// returns the command's exit status.
func (f *flagSet) report(res any, asJSON bool, table func(io.Writer), chartPath string, chart func(path string) error) int {
	if asJSON {
		enc := json.NewEncoder(f.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return f.failure("%v", err)
		}
	} else {
		table(f.stdout)
	}
	if chartPath != "" {
		if err := chart(chartPath); err != nil {
			return f.failure("chart: %v", err)
		}
		if !asJSON {
			fmt.Fprintf(f.stdout, "\nchart: %s\n", chartPath)
		}
	}
	return exitOK
}
