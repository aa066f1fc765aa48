package faults

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/serviceconfig"
	"github.com/sluice-rpc/sluice/tools/internal/benchrun"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

// Scenario names a fault, the way `sluice-lab faults --scenarios` spells it.
type Scenario string

// The scenarios. Each has three peers of Service.
const (
	// None: three good servers; the baseline.
	None Scenario = "none"
	// Refused: nothing listens at any of the three addresses.
	Refused Scenario = "refused"
	// AcceptClose: all three accept each connection and close it at once.
	AcceptClose Scenario = "accept-close"
	// BlackHole: one of three accepts TCP and never answers TChannel's
	// handshake; the other two are good.
	BlackHole Scenario = "black-hole"
	// Reset: one of three resets every connection from FaultAt on
	// (toxiproxy reset_peer on the client-to-server stream).
	Reset Scenario = "reset"
	// Latency: one of three answers 100 ms late (toxiproxy latency on the
	// server-to-client stream).
	Latency Scenario = "latency"
	// Bandwidth: one of three sends at 1 KB/s (toxiproxy bandwidth on the
	// server-to-client stream).
	Bandwidth Scenario = "bandwidth"
	// Stall: one of three stops passing data from FaultAt on, its
	// connections left open (toxiproxy timeout on the client-to-server
	// stream): a silent peer, in-process.
	Stall Scenario = "stall"
	// Kill: one of three is a child process, killed with SIGKILL at FaultAt.
	Kill Scenario = "kill"
	// Freeze: one of three is a child process, stopped with SIGSTOP at
	// FaultAt (no FIN; SIGCONT once the load is over).
	Freeze Scenario = "freeze"
	// Declined: the handlers answer DECLINED; no policy names DECLINED.
	Declined Scenario = "declined"
	// Busy: the handlers answer BUSY; the client retries BUSY under the
	// retry-throttling bucket, its busy limiters on (the default).
	Busy Scenario = "busy"
	// Erroring: one of three answers UNEXPECTED to half its calls, a
	// seeded random half (see ErrorSeed), from the start; no policy retries
	// UNEXPECTED. Its first ErrorStreak failures in a row are the outlier
	// ejection's cue (Result.StreakAt).
	Erroring Scenario = "erroring"
)

// Scenarios returns every scenario, in the order the suite runs them.
func Scenarios() []Scenario {
	return []Scenario{None, Refused, AcceptClose, BlackHole, Reset, Latency, Bandwidth, Stall, Kill, Freeze, Declined, Busy, Erroring}
}

// Describe says in a line what s does, "" for an unknown scenario.
func (s Scenario) Describe() string {
	sp, _ := specOf(s)
	return sp.desc
}

// Setups returns the client setups the suite runs s under: those where the
// policy matters.
func (s Scenario) Setups() []Setup {
	sp, _ := specOf(s)
	return append([]Setup(nil), sp.setups...)
}

// Size is how big a suite's runs are: Full or CI ("full", "ci").
type Size = benchrun.Size

// The sizes.
const (
	// Full is what `sluice-lab faults` runs by default: 3 s for refused and
	// accept-close, 10 s for busy (the figure of 0.16 attempts per call
	// is for 10 s), 15-20 s for kill, freeze and stall.
	Full = benchrun.Full
	// CI is what go test runs: one to three seconds a run (3 s for
	// latency, whose slow peer's share is counted from 1 s in), 6 s for
	// freeze and stall (whose contract allows 5 s to find the peer dead).
	CI = benchrun.CI
)

// Runs returns the runs the suite makes of s at size z: one Config per
// setup, with the size's Duration and FaultAt and every other field zero
// (the defaults).
func (s Scenario) Runs(z Size) []Config {
	sp, ok := specOf(s)
	if !ok {
		return nil
	}
	t := sp.full
	if z == CI {
		t = sp.ci
	}
	var out []Config
	for _, st := range sp.setups {
		c := Config{Scenario: s, Setup: st, Duration: millis.Duration(t.duration)}
		if sp.midRun {
			c.FaultAt = millis.Duration(t.faultAt)
		}
		out = append(out, c)
	}
	return out
}

// ParseScenarios reads a comma-separated list of scenario names; "all" is
// every scenario.
func ParseScenarios(list string) ([]Scenario, error) {
	out, err := benchrun.ParseList(list, Scenarios(), "scenario")
	if err != nil {
		return nil, fmt.Errorf("faults: %w", err)
	}
	return out, nil
}

// timing is a scenario's length at one size.
type timing struct {
	duration, faultAt time.Duration
}

// spec is what the suite knows of a scenario.
type spec struct {
	desc     string
	method   string
	setups   []Setup
	full, ci timing
	// midRun: the fault strikes at FaultAt (else it is there from the
	// start); child: the failing peer is a child process.
	midRun, child bool
	// faulty: one peer of three fails (else all fail alike, or none).
	faulty bool
}

