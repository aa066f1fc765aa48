package faults

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

// Bounds and defaults of a run (Config's fields).
const (
	DefaultRate       = 200 // calls per second
	MaxRate           = 10_000
	MaxDuration       = 10 * time.Minute
	MaxCalls          = 1_000_000 // bounds Rate x Duration
	DefaultDeadline   = 200 * time.Millisecond
	MaxDeadline       = 10 * time.Second
	DefaultPayload    = 64 // bytes
	MaxPayload        = 64 << 10
	maxDefaultFaultAt = 3 * time.Second // caps the default FaultAt
)

// Config describes one run; a zero field means its default.
type Config struct {
	// Scenario is the fault and Setup the client's policy. Required.
	Scenario Scenario `json:"scenario"`
	Setup    Setup    `json:"setup"`
	// Rate is the arrival rate, calls per second, open loop. In
	// (0, MaxRate]; default DefaultRate.
	Rate float64 `json:"rate"`
	// Duration is how long calls arrive. In (0, MaxDuration]; default the
	// scenario's at the Full size.
	Duration millis.Duration `json:"duration_ms"`
	// FaultAt is when a mid-run fault (kill, freeze, reset, stall)
	// strikes. In (0, Duration); default a quarter of Duration, at most
	// 3 s. Other scenarios fail from the start.
	FaultAt millis.Duration `json:"fault_at_ms"`
	// Deadline is each call's deadline, all attempts included. In
	// (0, MaxDeadline]; default DefaultDeadline.
	Deadline millis.Duration `json:"deadline_ms"`
	// Format is the calls' format, "raw" (default) or "json".
	Format string `json:"format"`
	// Payload is a request body's size in bytes, in [0, MaxPayload]; 0
	// means DefaultPayload.
	Payload int `json:"payload"`
	// Shared marks a run made side by side with others: its goroutine and
	// heap figures are not its own, so Run neither waits for goroutines
	// to settle nor weighs the heap, and Check skips them.
	Shared bool `json:"shared"`
}

// Validate reports the first rule c breaks, naming the field.
func (c Config) Validate() error {
	sp, ok := specs[c.Scenario]
	_, setupOK := setups[c.Setup]
	switch {
	case c.Scenario == "":
		return errors.New("faults: Scenario is empty; name one of " + scenarioList())
	case !ok:
		return fmt.Errorf("faults: Scenario is %q, must be one of %s", c.Scenario, scenarioList())
	case c.Setup == "":
		return errors.New("faults: Setup is empty; name one of " + setupList())
	case !setupOK:
		return fmt.Errorf("faults: Setup is %q, must be one of %s", c.Setup, setupList())
	case c.Rate < 0 || c.Rate > MaxRate || math.IsNaN(c.Rate):
		return fmt.Errorf("faults: Rate is %v, must be in (0, %d]", c.Rate, MaxRate)
	case c.Duration < 0 || c.Duration.D() > MaxDuration:
		return fmt.Errorf("faults: Duration is %v, must be in (0, %v]", c.Duration, MaxDuration)
	case c.FaultAt < 0:
		return fmt.Errorf("faults: FaultAt is %v, must be > 0 (or 0 for the default)", c.FaultAt)
	case c.Deadline < 0 || c.Deadline.D() > MaxDeadline:
		return fmt.Errorf("faults: Deadline is %v, must be in (0, %v]", c.Deadline, MaxDeadline)
	case c.Format != "" && c.Format != "raw" && c.Format != "json":
		return fmt.Errorf("faults: Format is %q, must be raw or json", c.Format)
	case c.Payload < 0 || c.Payload > MaxPayload:
		return fmt.Errorf("faults: Payload is %d, must be in [0, %d]", c.Payload, MaxPayload)
	case sp.child && !canSignal:
		return fmt.Errorf("faults: Scenario %s stops or kills a process with signals, which needs a Unix system", c.Scenario)
	}
	d := c.withDefaults()
	switch {
	case d.FaultAt >= d.Duration && sp.midRun:
		return fmt.Errorf("faults: FaultAt is %v, must be before the end of Duration (%v)", d.FaultAt, d.Duration)
	case d.Rate*d.Duration.D().Seconds() > MaxCalls:
		return fmt.Errorf("faults: Rate x Duration is %.0f calls, must be at most %d", d.Rate*d.Duration.D().Seconds(), MaxCalls)
	}
	return nil
}

// withDefaults returns c with its defaults; c.Scenario must be known.
func (c Config) withDefaults() Config {
	sp := specs[c.Scenario]
	c.Rate = cmp.Or(c.Rate, DefaultRate)
	c.Duration = cmp.Or(c.Duration, seconds(sp.full))
	c.FaultAt = cmp.Or(c.FaultAt, min(c.Duration/4, millis.Duration(maxDefaultFaultAt)))
	if !sp.midRun {
		c.FaultAt = 0
	}
	c.Deadline = cmp.Or(c.Deadline, millis.Duration(DefaultDeadline))
	c.Format = cmp.Or(c.Format, "raw")
	c.Payload = cmp.Or(c.Payload, DefaultPayload)
	return c
}

// method returns the method the run calls.
func (c Config) method() string {
	if c.Format == "json" {
		return specs[c.Scenario].method + JSONSuffix
	}
	return specs[c.Scenario].method
}

// calls returns how many calls arrive strictly before Duration.
func (c Config) calls() int {
	return max(1, int(math.Ceil(c.Duration.D().Seconds()*c.Rate-1e-9)))
}
