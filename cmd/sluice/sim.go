package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/sluice-rpc/sluice/internal/busysim"
)

func simCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: sluice sim busy|ratelimit [flags]")
		return 2
	}
	switch args[0] {
	case "busy":
		return simBusyCmd(args[1:], stdout, stderr)
	case "ratelimit":
		return simRatelimitCmd(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "sluice sim: unknown simulation %q; want busy or ratelimit\n", args[0])
	return 2
}

func simBusyCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sluice sim busy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	preset := fs.String("preset", "", "a published scenario: steady or flappy (default steady when no other flag is set)")
	rps := fs.Int("rps", 5000, "requests per second offered")
	rpsPattern := fs.String("rps-pattern", "steady", "request pattern: steady, flappy, linear_grow, linear_decrease")
	busyN := fs.Int("busy", 3000, "busy responses per second (never more than the requests sent)")
	busyPattern := fs.String("busy-pattern", "steady", "busy pattern: steady, flappy, linear_grow, linear_decrease")
	if !parseFlags(fs, args) {
		return 2
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
		fmt.Fprintln(stderr, "sluice sim busy: --preset cannot be combined with --rps, --rps-pattern, --busy or --busy-pattern")
		return 2
	case *preset != "":
		p, ok := busysim.Presets[*preset]
		if !ok {
			fmt.Fprintf(stderr, "sluice sim busy: unknown preset %q; want steady or flappy\n", *preset)
			return 2
		}
		sc = p
	case explicit == 0:
		sc = busysim.Presets["steady"]
	}
	if err := busysim.RunBoth(stdout, sc); err != nil {
		fmt.Fprintf(stderr, "sluice sim busy: %v\n", err)
		return 2
	}
	return 0
}
