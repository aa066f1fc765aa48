// Command sluice is Sluice's command-line tool.
//
//	sluice demo                  busy throttling on three in-process servers
//	sluice call [flags]          one call through Sluice's pipeline; the response body on stdout
//	sluice bench [flags]         load: progress each second, latency quantiles, attempts, errors
//	sluice serve [flags]         a TChannel server to try call and bench on
//	sluice sim busy|ratelimit    the busy-throttling and rate-limit simulations
//	sluice doorman serve|get     a Doorman lease server, or a client of one
//	sluice faults [flags]        peers failing behind fault points: what a failure costs
//	sluice hostile [flags]       hostile peers attacking a server: what each attack costs it
//
// "sluice help CMD" or "sluice CMD -h" describes a command, its flags and
// examples; "sluice --version" prints the version. Every command exits 0
// on success, 1 when a call, a run or a server failed, and 2 on a usage
// error (a bad flag, value or command), having done nothing.
package main

import (
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
sluice bench -p 127.0.0.1:4040 -s echo -m echo --rps 500 -d 10s
sluice help bench`,
}

func topLevel() group {
	return group{name: "sluice", help: sluiceHelp, subs: []command{
		{"demo", "busy throttling on three in-process TChannel servers, one overloaded", untilInterrupted(demoCmd)},
		{"call", "make one raw or JSON call through Sluice's pipeline (like yab and tcurl)", callCmd},
		{"bench", "open-loop load generator: latency quantiles, attempts, busy/throttled, errors", untilInterrupted(benchRun)},
		{"serve", "a TChannel server (echo, fail, busy) to try call and bench on", untilInterrupted(serveRun)},
		{"sim", "simulations: sim busy (busy throttling), sim ratelimit (rate-limit pacers)", simCmd},
		{"doorman", "a Doorman-compatible lease server (serve) and client (get)", untilInterrupted(doormanRun)},
		{"faults", "fault injection: what refused, reset, silent, killed or declining peers cost a client", untilInterrupted(faultsRun)},
		{"hostile", "attack a server as a hostile peer would: does it survive, stay bounded, keep serving", untilInterrupted(hostileRun)},
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
