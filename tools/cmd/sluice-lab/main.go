// Command sluice-lab is sluice with the parts that link heavy modules
// (gRPC and etcd's client, gonum's plot, toxiproxy, an embedded etcd):
// every command of sluice, and these (labTable's list; a test keeps the
// two the same):
//
//	doorman serve  a Doorman lease server
//	doorman get    ask a Doorman server for a lease, once or --watch
//	doorman load   measure a Doorman server's GetCapacity throughput
//	doorman flood  flood a Doorman server with new resource ids, timing a side client
//	sim busy       TChannel's throttling on busy responses, second by second
//	sim ratelimit  rate-limit pacers against a GCRA server, 30 simulated minutes
//	sim shed       a server's adaptive concurrency limit against a queue, second by second
//	sim doorman    Doorman server trees converging as demands change and servers fail
//	faults         fault injection: what refused, reset, silent, killed or declining peers cost a client
//	hostile        attack a server as a hostile peer would: does it survive, stay bounded, keep serving
//
// It adds bench --rolling-deploy and --chart, and etcd:// targets to
// call, bench and serve (-P/--peer-list, --register); sluice, asked for
// any of them, says to run sluice-lab.
package main

import (
	"io"
	"os"

	"github.com/sluice-rpc/sluice/tools/benchmarks/deploy"
	"github.com/sluice-rpc/sluice/tools/benchmarks/faults"
	"github.com/sluice-rpc/sluice/tools/benchmarks/hostile"
	"github.com/sluice-rpc/sluice/tools/cmd/internal/cli"
)

func main() {
	// faults, hostile and bench --rolling-deploy run children of this
	// binary, which serve (or attack) and exit here.
	faults.ServeChildIfAsked()
	hostile.RunChildIfAsked()
	deploy.ServeChildIfAsked()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

var labHelp = cli.Help{
	Synopsis: `sluice-lab COMMAND [flags]
sluice-lab help COMMAND
sluice-lab --version`,
	About: `Sluice's command-line tool with its heavy parts, which link gRPC and etcd's
client, gonum's plot, toxiproxy and an embedded etcd server: every command
of sluice (demo, call, bench, serve) and those below, etcd:// peer lists and
registration, bench --rolling-deploy and bench's charts (--chart). The
everyday commands are in sluice, lighter to build and run (go run
./tools/cmd/sluice).
Exit status: 0 on success, 1 when a call, a run or a server failed, 2 on a
usage error.`,
	Examples: `sluice-lab doorman serve --config doorman.yaml --listen 127.0.0.1:6000
sluice-lab serve --register etcd://127.0.0.1:2379/services/echo
sluice-lab sim busy --preset flappy
sluice-lab sim ratelimit --chart sleep.png
sluice-lab faults --ci
sluice-lab hostile --ci
sluice-lab bench --rolling-deploy --rows dns,static
sluice-lab bench --closed-loop --chart closedloop.png
sluice-lab help faults`,
}

// labTable is what sluice-lab adds to sluice.
func labTable() *cli.Lab {
	return &cli.Lab{Name: "sluice-lab", Help: labHelp,
		Commands: []cli.Command{
			cli.NewGroupUntilInterrupted("sluice-lab doorman", doormanHelp, doormanSubs),
			simGroup(),
			cli.Leaf("faults", "fault injection: what refused, reset, silent, killed or declining peers cost a client", cli.UntilInterrupted(faultsRun)),
			cli.Leaf("hostile", "attack a server as a hostile peer would: does it survive, stay bounded, keep serving", cli.UntilInterrupted(hostileRun)),
		},
		RollingDeploy: addDeployFlags,
		Charts:        charts{},
		Etcd:          etcdTargets{},
	}
}

// run runs sluice-lab's args (without the program name) and returns the
// exit code.
func run(args []string, stdout, stderr io.Writer) int {
	return cli.Run(args, stdout, stderr, labTable())
}
