// Command sluice is Sluice's command-line tool. Its commands, as `sluice -h`
// lists them from the command table (topLevel; a test keeps this list the
// same):
//
//	demo           busy throttling on three in-process TChannel servers, one overloaded
//	call           make one raw or JSON call through Sluice's pipeline (like yab and tcurl)
//	bench          load generator, as fast as it can or at a rate: throughput, latency, attempts, errors
//	serve          a TChannel server (echo, fail, busy) to try call and bench on
//	sim busy       TChannel's throttling on busy responses, second by second
//	sim ratelimit  rate-limit pacers against a GCRA server, 30 simulated minutes
//	sim shed       a server's adaptive concurrency limit against a queue, second by second
//	sim doorman    Doorman server trees converging as demands change and servers fail
//	doorman serve  a Doorman lease server
//	doorman get    ask a Doorman server for a lease, once or --watch
//	doorman load   measure a Doorman server's GetCapacity throughput
//	doorman flood  flood a Doorman server with new resource ids, timing a side client
//	faults         fault injection: what refused, reset, silent, killed or declining peers cost a client
//	hostile        attack a server as a hostile peer would: does it survive, stay bounded, keep serving
//
// "sluice help CMD" or "sluice CMD -h" describes a command, its flags and
// examples; "sluice --version" prints the version. Every command exits 0
// on success, 1 when a call, a run or a server failed, and 2 on a usage
// error (a bad flag, value or command), having done nothing. The commands
// with a report print it as a table, or with -o json as one JSON object.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/sluice-rpc/sluice/tools/benchmarks/deploy"
	"github.com/sluice-rpc/sluice/tools/benchmarks/faults"
	"github.com/sluice-rpc/sluice/tools/benchmarks/hostile"
)

func main() {
	// `sluice faults` runs some of its servers as children of this very
	// binary; a child serves, and exits, here.
	faults.ServeChildIfAsked()
	hostile.RunChildIfAsked()  // `sluice hostile`'s attackers and servers
	deploy.ServeChildIfAsked() // `sluice bench --rolling-deploy`'s fleet
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

var sluiceHelp = helpText{
	synopsis: `sluice COMMAND [flags]
sluice help COMMAND
sluice --version`,
	about: `Sluice's command-line tool: try Sluice's overload handling (demo), call and
load TChannel services through Sluice's pipeline (call, bench, serve), run the
simulations and the fault-injection suite, and serve or query Doorman leases.
The flags follow yab's where yab has one (-p/--peer, -P/--peer-list,
-s/--service, -m/--method, -e/--encoding, -r/--request, --timeout).
Exit status: 0 on success, 1 when a call, a run or a server failed, 2 on a
usage error.`,
	examples: `sluice demo
sluice serve --listen 127.0.0.1:4040 &
sluice call -p 127.0.0.1:4040 -s echo -m echo -r '{"key":"a"}' | jq .
sluice bench -p 127.0.0.1:4040 -s echo -m echo -n 100000
sluice bench -p 127.0.0.1:4040 -s echo -m echo --rps 500 -d 10s -o json
sluice help bench`,
}

// topLevel is the command table: every command, and in the groups (sim,
// doorman) their subcommands, from which `sluice -h` lists them all.
func topLevel() group {
	doorman := doormanGroup(context.Background()).command()
	doorman.run = untilInterrupted(doormanRun) // its subcommands run until interrupted
	return group{name: "sluice", help: sluiceHelp, subs: []command{
		{name: "demo", summary: "busy throttling on three in-process TChannel servers, one overloaded", run: untilInterrupted(demoCmd)},
		{name: "call", summary: "make one raw or JSON call through Sluice's pipeline (like yab and tcurl)", run: callCmd},
		{name: "bench", summary: "load generator, as fast as it can or at a rate: throughput, latency, attempts, errors", run: untilInterrupted(benchRun)},
		{name: "serve", summary: "a TChannel server (echo, fail, busy) to try call and bench on", run: untilInterrupted(serveRun)},
		simGroup().command(),
		doorman,
		{name: "faults", summary: "fault injection: what refused, reset, silent, killed or declining peers cost a client", run: untilInterrupted(faultsRun)},
		{name: "hostile", summary: "attack a server as a hostile peer would: does it survive, stay bounded, keep serving", run: untilInterrupted(hostileRun)},
	}}
}

// run runs the command line args (without the program name) and returns
// the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version") {
		if len(args) > 1 {
			fmt.Fprintf(stderr, "sluice: unexpected argument %q after %s\n", args[1], args[0])
			return exitUsage
		}
		fmt.Fprintf(stdout, "sluice %s\n", version())
		return exitOK
	}
	return topLevel().run(args, stdout, stderr)
}

// version is the main module's version as the go command stamped it
// (a tag, or a pseudo-version from the VCS), or "(devel)".
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
