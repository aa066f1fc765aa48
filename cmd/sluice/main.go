// Command sluice is Sluice's command-line tool.
//
//	sluice demo                 busy throttling on three in-process servers
//	sluice call [flags]         one call through the pipeline, with retries or hedges
//	sluice bench [flags]        load: latency quantiles, attempts, busy and throttled counts
//	sluice sim busy [flags]     the busy-throttling design's simulation
//	sluice sim ratelimit        the rate-limit pacers against a GCRA server
//	sluice doorman serve|get    a Doorman lease server, or a client of one
//	sluice faults [flags]       peers failing behind fault points: what a failure costs
//
// Run "sluice help" for the list and "sluice CMD -h" for a command's flags.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/sluice-rpc/sluice/benchmarks/faults"
)

func main() {
	// `sluice faults` runs some of its servers as children of this very
	// binary; a child serves, and exits, here.
	faults.ServeChildIfAsked()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type command struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"demo", "busy throttling on three in-process TChannel servers, one overloaded", demoCmd},
		{"call", "make one raw or JSON call through Sluice's pipeline (like tcurl)", callCmd},
		{"bench", "open-loop load generator: latency quantiles, attempts, busy/throttled, errors", benchCmd},
		{"sim", "simulations: sim busy (busy throttling), sim ratelimit (rate-limit pacers)", simCmd},
		{"doorman", "a Doorman-compatible lease server (serve) and client (get)", doormanCmd},
		{"faults", "fault injection: what refused, reset, silent, killed or declining peers cost a client", faultsCmd},
	}
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "sluice: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: sluice COMMAND [flags]")
	fmt.Fprintln(w)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
}

// parseFlags parses a command's flags; the commands take flags only, so a
// leftover word (which the flag package would stop at, silently ignoring
// every flag after it) is an error. It reports whether to go on; on false
// the command exits 2, the message already written to fs's output.
func parseFlags(fs *flag.FlagSet, args []string) bool {
	if err := fs.Parse(args); err != nil {
		return false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q (flags only)\n", fs.Name(), fs.Arg(0))
		return false
	}
	return true
}
