package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/tools/benchmarks/balancing"
	"github.com/sluice-rpc/sluice/tools/internal/chart"
)

// balancingArgs are the flags --balancing reads.
type balancingArgs struct {
	scenarios string
	ci        bool
	chart     string
	gogc      int
	seed      uint64
	json      bool
}

// benchBalancing runs `sluice bench --balancing`.
func benchBalancing(ctx context.Context, fs *flagSet, a balancingArgs, timeoutSet bool, timeout time.Duration, stdout, stderr io.Writer) int {
	if code, ok := modeFlags(fs, "--balancing", "sets its own servers, load and client", "makes calls with no retries or hedges",
		"balancing", "ci", "chart", "gogc", "seed", "timeout", "output"); !ok {
		return code
	}
	list, err := balancing.ParseScenarios(a.scenarios)
	if err != nil {
		return fs.usageError("--balancing: %v", strings.TrimPrefix(err.Error(), "balancing: "))
	}
	if err := checkGOGC(a.gogc); err != nil {
		return fs.usageError("%v", err)
	}
	cfg := balancing.Config{Scenarios: list, Seed: a.seed, GCPercent: a.gogc}
	if a.ci {
		cfg.Size = balancing.CI
	}
	if timeoutSet {
		if timeout <= 0 {
			return fs.usageError("--timeout is %v, must be > 0", timeout)
		}
		cfg.Timeout = timeout
	}
	if a.seed == 0 {
		return fs.usageError("--seed is 0, must be >= 1")
	}
	if err := cfg.Validate(); err != nil {
		return fs.usageError("%v", strings.TrimPrefix(err.Error(), "balancing: "))
	}
	if a.chart != "" {
		if err := chart.CheckPath(a.chart); err != nil {
			return fs.usageError("--chart: %v", err)
		}
	}
	cfg.Progress = func(s string) { fmt.Fprintf(stderr, "running: %s\n", s) }
	res, err := balancing.Run(ctx, cfg)
	interrupted, code := fs.reportRun(ctx, res, err, a.json, stdout)
	if code != exitOK {
		return code
	}
	if a.chart != "" && !interrupted {
		if err := res.WriteCharts(a.chart); err != nil {
			return fs.failure("chart: %v", err)
		}
		if !a.json {
			fmt.Fprintln(stdout)
			for _, s := range list {
				fmt.Fprintf(stdout, "chart: %s\n", res.ChartPaths(a.chart)[s])
			}
		}
	}
	if interrupted {
		fmt.Fprintln(stderr, "sluice bench: interrupted; the scenarios done so far are above")
	}
	return exitOK
}
