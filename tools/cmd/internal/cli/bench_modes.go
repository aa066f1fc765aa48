package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/tools/benchmarks/amplification"
	"github.com/sluice-rpc/sluice/tools/benchmarks/balancing"
	"github.com/sluice-rpc/sluice/tools/benchmarks/closedloop"
	"github.com/sluice-rpc/sluice/tools/benchmarks/load"
	"github.com/sluice-rpc/sluice/tools/internal/benchrun"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

// ModeFlags refuses, by name, a flag given that a mode of bench (mode,
// "--closed-loop") does not read: it takes only the flags of allowed (long
// names), so that a flag added to bench later is refused by the modes
// until one reads it. why says what the mode does instead; a retry or
// hedging flag is refused with noPolicy. It returns false with the exit
// code on a refusal.
func ModeFlags(fs *FlagSet, mode, why, noPolicy string, allowed ...string) (int, bool) {
	bad := ""
	fs.Visit(func(f *flag.Flag) {
		if name := cmp.Or(fs.long[f.Name], f.Name); bad == "" && !slices.Contains(allowed, name) {
			bad = name
		}
	})
	switch {
	case bad == "":
		return 0, true
	case strings.HasPrefix(bad, "retry-") || strings.HasPrefix(bad, "hedge-") || bad == "service-config":
		why = noPolicy
	}
	return fs.UsageError("%s %s; drop --%s", mode, why, bad), false
}

// modeArgs are the flags of bench's runs: the modes --closed-loop,
// --balancing and --amplification take them whole.
type modeArgs struct {
	embedded, workers, callers, gogc          int
	shape, chart, mix, sheddings, throttlings string
	balancing, amplification                  string
	load, heavy, rps                          float64
	timeout, duration                         time.Duration
	seed                                      uint64
	ci, json                                  bool
	charts                                    Charts // sluice-lab's, nil in sluice (which refuses --chart)
}

// checkGOGC checks --gogc, of --closed-loop and --balancing.
func checkGOGC(percent int) error {
	if percent == 0 || percent < -1 {
		return fmt.Errorf("--gogc is %d, must be a positive percent or -1 (keep the process's)", percent)
	}
	return nil
}

// ready makes a mode's last checks before its run: --seed, err of its
// config's Validate, told without pkg's prefix, then --chart's file name.
func (a modeArgs) ready(fs *FlagSet, err error, pkg string) (int, bool) {
	if a.seed == 0 {
		return fs.UsageError("--seed is 0, must be >= 1"), false
	}
	if err != nil {
		return fs.UsageError("%v", strings.TrimPrefix(err.Error(), pkg+": ")), false
	}
	if a.chart != "" {
		if err := a.charts.CheckPath(a.chart); err != nil {
			return fs.UsageError("--chart: %v", err), false
		}
	}
	return 0, true
}

// closedLoopRows reads the flags of --closed-loop's rows into cfg: --mix,
// --callers and --heavy-factor, --shedding and --throttling.
func closedLoopRows(fs *FlagSet, a modeArgs, cfg *closedloop.Config) error {
	if fs.IsSet("mix") {
		mix, err := closedloop.ParseMix(a.mix)
		if err != nil {
			return fmt.Errorf("--mix: %v", err)
		}
		cfg.Mix = mix
	}
	switch {
	case fs.IsSet("callers") && (a.callers < 2 || a.callers > closedloop.MaxCallers):
		return fmt.Errorf("--callers is %d, must be in [2, %d]", a.callers, closedloop.MaxCallers)
	case fs.IsSet("heavy-factor") && !fs.IsSet("callers"):
		return errors.New("--heavy-factor needs --callers")
	case fs.IsSet("heavy-factor") && !(a.heavy >= 1 && a.heavy <= closedloop.MaxHeavyFactor):
		return fmt.Errorf("--heavy-factor is %v, must be in [1, %d]", a.heavy, closedloop.MaxHeavyFactor)
	}
	if fs.IsSet("callers") {
		cfg.Callers, cfg.HeavyFactor = a.callers, a.heavy
	}
	if fs.IsSet("shedding") {
		var err error
		cfg.Sheddings, err = parseList("--shedding", a.sheddings,
			[]closedloop.Shedding{closedloop.NoShedding, closedloop.FixedShedding, closedloop.AdaptiveShedding})
		if err != nil {
			return err
		}
	}
	if fs.IsSet("throttling") {
		list, err := parseList("--throttling", a.throttlings, []string{"off", "on"})
		if err != nil {
			return err
		}
		for _, s := range list {
			cfg.Throttlings = append(cfg.Throttlings, s == "on")
		}
	}
	return nil
}

// parseList reads flag's comma-separated list of some of the names known,
// each at most once, in the order of known.
func parseList[T ~string](flag, v string, known []T) ([]T, error) {
	var got []T
	for _, w := range strings.Split(v, ",") {
		s := T(strings.TrimSpace(w))
		switch {
		case !slices.Contains(known, s):
			return nil, fmt.Errorf("%s: unknown %q, want %s", flag, s, benchrun.Names(known))
		case slices.Contains(got, s):
			return nil, fmt.Errorf("%s: %q is given twice", flag, s)
		}
		got = append(got, s)
	}
	slices.SortFunc(got, func(x, y T) int { return slices.Index(known, x) - slices.Index(known, y) })
	return got, nil
}