// specOf returns the spec of s and whether s is known.
func specOf(s Scenario) (spec, bool) {
	all := []Setup{NoPolicy, RetryPolicy, HedgePolicy}
	sec := func(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
	switch s {
	case None:
		return spec{desc: "three good servers (the baseline)", method: MethodEcho, setups: all,
			full: timing{sec(5), 0}, ci: timing{sec(1), 0}}, true
	case Refused:
		return spec{desc: "all three peers refuse connections (nothing listens; dials counted at the client)", method: MethodEcho, setups: all,
			full: timing{sec(3), 0}, ci: timing{sec(2), 0}}, true
	case AcceptClose:
		return spec{desc: "all three peers accept each connection and close it at once", method: MethodEcho, setups: all,
			full: timing{sec(3), 0}, ci: timing{sec(2), 0}}, true
	case BlackHole:
		return spec{desc: "one of three accepts TCP and never answers the TChannel handshake", method: MethodEcho, setups: all,
			full: timing{sec(5), 0}, ci: timing{sec(1), 0}, faulty: true}, true
	case Reset:
		return spec{desc: "one of three resets every connection from the fault on (toxiproxy reset_peer)", method: MethodEcho, setups: all,
			full: timing{sec(10), sec(3)}, ci: timing{sec(2), sec(0.5)}, midRun: true, faulty: true}, true
	case Latency:
		return spec{desc: "one of three answers 100 ms late (toxiproxy latency)", method: MethodEcho, setups: all,
			full: timing{sec(5), 0}, ci: timing{sec(3), 0}, faulty: true}, true
	case Bandwidth:
		return spec{desc: "one of three sends at 1 KB/s (toxiproxy bandwidth)", method: MethodEcho, setups: []Setup{NoPolicy, HedgePolicy},
			full: timing{sec(5), 0}, ci: timing{sec(1), 0}, faulty: true}, true
	case Stall:
		return spec{desc: "one of three goes silent from the fault on, connections open (toxiproxy timeout)", method: MethodEcho, setups: []Setup{NoPolicy, HedgePolicy},
			full: timing{sec(15), sec(3)}, ci: timing{sec(6), sec(0.5)}, midRun: true, faulty: true}, true
	case Kill:
		return spec{desc: "one of three, a child process, is killed with SIGKILL", method: MethodEcho, setups: all,
			full: timing{sec(15), sec(3)}, ci: timing{sec(2), sec(0.5)}, midRun: true, child: true, faulty: true}, true
	case Freeze:
		return spec{desc: "one of three, a child process, is stopped with SIGSTOP (no FIN; SIGCONT after the load)", method: MethodEcho, setups: all,
			full: timing{sec(20), sec(3)}, ci: timing{sec(6), sec(0.5)}, midRun: true, child: true, faulty: true}, true
	case Declined:
		return spec{desc: "every handler answers DECLINED; no policy names DECLINED", method: MethodDeclined, setups: all,
			full: timing{sec(3), 0}, ci: timing{sec(1), 0}}, true
	case Busy:
		return spec{desc: "every handler answers BUSY; retry policy on BUSY with the retry-throttling bucket", method: MethodBusy, setups: []Setup{RetryBucket},
			full: timing{sec(10), 0}, ci: timing{sec(2), 0}}, true
	case Erroring:
		return spec{desc: "one of three answers UNEXPECTED to half its calls (a seeded random half); no policy retries UNEXPECTED", method: MethodEcho, setups: all,
			full: timing{sec(5), 0}, ci: timing{sec(2), 0}, faulty: true}, true
	}
	return spec{}, false
}

func scenarioList() string { return benchrun.Names(Scenarios()) }

// Setup names a client's policy for the called method.
type Setup string

// The setups.
const (
	// NoPolicy: no retry or hedging policy.
	NoPolicy Setup = "none"
	// RetryPolicy: maxAttempts 3, backoff 10 ms x2 up to 100 ms,
	// retryable BUSY and NETWORK.
	RetryPolicy Setup = "retry"
	// HedgePolicy: maxAttempts 3, hedgingDelay 50 ms, non-fatal BUSY and
	// NETWORK.
	HedgePolicy Setup = "hedge"
	// RetryBucket: maxAttempts 3, backoff 1 ms x2 up to 10 ms, retryable
	// BUSY, and the retry-throttling bucket (maxTokens 10, tokenRatio 0.1):
	// the setup of channel's BenchmarkJSONRetryPolicyPaired.
	RetryBucket Setup = "retry+bucket"
)

// HedgingDelay is HedgePolicy's hedging delay.
const HedgingDelay = 50 * time.Millisecond

func (s Setup) known() bool {
	switch s {
	case NoPolicy, RetryPolicy, HedgePolicy, RetryBucket:
		return true
	}
	return false
}

func setupList() string {
	return strings.Join([]string{string(NoPolicy), string(RetryPolicy), string(HedgePolicy), string(RetryBucket)}, ", ")
}

// serviceConfig returns the setup's service config, nil for NoPolicy.
func (s Setup) serviceConfig() (*serviceconfig.Config, error) {
	var js string
	switch s {
	case NoPolicy:
		return nil, nil
	case RetryPolicy:
		js = `{"methodConfig":[{"name":[{"service":"` + Service + `"}],
 "retryPolicy":{"maxAttempts":3,"initialBackoff":"0.01s","maxBackoff":"0.1s","backoffMultiplier":2,"retryableStatusCodes":["BUSY","NETWORK"]}}]}`
	case HedgePolicy:
		js = `{"methodConfig":[{"name":[{"service":"` + Service + `"}],
 "hedgingPolicy":{"maxAttempts":3,"hedgingDelay":"` + fmt.Sprintf("%gs", HedgingDelay.Seconds()) + `","nonFatalStatusCodes":["BUSY","NETWORK"]}}]}`
	case RetryBucket:
		js = `{"methodConfig":[{"name":[{"service":"` + Service + `"}],
 "retryPolicy":{"maxAttempts":3,"initialBackoff":"0.001s","maxBackoff":"0.01s","backoffMultiplier":2,"retryableStatusCodes":["BUSY"]}}],
 "retryThrottling":{"maxTokens":10,"tokenRatio":0.1}}`
	default:
		return nil, fmt.Errorf("faults: Setup is %q, must be one of %s", s, setupList())
	}
	cfg, err := serviceconfig.Parse([]byte(js))
	if err != nil {
		return nil, fmt.Errorf("faults: the %s setup's service config: %w", s, err)
	}
	return cfg, nil
}
