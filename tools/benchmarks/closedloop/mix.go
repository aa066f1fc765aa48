package closedloop

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/criticality"
	"github.com/sluice-rpc/sluice/tools/benchmarks/load"
)

// Share is one criticality class's percent of the offered calls.
type Share struct {
	Class   criticality.Class
	Percent float64
}

// MarshalJSON writes s with its class by name: {"class":"sheddable","percent":50}.
func (s Share) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Class   string  `json:"class"`
		Percent float64 `json:"percent"`
	}{s.Class.String(), s.Percent})
}

// Bounds of Config.Callers and Config.HeavyFactor.
const (
	MaxCallers     = 100
	MaxHeavyFactor = 1000
)

// ParseMix reads a class mix as `sluice bench --mix` takes it:
// CLASS=PERCENT,... each class once, the percents summing to 100.
func ParseMix(s string) ([]Share, error) {
	var mix []Share
	for _, item := range strings.Split(s, ",") {
		name, pct, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			return nil, fmt.Errorf("%q: want CLASS=PERCENT", item)
		}
		c, err := criticality.Parse(strings.TrimSpace(name))
		if err != nil {
			return nil, fmt.Errorf("%q: unknown class %q: want critical_plus, critical, sheddable_plus or sheddable", item, name)
		}
		p, err := strconv.ParseFloat(strings.TrimSpace(pct), 64)
		if err != nil {
			return nil, fmt.Errorf("%q: the percent %q is not a number", item, pct)
		}
		mix = append(mix, Share{Class: c, Percent: p})
	}
	if err := checkMix(mix); err != nil {
		return nil, err
	}
	return mix, nil
}

// checkMix reports the first rule mix breaks.
func checkMix(mix []Share) error {
	sum := 0.0
	for i, sh := range mix {
		switch {
		case !sh.Class.Valid():
			return fmt.Errorf("class %v is not one of critical_plus, critical, sheddable_plus, sheddable", sh.Class)
		case slices.ContainsFunc(mix[:i], func(o Share) bool { return o.Class == sh.Class }):
			return fmt.Errorf("class %v is given twice", sh.Class)
		case !(sh.Percent > 0 && sh.Percent <= 100):
			return fmt.Errorf("%v's percent is %v, must be in (0, 100]", sh.Class, sh.Percent)
		}
		sum += sh.Percent
	}
	if math.Abs(sum-100) > 1e-6 { // a rounding error
		return fmt.Errorf("the percents sum to %v, must sum to 100", sum)
	}
	return nil
}

// Figures are what became of one class's or one caller's calls in a run.
type Figures struct {
	Name string `json:"name"` // "critical_plus", "caller-1"
	// OfferedRPS counts the calls scheduled per second, those refused in
	// the client included; OKRPS the successful ones, Served their share.
	OfferedRPS float64     `json:"offered_rps"`
	OKRPS      float64     `json:"ok_rps"`
	Served     float64     `json:"served"`
	P99        load.Millis `json:"p99_ms"` // of the successful calls
}

// CallerFigures are one caller's Figures; Heavy marks caller-1.
type CallerFigures struct {
	Figures
	Heavy bool `json:"heavy"`
}

// weighted picks indices in proportion to their weights, spread evenly
// (nginx's smooth weighted round robin).
type weighted struct {
	weights, current []float64
	total            float64
}

func newWeighted(weights []float64) *weighted {
	w := &weighted{weights: weights, current: make([]float64, len(weights))}
	for _, x := range weights {
		w.total += x
	}
	return w
}

// next returns the next index.
func (w *weighted) next() int {
	best := 0
	for i, x := range w.weights {
		w.current[i] += x
		if w.current[i] > w.current[best] {
			best = i
		}
	}
	w.current[best] -= w.total
	return best
}

// plan gives each call of a run its class and its caller (indices, 0
// without a mix or callers), the same whenever asked.
type plan struct {
	classes *weighted
	callers []*weighted // one per class, so class and caller are independent
	class   []uint8
	caller  []uint16
}

// newPlan returns the plan of a paired run of cfg.
func newPlan(cfg Config) *plan {
	cw := []float64{1}
	if len(cfg.Mix) > 0 {
		cw = cw[:0]
		for _, sh := range cfg.Mix {
			cw = append(cw, sh.Percent)
		}
	}
	w := []float64{1}
	if cfg.Callers > 0 {
		w = slices.Repeat(w, cfg.Callers)
		w[0] = cfg.HeavyFactor
	}
	p := &plan{classes: newWeighted(cw)}
	for range cw {
		p.callers = append(p.callers, newWeighted(w))
	}
	return p
}

// through plans the calls up to call i.
func (p *plan) through(i int) {
	for len(p.class) <= i {
		c := p.classes.next()
		p.class = append(p.class, uint8(c))
		p.caller = append(p.caller, uint16(p.callers[c].next()))
	}
}

// classOf and callerOf return call i's class and caller indices.
func (p *plan) classOf(i int) int {
	p.through(i)
	return int(p.class[i])
}

func (p *plan) callerOf(i int) int {
	p.through(i)
	return int(p.caller[i])
}

// tally adds up recs, a run's calls in arrival order, by group(i) in
// [0, n), over secs seconds.
func tally(recs []load.Record, n int, group func(i int) int, secs float64) []Figures {
	offered := make([]int, n)
	ok := make([][]time.Duration, n)
	for i, r := range recs {
		g := group(i)
		offered[g]++
		if r.Code == "" {
			ok[g] = append(ok[g], r.Latency)
		}
	}
	out := make([]Figures, n)
	for g := range out {
		slices.Sort(ok[g])
		f := Figures{OfferedRPS: float64(offered[g]) / secs, OKRPS: float64(len(ok[g])) / secs, P99: load.Millis(load.Quantile(ok[g], 0.99))}
		if offered[g] > 0 {
			f.Served = float64(len(ok[g])) / float64(offered[g])
		}
		out[g] = f
	}
	return out
}

// figures returns the per-class and per-caller figures of a run that
// followed p: empty, not nil, for a dimension it did not have.
func (p *plan) figures(cfg Config, recs []load.Record, secs float64) (classes []Figures, callers []CallerFigures) {
	classes, callers = []Figures{}, []CallerFigures{}
	if len(cfg.Mix) > 0 {
		classes = tally(recs, len(cfg.Mix), p.classOf, secs)
		for k := range classes {
			classes[k].Name = cfg.Mix[k].Class.String()
		}
	}
	if cfg.Callers > 0 {
		for k, f := range tally(recs, cfg.Callers, p.callerOf, secs) {
			f.Name = callerName(k)
			callers = append(callers, CallerFigures{Figures: f, Heavy: k == 0})
		}
	}
	return classes, callers
}

// callerName is the TChannel caller name of caller k (from 0).
func callerName(k int) string { return "caller-" + strconv.Itoa(k+1) }
