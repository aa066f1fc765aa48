package cli

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/tools/benchmarks/balancing"
	"github.com/sluice-rpc/sluice/tools/benchmarks/closedloop"
)

var sluiceHelp = Help{
	Synopsis: `sluice COMMAND [flags]
sluice help COMMAND
sluice --version`,
	About: `Sluice's command-line tool: try Sluice's overload handling (demo), call and
load TChannel services through Sluice's pipeline (call, bench, serve). The
Doorman server and client (doorman), etcd:// peer lists and registration,
the simulations, fault injection, hostile peers, bench --rolling-deploy and
the charts (--chart) are in sluice-lab, which links the heavy modules they
need (go run ./tools/cmd/sluice-lab).
The flags follow yab's where yab has one (-p/--peer, -P/--peer-list,
-s/--service, -m/--method, -e/--encoding, -r/--request, --timeout).
Exit status: 0 on success, 1 when a call, a run or a server failed, 2 on a
usage error.`,
	Examples: `sluice demo
sluice serve --listen 127.0.0.1:4040 &
sluice call -p 127.0.0.1:4040 -s echo -m echo -r '{"key":"a"}' | jq .
sluice bench -p 127.0.0.1:4040 -s echo -m echo -n 100000
sluice bench -p 127.0.0.1:4040 -s echo -m echo --rps 500 -d 10s -o json
sluice help bench`,
}

// Lab is what sluice-lab adds to sluice: the commands and modes that link
// heavy modules, kept out of the everyday binary so that its first `go
// run` builds little. A nil *Lab is sluice's.
type Lab struct {
	// Name is the program's name, "sluice-lab", and Help its top-level help.
	Name string
	Help Help
	// Commands are added to sluice's, after them.
	Commands []Command
	// RollingDeploy adds bench --rolling-deploy: it defines the mode's own
	// flags on bench's flag set, before they are parsed.
	RollingDeploy func(fs *FlagSet) BenchMode
	// Charts draws the charts of bench --closed-loop and --balancing.
	Charts Charts
	// Etcd follows and registers under etcd:// targets (call's and bench's
	// -P/--peer-list, serve's --register).
	Etcd Etcd
}

// A BenchMode is a mode of bench that sluice-lab adds.
type BenchMode interface {
	// On reports whether the mode's flag was given.
	On() bool
	// OwnFlagGiven names a flag given that only the mode reads, "" if none.
	OwnFlagGiven(fs *FlagSet) string
	// Run runs the mode with bench's flags a.
	Run(ctx context.Context, fs *FlagSet, a BenchArgs, stdout, stderr io.Writer) int
}

// BenchArgs are bench's flags that a BenchMode may read.
type BenchArgs struct {
	RPS     float64
	Timeout time.Duration
	Shape   string // --embedded-latency
	JSON    bool
}

// Charts draws the charts of bench's modes (--chart).
type Charts interface {
	// CheckPath checks a chart's file name before a run.
	CheckPath(path string) error
	// ClosedLoop draws --closed-loop's result to path.
	ClosedLoop(res *closedloop.Result, path string) error
	// Balancing draws --balancing's result, each scenario to the file of
	// res.ChartPaths(path).
	Balancing(res *balancing.Result, path string) error
}

// or returns l, or sluice's (which adds nothing) when l is nil.
func (l *Lab) or() *Lab {
	if l == nil {
		return &Lab{Name: "sluice", Help: sluiceHelp}
	}
	return l
}

// labCommands are the commands only sluice-lab has; a test keeps the list
// the same as sluice-lab's table.
var labCommands = []string{"doorman", "sim", "faults", "hostile"}

// labOnly is the usage error of sluice asked for what only sluice-lab has:
// what, and how to run it there.
func labOnly(what, how string) string {
	return fmt.Sprintf("%s is in sluice-lab, which links the heavy modules it needs: go run ./tools/cmd/sluice-lab %s (or go install github.com/sluice-rpc/sluice/tools/cmd/sluice-lab)", what, how)
}

// Command is a command of the table: see Leaf and NewGroup.
type Command = command

// Name is the command's word on the command line.
func (c command) Name() string { return c.name }

// Leaf returns the command name that run runs, summary its line in help.
func Leaf(name, summary string, run func(args []string, stdout, stderr io.Writer) int) Command {
	return command{name: name, summary: summary, run: run}
}

// NewGroup returns the command made of subs, named by the last word of
// name ("sluice-lab sim"), with help.
func NewGroup(name string, help Help, subs ...Command) Command {
	g := group{name: name, help: help, subs: subs}
	return command{name: name[strings.LastIndex(name, " ")+1:], run: g.run, subs: subs}
}

// NewGroupUntilInterrupted is NewGroup for subcommands that run until
// the program is interrupted (SIGINT or SIGTERM): subs makes them for the
// context that ends then.
func NewGroupUntilInterrupted(name string, help Help, subs func(ctx context.Context) []Command) Command {
	c := NewGroup(name, help, subs(context.Background())...)
	c.run = UntilInterrupted(func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
		return NewGroup(name, help, subs(ctx)...).Run(args, stdout, stderr)
	})
	return c
}

// Run runs the command with args (after its name): the exit code.
func (c command) Run(args []string, stdout, stderr io.Writer) int { return c.run(args, stdout, stderr) }

// topLevel is the command table, from which `sluice -h` lists them all.
func topLevel(lab *Lab) group {
	lab = lab.or()
	demo := func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
		return demoRun(ctx, args, stdout, stderr, nil)
	}
	bench := func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
		return benchRun(ctx, args, lab, stdout, stderr)
	}
	call := func(args []string, stdout, stderr io.Writer) int { return callCmd(args, lab, stdout, stderr) }
	serve := func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
		return ServeContext(ctx, args, lab, stdout, stderr)
	}
	return group{name: lab.Name, help: lab.Help, subs: append([]command{
		{name: "demo", summary: "busy throttling on three in-process TChannel servers, one overloaded", run: UntilInterrupted(demo)},
		{name: "call", summary: "make one raw or JSON call through Sluice's pipeline (like yab and tcurl)", run: call},
		{name: "bench", summary: "load generator, as fast as it can or at a rate: throughput, latency, attempts, errors", run: UntilInterrupted(bench)},
		{name: "serve", summary: "a TChannel server (echo, fail, busy) to try call and bench on", run: UntilInterrupted(serve)},
	}, lab.Commands...)}
}

// Run runs the command line args (without the program name) of sluice
// (lab nil) or sluice-lab, and returns the exit code.
func Run(args []string, stdout, stderr io.Writer, lab *Lab) int {
	name := lab.or().Name
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version") {
		if len(args) > 1 {
			fmt.Fprintf(stderr, "%s: unexpected argument %q after %s\n", name, args[1], args[0])
			return ExitUsage
		}
		fmt.Fprintf(stdout, "%s %s\n", name, version())
		return ExitOK
	}
	if lab == nil && len(args) > 0 {
		cmd := args[0]
		if cmd == "help" && len(args) > 1 {
			cmd = args[1]
		}
		if slices.Contains(labCommands, cmd) {
			fmt.Fprintf(stderr, "sluice: %s\n", labOnly("sluice "+cmd, cmd))
			return ExitUsage
		}
	}
	return topLevel(lab).run(args, stdout, stderr)
}

// version is the main module's version as the go command stamped it, or
// "(devel)".
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