// benchClosedLoop runs `sluice bench --closed-loop`.
func benchClosedLoop(ctx context.Context, fs *FlagSet, a modeArgs, stderr io.Writer) int {
	if code, ok := ModeFlags(fs, "--closed-loop", "sets its own servers, load and client", "makes calls with no retries or hedges",
		"closed-loop", "embedded", "embedded-workers", "embedded-latency", "load", "chart", "gogc", "max-duration", "timeout", "output",
		"mix", "callers", "heavy-factor", "shedding", "throttling"); !ok {
		return code
	}
	if !(a.load > 0 && a.load <= 100) {
		return fs.UsageError("--load is %v, must be in (0, 100]", a.load)
	}
	if a.embedded > 1 {
		return fs.UsageError("--closed-loop runs one embedded server; --embedded is %d", a.embedded)
	}
	if err := checkGOGC(a.gogc); err != nil {
		return fs.UsageError("%v", err)
	}
	cfg := closedloop.Config{Workers: a.workers, Load: a.load, Timeout: millis.Duration(a.timeout), GCPercent: a.gogc,
		Progress: func(s string) { fmt.Fprintf(stderr, "running: %s\n", s) }}
	if fs.IsSet("max-duration") {
		cfg.Duration = millis.Duration(a.duration)
	}
	if err := closedLoopRows(fs, a, &cfg); err != nil {
		return fs.UsageError("%v", err)
	}
	if fs.IsSet("embedded-latency") {
		shape, err := load.ParseShape(a.shape)
		if err != nil {
			return fs.UsageError("--embedded-latency: %v", err)
		}
		if shape.FastMin != shape.FastMax || shape.SlowFraction != 0 {
			return fs.UsageError("--embedded-latency: --closed-loop needs a fixed service time, such as fixed:2ms")
		}
		cfg.Service = millis.Duration(shape.FastMin)
	}
	if code, ok := a.ready(fs, cfg.Validate(), "closedloop"); !ok {
		return code
	}
	res, err := closedloop.Run(ctx, cfg)
	if err != nil {
		return fs.Failure("%v", err)
	}
	return fs.Report(res, a.json, res.WriteTable, a.chart, func(path string) error { return a.charts.ClosedLoop(res, path) })
}

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
	cfg := balancing.Config{Scenarios: list, Seed: a.seed, GCPercent: a.gogc, Progress: func(s string) { fmt.Fprintf(stderr, "running: %s\n", s) }}
	if a.ci {
		cfg.Size = balancing.CI
	}
	if fs.IsSet("timeout") {
		if a.timeout <= 0 {
			return fs.UsageError("--timeout is %v, must be > 0", a.timeout)
		}
		cfg.Timeout = millis.Duration(a.timeout)
	}
	if code, ok := a.ready(fs, cfg.Validate(), "balancing"); !ok {
		return code
	}
	res, err := balancing.Run(ctx, cfg)
	if code := fs.reportRun(ctx, res, err, a.json, "scenarios"); code != ExitOK || a.chart == "" || err != nil {
		return code // err: interrupted, no chart
	}
	if err := a.charts.Balancing(res, a.chart); err != nil {
		return fs.Failure("chart: %v", err)
	}
	if !a.json {
		fmt.Fprintln(stdout)
		for _, s := range list {
			fmt.Fprintf(stdout, "chart: %s\n", res.ChartPaths(a.chart)[s])
		}
	}
	return ExitOK
}

// benchAmplification runs `sluice bench --amplification`.
func benchAmplification(ctx context.Context, fs *FlagSet, a modeArgs, stderr io.Writer) int {
	if code, ok := ModeFlags(fs, "--amplification", "sets its own servers, load and client", "sets every layer's retry policy itself",
		"amplification", "ci", "seed", "rps", "max-duration", "output"); !ok {
		return code
	}
	list, err := amplification.ParseScenarios(a.amplification)
	if err != nil {
		return fs.UsageError("--amplification: %v", strings.TrimPrefix(err.Error(), "amplification: "))
	}
	cfg := amplification.Config{Scenarios: list, Seed: a.seed, Rate: a.rps, Duration: millis.Duration(a.duration),
		Progress: func(s string) { fmt.Fprintf(stderr, "running: %s\n", s) }}
	if a.ci {
		ci := amplification.CI()
		cfg.DownFor = ci.DownFor
		cfg.Rate = cmp.Or(cfg.Rate, ci.Rate)
		cfg.Duration = cmp.Or(cfg.Duration, ci.Duration)
	}
	if code, ok := a.ready(fs, cfg.Validate(), "amplification"); !ok {
		return code
	}
	res, err := amplification.Run(ctx, cfg)
	return fs.reportRun(ctx, res, err, a.json, "runs")
}
