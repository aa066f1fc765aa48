package faults

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-rpc/sluice/tools/internal/benchrun"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

// Suite is the runs of every scenario named under each of its Setups, at
// one Size.
type Suite struct {
	// Scenarios to run, in order. Default: all of them (Scenarios()).
	Scenarios []Scenario
	// Size picks the runs' Duration and FaultAt.
	Size Size
	// Rate, Duration and Deadline, when set, override every run's (a
	// Duration puts mid-run faults at their default).
	Rate     float64
	Duration time.Duration
	Deadline time.Duration
}

// Configs returns the runs s makes, validated.
func (s Suite) Configs() ([]Config, error) {
	scenarios := s.Scenarios
	if len(scenarios) == 0 {
		scenarios = Scenarios()
	}
	var out []Config
	for _, sc := range scenarios {
		sp, ok := specs[sc]
		if !ok {
			return nil, fmt.Errorf("faults: unknown scenario %q; the scenarios are %s", sc, scenarioList())
		}
		d := seconds(benchrun.Pick(s.Size, sp.full, sp.ci))
		at := seconds(benchrun.Pick(s.Size, sp.fullFaultAt, sp.ciFaultAt))
		if s.Duration != 0 {
			d, at = millis.Duration(s.Duration), 0
		}
		for _, st := range sp.setups {
			c := Config{Scenario: sc, Setup: st, Rate: s.Rate, Duration: d, FaultAt: at, Deadline: millis.Duration(s.Deadline)}
			if err := c.Validate(); err != nil {
				return nil, err
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// Run makes s's runs one after another, calling each, if not nil, with
// every result. It stops at the first run that cannot be made, or when ctx
// ends, and returns the results so far.
func (s Suite) Run(ctx context.Context, each func(*Result)) ([]*Result, error) {
	cfgs, err := s.Configs()
	if err != nil {
		return nil, err
	}
	var out []*Result
	for _, c := range cfgs {
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		r, err := Run(ctx, c)
		if err != nil {
			return out, fmt.Errorf("faults: %s/%s: %w", c.Scenario, c.Setup, err)
		}
		out = append(out, r)
		if each != nil {
			each(r)
		}
	}
	return out, nil
}
