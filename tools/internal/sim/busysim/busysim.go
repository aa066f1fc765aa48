// Package busysim reproduces the simulation of TChannel's "Throttling on
// Busy Responses" design with the real busy.Limiter on a fake clock: for
// seconds 1..9 a rate pattern sends requests and a busy pattern answers
// some busy; from second 11 the run watches the limit recover. It prints
// the design's format, so its two tables come out digit for digit.
package busysim

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/busy"
	"github.com/sluice-rpc/sluice/clock"
)

// Pattern shapes a value v over the simulated seconds t.
type Pattern string

// The design's patterns.
const (
	Steady         Pattern = "steady"          // v
	Flappy         Pattern = "flappy"          // v when t%3 == 0, else 0
	LinearGrow     Pattern = "linear_grow"     // v + 100t
	LinearDecrease Pattern = "linear_decrease" // v - 100t, not below 0
)

// Patterns lists the known patterns.
var Patterns = []Pattern{Steady, Flappy, LinearGrow, LinearDecrease}

// At returns the pattern's value at second t for base value v.
func (p Pattern) At(v, t int) int {
	switch p {
	case Flappy:
		if t%3 == 0 {
			return v
		}
		return 0
	case LinearGrow:
		return v + 100*t
	case LinearDecrease:
		return max(0, v-100*t)
	}
	return v
}

// maxRate bounds a scenario's rates, and so a run's work.
const maxRate = 100_000_000

// Scenario is one simulated traffic pattern.
type Scenario struct {
	RPS         int     `json:"rps"`
	RPSPattern  Pattern `json:"rps_pattern"`
	Busy        int     `json:"busy"`
	BusyPattern Pattern `json:"busy_pattern"`
}

// Presets are the design's two published scenarios.
var Presets = map[string]Scenario{
	"steady": {RPS: 5000, RPSPattern: Steady, Busy: 3000, BusyPattern: Steady},
	"flappy": {RPS: 5000, RPSPattern: Steady, Busy: 3000, BusyPattern: Flappy},
}

// Validate reports the first field that is out of range.
func (s Scenario) Validate() error {
	switch {
	case s.RPS < 0 || s.RPS > maxRate:
		return fmt.Errorf("busysim: rps is %d, must be between 0 and %d", s.RPS, maxRate)
	case s.Busy < 0 || s.Busy > maxRate:
		return fmt.Errorf("busysim: busy is %d, must be between 0 and %d", s.Busy, maxRate)
	case !slices.Contains(Patterns, s.RPSPattern):
		return fmt.Errorf("busysim: rps pattern %q is unknown, want one of %v", s.RPSPattern, Patterns)
	case !slices.Contains(Patterns, s.BusyPattern):
		return fmt.Errorf("busysim: busy pattern %q is unknown, want one of %v", s.BusyPattern, Patterns)
	}
	return nil
}

// Result is one run: its limiter's settings, each second as printed, and
// whether the limit recovered.
type Result struct {
	// Strategy is the limiter's recovery, with its RecoverRate or
	// RecoverValue (the other is 0).
	Strategy                  busy.Strategy
	RecoverRate, RecoverValue float64
	StartLimit                int64
	Seconds                   []Second
	// Converged reports that the limit recovered; At is the second at
	// which nothing was throttled any more, Speed At - 10.
	Converged bool
	At, Speed int
}

// Second is one printed second of a run.
type Second struct {
	Time       int  `json:"time"`
	Recovering bool `json:"recovering"` // from second 11
	// RPS requests were sent, Throttled refused and Busy answered busy,
	// under the limit Limit (truncated, as printed).
	RPS       int64 `json:"rps"`
	Throttled int64 `json:"throttled"`
	Busy      int64 `json:"busy"`
	Limit     int64 `json:"limit"`
}

// The design's phases.
const (
	busySeconds   = 9  // seconds 1..9 carry busy responses
	recoverFrom   = 11 // recovery is watched from second 11, its speed counted from 10
	recoverGiveUp = 30 // past this second the run has failed to converge
)

// line is s as the design prints it.
func (s Second) line() string {
	mark := "---"
	if s.Recovering {
		mark = "+++"
	}
	return fmt.Sprintf("    %s time=%d rps=%d throttled=%d busy=%d limit=%d\n", mark, s.Time, s.RPS, s.Throttled, s.Busy, s.Limit)
}

// Run simulates scenario s with a limiter configured by cfg and writes the
// design's report to w.
func Run(w io.Writer, cfg busy.Config, s Scenario) (Result, error) {
	if err := s.Validate(); err != nil {
		return Result{}, err
	}
	clk := clock.NewFake(time.Unix(0, 0))
	cfg.Window = time.Second
	cfg.Clock = clk
	l, err := busy.New(cfg)
	if err != nil {
		return Result{}, err
	}
	cfg = l.Config() // zero fields filled in, for the report
	var p strings.Builder
	res := Result{Strategy: cfg.Strategy, StartLimit: int64(cfg.Ceiling)}
	if cfg.Strategy == busy.Constant {
		res.RecoverValue = cfg.RecoverValue
		fmt.Fprintf(&p, "started with recover_value: %v\n", cfg.RecoverValue)
	} else {
		res.RecoverRate = cfg.RecoverRate
		fmt.Fprintf(&p, "started with recover_rate: %v\n", cfg.RecoverRate)
	}
	fmt.Fprintf(&p, "start rps=%d (%s) throttled=0 busy=%d (%s) limit=%d\n",
		s.RPS, s.RPSPattern, s.Busy, s.BusyPattern, res.StartLimit)

	// second offers second t's requests to the limiter, records and prints
	// it, and reports whether the limit had reached the rate.
	second := func(t int, recovering bool) (recovered bool) {
		rate, limit, now, sent := s.RPSPattern.At(s.RPS, t), l.Limit(), clk.Now(), 0
		for sent < rate && l.AllowAt(now) {
			sent++
		}
		sec := Second{Time: t, Recovering: recovering, RPS: int64(sent), Throttled: int64(rate - sent), Limit: int64(limit)}
		if recovering {
			// The design prints this phase from the unfloored limit.
			r := math.Min(float64(rate), limit)
			sec.RPS, sec.Throttled = int64(r), int64(float64(rate)-r)
		} else {
			sec.Busy = int64(min(s.BusyPattern.At(s.Busy, t), sent))
			for range sec.Busy {
				l.RecordBusy()
			}
		}
		res.Seconds = append(res.Seconds, sec)
		p.WriteString(sec.line())
		return limit >= float64(rate)
	}

	for t := 1; t <= busySeconds; t++ {
		second(t, false)
		clk.Add(time.Second)
	}
	p.WriteString("    ++++ recovering\n")
	for t := recoverFrom; ; t++ {
		if second(t, true) {
			res.Converged, res.At, res.Speed = true, t, t-(recoverFrom-1)
			fmt.Fprintf(&p, "    converged at time=%d, speed=%d\n", t, res.Speed)
			break
		}
		if t > recoverGiveUp {
			p.WriteString("    failed to converge\n")
			break
		}
		clk.Add(time.Second)
	}
	_, err = io.WriteString(w, p.String())
	return res, err
}

// RunBoth runs s with the design's recover-rate limiter, then its
// constant recover-value limiter.
func RunBoth(w io.Writer, s Scenario) ([]Result, error) {
	var rs []Result
	for _, cfg := range []busy.Config{{}, {Strategy: busy.Constant}} {
		r, err := Run(w, cfg, s)
		if err != nil {
			return rs, err
		}
		rs = append(rs, r)
	}
	return rs, nil
}
