package faults

import (
	"fmt"
	"time"

	"github.com/sluice-rpc/sluice/serviceconfig"
	"github.com/sluice-rpc/sluice/tools/internal/benchrun"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

// Scenario names a fault of three peers of Service, as `sluice-lab faults
// --scenarios` spells it; Describe says what fails.
type Scenario string

// The scenarios.
const (
	None        Scenario = "none"
	Refused     Scenario = "refused"
	AcceptClose Scenario = "accept-close"
	BlackHole   Scenario = "black-hole"
	Reset       Scenario = "reset"
	Latency     Scenario = "latency"
	Bandwidth   Scenario = "bandwidth"
	Stall       Scenario = "stall"
	Kill        Scenario = "kill"
	Freeze      Scenario = "freeze"
	Declined    Scenario = "declined"
	Busy        Scenario = "busy"
	Erroring    Scenario = "erroring"
)

// Scenarios returns every scenario, in the order the suite runs them.
func Scenarios() []Scenario {
	return []Scenario{None, Refused, AcceptClose, BlackHole, Reset, Latency, Bandwidth, Stall, Kill, Freeze, Declined, Busy, Erroring}
}

// spec is a scenario's description, method, setups, duration and fault
// time (seconds) at each size, whether the fault strikes at FaultAt (else
// it is there from the start) and whether the failing peer is a child.
type spec struct {
	desc              string
	method            string
	setups            []Setup
	full, fullFaultAt float64
	ci, ciFaultAt     float64
	midRun, child     bool
}

var (
	all   = []Setup{NoPolicy, RetryPolicy, HedgePolicy}
	hedge = []Setup{NoPolicy, HedgePolicy}
	specs = map[Scenario]spec{
		None:        {"three good servers (the baseline)", MethodEcho, all, 5, 0, 1, 0, false, false},
		Refused:     {"all three peers refuse connections (nothing listens; dials counted at the client)", MethodEcho, all, 3, 0, 2, 0, false, false},
		AcceptClose: {"all three peers accept each connection and close it at once", MethodEcho, all, 3, 0, 2, 0, false, false},
		BlackHole:   {"one of three accepts TCP and never answers the TChannel handshake", MethodEcho, all, 5, 0, 1, 0, false, false},
		Reset:       {"one of three resets every connection from the fault on (toxiproxy reset_peer)", MethodEcho, all, 10, 3, 2, 0.5, true, false},
		Latency:     {"one of three answers 100 ms late (toxiproxy latency)", MethodEcho, all, 5, 0, 3, 0, false, false},
		Bandwidth:   {"one of three sends at 1 KB/s (toxiproxy bandwidth)", MethodEcho, hedge, 5, 0, 1, 0, false, false},
		Stall:       {"one of three goes silent from the fault on, connections open (toxiproxy timeout)", MethodEcho, hedge, 15, 3, 6, 0.5, true, false},
		Kill:        {"one of three, a child process, is killed with SIGKILL", MethodEcho, all, 15, 3, 2, 0.5, true, true},
		Freeze:      {"one of three, a child process, is stopped with SIGSTOP (no FIN; SIGCONT after the load)", MethodEcho, all, 20, 3, 6, 0.5, true, true},
		Declined:    {"every handler answers DECLINED; no policy names DECLINED", MethodDeclined, all, 3, 0, 1, 0, false, false},
		Busy:        {"every handler answers BUSY; retry policy on BUSY with the retry-throttling bucket", MethodBusy, []Setup{RetryBucket}, 10, 0, 2, 0, false, false},
		Erroring:    {"one of three answers UNEXPECTED to half its calls (a seeded random half); no policy retries UNEXPECTED", MethodEcho, all, 5, 0, 2, 0, false, false},
	}
)

// Describe says in a line what s does, "" for an unknown scenario.
func (s Scenario) Describe() string { return specs[s].desc }

// Setups returns the client setups where s's policy matters.
func (s Scenario) Setups() []Setup { return append([]Setup(nil), specs[s].setups...) }

// Size is how big a suite's runs are: Full or CI ("full", "ci").
type Size = benchrun.Size

// The sizes: Full, `sluice-lab faults`'s default, is 3-20 s a run; CI,
// what go test runs, 1-3 s, 6 s for freeze and stall (whose contract
// allows 5 s to find the peer dead).
const (
	Full = benchrun.Full
	CI   = benchrun.CI
)

func seconds(s float64) millis.Duration { return millis.Duration(s * float64(time.Second)) }

// ParseScenarios reads a comma-separated list of scenarios, or "all".
func ParseScenarios(list string) ([]Scenario, error) {
	out, err := benchrun.ParseList(list, Scenarios(), "scenario")
	if err != nil {
		return nil, fmt.Errorf("faults: %w", err)
	}
	return out, nil
}

func scenarioList() string { return benchrun.Names(Scenarios()) }

// Setup names a client's policy for the called method.
type Setup string

// The setups: no policy, and the policies setups holds.
const (
	NoPolicy    Setup = "none"
	RetryPolicy Setup = "retry"
	HedgePolicy Setup = "hedge"
	RetryBucket Setup = "retry+bucket"
)

// HedgingDelay is HedgePolicy's hedging delay.
const HedgingDelay = 50 * time.Millisecond

// setups holds each setup's method config after its name, up to the end
// of the service config.
var setups = map[Setup]string{
	NoPolicy:    "",
	RetryPolicy: `"retryPolicy":{"maxAttempts":3,"initialBackoff":"0.01s","maxBackoff":"0.1s","backoffMultiplier":2,"retryableStatusCodes":["BUSY","NETWORK"]}}]}`,
	HedgePolicy: `"hedgingPolicy":{"maxAttempts":3,"hedgingDelay":"` + fmt.Sprintf("%gs", HedgingDelay.Seconds()) + `","nonFatalStatusCodes":["BUSY","NETWORK"]}}]}`,
	RetryBucket: `"retryPolicy":{"maxAttempts":3,"initialBackoff":"0.001s","maxBackoff":"0.01s","backoffMultiplier":2,"retryableStatusCodes":["BUSY"]}}],
 "retryThrottling":{"maxTokens":10,"tokenRatio":0.1}}`,
}

func setupList() string {
	return benchrun.Names([]Setup{NoPolicy, RetryPolicy, HedgePolicy, RetryBucket})
}

// serviceConfig returns the setup's service config, nil for NoPolicy; s
// must be known.
func (s Setup) serviceConfig() (*serviceconfig.Config, error) {
	if s == NoPolicy {
		return nil, nil
	}
	cfg, err := serviceconfig.Parse([]byte(`{"methodConfig":[{"name":[{"service":"` + Service + `"}],` + setups[s]))
	if err != nil {
		return nil, fmt.Errorf("faults: the %s setup's service config: %w", s, err)
	}
	return cfg, nil
}
