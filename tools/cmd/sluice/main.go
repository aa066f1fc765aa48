// Command sluice is Sluice's command-line tool. Its commands, as `sluice -h`
// lists them (a test keeps this list the same):
//
//	demo   busy throttling on three in-process TChannel servers, one overloaded
//	call   make one raw or JSON call through Sluice's pipeline (like yab and tcurl)
//	bench  load generator, as fast as it can or at a rate: throughput, latency, attempts, errors
//	serve  a TChannel server (echo, fail, busy) to try call and bench on
//
// The commands that link heavy modules (doorman, sim, faults, hostile,
// etcd:// targets, bench --rolling-deploy and --chart) are sluice-lab's
// (tools/cmd/sluice-lab), which keeps sluice's first `go run` quick.
// "sluice help CMD" or "sluice CMD -h" describes a command with examples.
// Every command exits 0 on success, 1 when a call, a run or a server
// failed, and 2 on a usage error, having done nothing.
package main

import (
	"os"

	"github.com/sluice-rpc/sluice/tools/cmd/internal/cli"
)

func main() {
	os.Exit(cli.Run(os.Args[1:], os.Stdout, os.Stderr, nil))
}
