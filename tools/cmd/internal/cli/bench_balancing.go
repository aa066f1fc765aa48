package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/sluice-rpc/sluice/tools/benchmarks/balancing"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

// benchBalancing runs `sluice bench --balancing`.
func benchBalancing(ctx context.Context, fs *FlagSet, a modeArgs, stdout, stderr io.Writer) int {
	if code, ok := ModeFlags(fs, "--balancing", "sets its own servers, load and client", "makes calls with no retries or hedges",
		"balancing", "ci", "chart", "gogc", "seed", "timeout", "output"); !ok {
		return code
	}
	list, err := balancing.ParseScenarios(a.balancing)
	if err != nil {
		return fs.UsageError("--balancing: %v", strings.TrimPrefix(err.Error(), "balancing: "))
	}
	if err := checkGOGC(a.gogc); err != nil {
		return fs.UsageError("%v", err)
	}
	cfg := balancing.Config{Scenarios: list, Seed: a.seed, GCPercent: a.gogc}
	if a.ci {
		cfg.Size = balancing.CI
	}
	if fs.IsSet("timeout") {
		if a.timeout <= 0 {
			return fs.UsageError("--timeout is %v, must be > 0", a.timeout)
		}
		cfg.Timeout = millis.Duration(a.timeout)
	}
	if a.seed == 0 {
		return fs.UsageError("--seed is 0, must be >= 1")
	}
	if err := cfg.Validate(); err != nil {
		return fs.UsageError("%v", strings.TrimPrefix(err.Error(), "balancing: "))
	}
	if a.chart != "" {
		if err := a.charts.CheckPath(a.chart); err != nil {
			return fs.UsageError("--chart: %v", err)
		}
	}
	cfg.Progress = func(s string) { fmt.Fprintf(stderr, "running: %s\n", s) }
	res, err := balancing.Run(ctx, cfg)
	interrupted, code := fs.ReportRun(ctx, res, err, a.json, "scenarios")
	if code != ExitOK {
		return code
	}
	if a.chart != "" && !interrupted {
		if err := a.charts.Balancing(res, a.chart); err != nil {
			return fs.Failure("chart: %v", err)
		}
		if !a.json {
			fmt.Fprintln(stdout)
			for _, s := range list {
				fmt.Fprintf(stdout, "chart: %s\n", res.ChartPaths(a.chart)[s])
			}
		}
	}
	return ExitOK
}
