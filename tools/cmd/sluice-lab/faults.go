package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-rpc/sluice/internal/testkit/slowtest"
	"github.com/sluice-rpc/sluice/tools/benchmarks/faults"
	"github.com/sluice-rpc/sluice/tools/cmd/internal/cli"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

var faultsHelp = cli.Help{
	Synopsis: `sluice-lab faults [flags]`,
	About: `Measures how a Sluice client behaves when its peers fail. Each scenario starts
three peers on 127.0.0.1 behind in-process fault points (listeners that refuse,
accept and close, or swallow the handshake; toxiproxy's reset, latency,
bandwidth and timeout toxics; a server in a child process killed with SIGKILL
or stopped with SIGSTOP; handlers answering DECLINED or BUSY, or UNEXPECTED
to half their calls), sends calls at --rps with a --timeout each under each
client setup where the policy matters (no policy, retry, hedging), and
prints one table row per run: calls, errors by code, attempts, handler
executions and TCP connections per call, the slowest call against its
deadline, how long a failed peer was still chosen, goroutines and heap after
the run. Then one line per run: "ok", or each promise of Sluice's failure
handling contract (the README's "When things break") it broke. The full
size takes about five minutes; --ci about a minute and a half.

Scenarios: %s

` + cli.OutputJSONHelp + ` It holds every run's figures and the
promises it broke.

Exit status: 0 when every run was made (whatever the verdicts) or the suite was
interrupted, 1 when a run could not be made, 2 on a usage error.`,
	Examples: `sluice-lab faults                                   # every scenario, full size
sluice-lab faults --scenarios kill,freeze --rps 200 --duration 30s
sluice-lab faults --ci --markdown                   # small, as go test runs it, as a Markdown table
sluice-lab faults --ci -o json | jq '.runs[] | {scenario: .config.scenario, contract_broken}'`,
}

// faultsRun runs `sluice-lab faults`, printing the table and the
// contract's verdicts of the runs made until ctx ends.
func faultsRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	s := newSuite("faults", faultsHelp, faults.Scenarios(), "scenarios", "comma-separated `SCENARIOS` to run, or all",
		"the CI size: one to three seconds a run (6s for freeze and stall)", stdout, stderr)
	rps := s.Float64("rps", faults.DefaultRate, "arrival rate: calls per second, sent on schedule whether or not earlier ones returned")
	duration := s.Duration("duration", 0, "every run's duration, overriding the size's (mid-run faults strike a quarter in, at most 3s)")
	deadline := s.Duration("timeout", faults.DefaultDeadline, "each call's deadline, across its attempts")
	small := s.Bool("small", false, "the same as --ci")
	list, code, ok := parseSuite(s, args, faults.ParseScenarios)
	if !ok {
		return code
	}
	switch {
	case !(*rps > 0 && *rps <= faults.MaxRate):
		return s.UsageError("--rps is %v, must be in (0, %d]", *rps, faults.MaxRate)
	case *duration < 0 || *duration > faults.MaxDuration:
		return s.UsageError("--duration is %v, must be in (0, %v] (or 0 for the size's)", *duration, faults.MaxDuration)
	case *deadline <= 0 || *deadline > faults.MaxDeadline:
		return s.UsageError("--timeout is %v, must be in (0, %v]", *deadline, faults.MaxDeadline)
	}
	suite := faults.Suite{Scenarios: list, Rate: *rps, Duration: *duration, Deadline: *deadline}
	if *s.ci || *small {
		suite.Size = faults.CI
	}
	cfgs, err := suite.Configs()
	if err != nil {
		return s.UsageError("%v", err)
	}
	// toxiproxy's bandwidth toxic logs through zerolog's global logger,
	// at trace level unless told otherwise.
	zerolog.SetGlobalLevel(zerolog.InfoLevel)
	var want time.Duration
	for _, c := range cfgs {
		want += c.Duration.D()
	}
	s.progress("sluice-lab faults: %d runs, %s size, about %v of load (%s/%s, race detector: %v)",
		len(cfgs), suite.Size, want.Round(time.Second), runtime.GOOS, runtime.GOARCH, slowtest.Race)
	results, err := suite.Run(ctx, func(r *faults.Result) {
		s.progress("  %s/%s: %d calls in %.1fs", r.Config.Scenario, r.Config.Setup, r.Calls, r.Elapsed.D().Seconds())
	})
	return s.ReportMade(ctx, len(results), err, s.asJSON,
		func() any { return newFaultsReport(*rps, *deadline, suite.Size, results, ctx.Err() != nil) },
		func(w io.Writer) error {
			fmt.Fprintf(w, "%g calls/s, deadline %v, %s size\n\n", *rps, *deadline, suite.Size)
			if err := faults.WriteTable(w, results, *s.markdown); err != nil {
				return err
			}
			fmt.Fprintln(w)
			failed, err := faults.WriteChecks(w, faults.DefaultContract(), results)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "\n%d of %d runs broke the failure handling contract\n", failed, len(results))
			return nil
		}, "runs")
}

// faultsReport is `sluice-lab faults -o json`'s report; Interrupted says
// the suite was cut short.
type faultsReport struct {
	RPS               float64           `json:"rps"`
	Timeout           millis.Duration   `json:"timeout_ms"`
	Size              faults.Size       `json:"size"`
	Runs              []faultsRunReport `json:"runs"`
	RunsBrokeContract int               `json:"runs_broke_contract"`
	Interrupted       bool              `json:"interrupted"`
}

// faultsRunReport is one run's figures, per call too, and the promises of
// the failure handling contract it broke. FirstShare is null when no call
// started a second after the fault; AfterStreakShare when none started
// after the erroring peer's first failures in a row (or there is no such
// peer).
type faultsRunReport struct {
	*faults.Result
	FirstShare               *float64        `json:"first_share"`
	AfterStreakShare         *float64        `json:"after_streak_share"`
	AttemptsPerCall          float64         `json:"attempts_per_call"`
	ExecutionsPerCall        float64         `json:"executions_per_call"`
	ConnectsPerCall          float64         `json:"connects_per_call"`
	DialsPerCall             float64         `json:"dials_per_call"`
	ConnectsPerSecondAfter1s float64         `json:"connects_per_second_after_1s"`
	OverDeadline             millis.Duration `json:"over_deadline_ms"`
	ContractKept             bool            `json:"contract_kept"`
	ContractBroken           []string        `json:"contract_broken"`
}

func newFaultsReport(rps float64, deadline time.Duration, size faults.Size, results []*faults.Result, interrupted bool) faultsReport {
	rep := faultsReport{RPS: rps, Timeout: millis.Duration(deadline), Size: size, Interrupted: interrupted}
	contract := faults.DefaultContract()
	for _, r := range results {
		run := faultsRunReport{Result: r, AttemptsPerCall: r.AttemptsPerCall(), ExecutionsPerCall: r.ExecutionsPerCall(),
			ConnectsPerCall: r.ConnectsPerCall(), DialsPerCall: r.DialsPerCall(), ConnectsPerSecondAfter1s: r.ConnectsPerSecondAfter1s(),
			OverDeadline: millis.Duration(r.OverDeadline()), ContractBroken: contract.Check(r)}
		if r.FirstShare >= 0 {
			run.FirstShare = &r.FirstShare
		}
		if share := r.AfterStreakShare(); share >= 0 {
			run.AfterStreakShare = &share
		}
		run.ContractKept = len(run.ContractBroken) == 0
		if !run.ContractKept {
			rep.RunsBrokeContract++
		}
		rep.Runs = append(rep.Runs, run)
	}
	return rep
}
