package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/sluice-rpc/sluice/tools/benchmarks/amplification"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

// benchAmplification runs `sluice bench --amplification`.
func benchAmplification(ctx context.Context, fs *FlagSet, a modeArgs, stdout, stderr io.Writer) int {
	if code, ok := ModeFlags(fs, "--amplification", "sets its own servers, load and client", "sets every layer's retry policy itself",
		"amplification", "ci", "seed", "rps", "max-duration", "output"); !ok {
		return code
	}
	list, err := amplification.ParseScenarios(a.amplification)
	if err != nil {
		return fs.UsageError("--amplification: %v", strings.TrimPrefix(err.Error(), "amplification: "))
	}
	cfg := amplification.Config{Scenarios: list, Seed: a.seed, Rate: a.rps, Duration: millis.Duration(a.duration)}
	if a.ci {
		ci := amplification.CI()
		cfg.DownFor = ci.DownFor
		if cfg.Rate == 0 {
			cfg.Rate = ci.Rate
		}
		if cfg.Duration == 0 {
			cfg.Duration = ci.Duration
		}
	}
	if a.seed == 0 {
		return fs.UsageError("--seed is 0, must be >= 1")
	}
	if err := cfg.Validate(); err != nil {
		return fs.UsageError("%v", strings.TrimPrefix(err.Error(), "amplification: "))
	}
	cfg.Progress = func(s string) { fmt.Fprintf(stderr, "running: %s\n", s) }
	res, err := amplification.Run(ctx, cfg)
	_, code := fs.ReportRun(ctx, res, err, a.json, "runs")
	return code
}
