// Command sluice is Sluice's command-line tool. Its commands, as `sluice -h`
// lists them from the command table (package cli's topLevel; a test keeps
// this list the same):
//
//	demo   busy throttling on three in-process TChannel servers, one overloaded
//	call   make one raw or JSON call through Sluice's pipeline (like yab and tcurl)
//	bench  load generator, as fast as it can or at a rate: throughput, latency, attempts, errors
//	serve  a TChannel server (echo, fail, busy) to try call and bench on
//
// The Doorman server and client (doorman), etcd:// peer lists and
// registration, the simulations (sim), fault injection (faults), hostile
// peers (hostile), bench --rolling-deploy and bench's charts (--chart) are
// in sluice-lab (tools/cmd/sluice-lab), which links the heavy modules they
// need (gRPC and etcd's client, gonum's plot, toxiproxy, an embedded etcd
// server); sluice, asked for one of them, says so. This keeps sluice's
// first `go run` quick.
//
// "sluice help CMD" or "sluice CMD -h" describes a command, its flags and
// examples; "sluice --version" prints the version. Every command exits 0
// on success, 1 when a call, a run or a server failed, and 2 on a usage
// error (a bad flag, value or command), having done nothing. The commands
// with a report print it as a table, or with -o json as one JSON object.
package main

import (
	"os"

	"github.com/sluice-rpc/sluice/tools/cmd/internal/cli"
)

func main() {
	os.Exit(cli.Run(os.Args[1:], os.Stdout, os.Stderr, nil))
}
