package balancing

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/balance"
	"github.com/sluice-rpc/sluice/tools/internal/benchrun"
)

// Verdict is one of the done-when checks on a result.
type Verdict struct {
	Scenario Scenario `json:"scenario"`
	// Check says what must hold; Figure what was measured.
	Check  string `json:"check"`
	Holds  bool   `json:"holds"`
	Figure string `json:"figure"`
}

// verdicts checks the rows run against the done-when figures.
func (r *Result) verdicts() []Verdict {
	var out []Verdict
	add := func(s Scenario, check string, holds bool, format string, args ...any) {
		out = append(out, Verdict{Scenario: s, Check: check, Holds: holds, Figure: fmt.Sprintf(format, args...)})
	}
	if s := r.ScaleOut; s != nil {
		w := s.With
		add(ScaleOut, "with slow start, no Busy and no timeout from the new instances",
			w.New.Busy == 0 && w.New.Timeouts == 0, "%d Busy, %d timeouts of %d calls", w.New.Busy, w.New.Timeouts, w.New.Calls)
		add(ScaleOut, "with slow start, p99 after the scale-out within 2x of the steady state's",
			w.P99Ratio > 0 && w.P99Ratio <= 2, "%v vs %v: %.2fx", w.After.P99, w.Steady.P99, w.P99Ratio)
		wo := s.Without
		add(ScaleOut, "with slow start, that p99 ratio below the one without",
			w.P99Ratio > 0 && w.P99Ratio < wo.P99Ratio, "%.2fx vs %.2fx without (%v after, %v steady)", w.P99Ratio, wo.P99Ratio, wo.After.P99, wo.Steady.P99)
	}
	if h := r.Heterogeneous; h != nil {
		w := h.With
		add(Heterogeneous, "with weights, every server's share within 5 points of its weight's",
			w.MaxShareError <= 5, "largest gap %.1f points", w.MaxShareError)
		figure, none := overList(w.Servers)
		add(Heterogeneous, "with weights, no server over its capacity (calls at 98% of it or more, or Busy to more than 1%)",
			none, "%s", figure)
		lr := h.LoadReports
		add(Heterogeneous, "load reports, no weights: every server's share within 2 points of its capacity's",
			lr.MaxShareError <= 2, "largest gap %.1f points", lr.MaxShareError)
		figure, none = overList(lr.Servers)
		add(Heterogeneous, "load reports, no weights: no server over its capacity", none, "%s", figure)
		ratio := share(float64(lr.Measured.P99), float64(w.Measured.P99))
		add(Heterogeneous, "load reports, no weights: p99 at most 1.1x the weighted row's",
			ratio > 0 && ratio <= 1.1, "%v vs %v: %.2fx", lr.Measured.P99, w.Measured.P99, ratio)
	}
	if s := r.Shard; s != nil {
		add(Shard, "cache hit rate with shard keys at least 2x without", s.HitRatio >= 2,
			"%.1f%% vs %.1f%%: %.2fx", 100*s.With.HitRate, 100*s.Without.HitRate, s.HitRatio)
		b := s.With.Bound
		add(Shard, boundCheck, b.Samples > 0 && b.Over == 0, "%s", b.figure(r.Config.Shard.Sample.D()))
		g := s.Ring
		add(Shard, "at most 12% of the keys move when 1 of the servers leaves, whichever it is", g.LeaveMax <= 0.12,
			"%.1f%% at most over each server leaving; over %d more fleets, %.1f%% at most, more than 12%% for %.1f%% of the servers",
			100*g.LeaveMax, g.Fleets, 100*g.FleetsLeaveMax, 100*g.FleetsOver12)
	}
	if e := r.Erroring; e != nil {
		const reach = "after the ejection, under 1% of the calls reach the erroring server"
		if w := e.OneWith; w.ToErroringAfter == nil {
			add(Erroring, reach, false, "no ejection seen")
		} else {
			add(Erroring, reach, *w.ToErroringAfter < 0.01, "%.2f%%, ejected %.2fs in", 100**w.ToErroringAfter, time.Duration(*w.FirstEjection).Seconds())
		}
		m, mo := e.ManyWith, e.ManyWithout
		many := fmt.Sprintf("%d of %d erroring", m.Erroring, r.Config.Erroring.Servers)
		add(Erroring, many+", with ejection: success rate >= 62%", m.SuccessRate >= 0.62, "%.1f%%", 100*m.SuccessRate)
		add(Erroring, many+", with ejection: at most 1 peer ejected at once", m.MaxEjected <= 1, "%d", m.MaxEjected)
		add(Erroring, fmt.Sprintf("%s: success rate with ejection at least %.0f points above without", many, 100*ejectionGain),
			m.SuccessRate-mo.SuccessRate >= ejectionGain, "%.1f%% vs %.1f%%: %+.1f points", 100*m.SuccessRate, 100*mo.SuccessRate, 100*(m.SuccessRate-mo.SuccessRate))
	}
	return out
}

// overList lists the servers over their capacity, "none" if none is.
func overList(servers []HeterogeneousServer) (string, bool) {
	var over []string
	for _, s := range servers {
		if s.OverCapacity {
			over = append(over, fmt.Sprintf("%d-worker server: %.0f calls/s of %.0f, %d Busy", s.Workers, s.PerSecond, s.Capacity, s.Busy))
		}
	}
	if len(over) == 0 {
		return "none", true
	}
	return strings.Join(over, "; "), false
}

// ejectionGain is the least the success rate with Many servers erroring
// must gain from ejection: with one of 3 of 4 ejected, 62.5% becomes
// 66.7% at best (3.6 to 4.8 points at the CI size).
const ejectionGain = 0.02

// boundCheck is the bounded load's verdict.
const boundCheck = "with shard keys, no peer ever has more calls pending than ceil(1.25 x (m + 1) / n) + 1, m the most in flight since its oldest pending call began"

// figure says what the check found.
func (b BoundCheck) figure(every time.Duration) string {
	return fmt.Sprintf("over the bound in %.2f%% of %d samples %v apart; at worst %d pending on one peer, bound %d (m = %d); %.1f pending on average",
		100*b.Over, b.Samples, every, b.WorstPending, b.WorstBound, b.WorstInFlight, b.MeanPending)
}

// WriteTable writes r as Markdown: per scenario its setup, a table with
// both rows and the done-when verdicts.
func (r *Result) WriteTable(w io.Writer) error {
	out := &strings.Builder{}
	c := r.Config
	fmt.Fprintf(out, "Balancing, %s size: each call's deadline %v, no retries; GOGC %s; seed %d.\n", c.Size, c.Timeout, benchrun.GOGC(c.GCPercent), c.Seed)
	write := map[Scenario]func(*strings.Builder){ScaleOut: r.writeScaleOut, Heterogeneous: r.writeHeterogeneous,
		Shard: r.writeShard, Erroring: r.writeErroring}
	for _, s := range r.run() {
		write[s](out)
		r.writeVerdicts(out, s)
	}
	_, err := io.WriteString(w, out.String())
	return err
}

func (r *Result) writeVerdicts(out *strings.Builder, s Scenario) {
	fmt.Fprintf(out, "\n")
	for _, v := range r.Verdicts {
		if v.Scenario != s {
			continue
		}
		mark := "holds"
		if !v.Holds {
			mark = "FALLS SHORT"
		}
		fmt.Fprintf(out, "- %s: %s (%s)\n", mark, v.Check, v.Figure)
	}
}

func (r *Result) writeScaleOut(out *strings.Builder) {
	s := r.ScaleOut
	c := r.Config.ScaleOut
	fmt.Fprintf(out, "\n### scale-out\n\n%d servers of %d workers x %v (%.0f calls/s) offered %.0f%% of it, %.0f calls/s; after %v, %d more start cold (%gx the cost, falling to 1x over %v) and join (SetPeers, weights 1). Figures over the %v after that.\n\n",
		c.Servers, c.Workers, c.Service, float64(c.Servers)*PoolCapacity(c.Workers, c.Service.D()), 100*c.Load, s.With.Rate,
		c.Warmup+c.Steady, c.Added, c.ColdFactor, c.ColdWindow, c.After)
	fmt.Fprintf(out, "| slow start | calls after | new: calls | new: Busy | new: timeouts | all: Busy | all: timeouts | p99 steady | p99 after | after / steady | calls per new instance | calls per first instance |\n")
	fmt.Fprintf(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
	for _, row := range []ScaleOutRow{s.With, s.Without} {
		var newCalls, oldCalls []string
		for _, srv := range row.Servers {
			if srv.New {
				newCalls = append(newCalls, fmt.Sprint(srv.Calls))
			} else {
				oldCalls = append(oldCalls, fmt.Sprint(srv.Calls))
			}
		}
		fmt.Fprintf(out, "| %s | %d | %d | %d | %d | %d | %d | %v | %v | %.2fx | %s | %s |\n",
			benchrun.OnOff(row.SlowStart), row.After.Calls, row.New.Calls, row.New.Busy, row.New.Timeouts, row.After.Busy, row.After.Timeouts,
			row.Steady.P99, row.After.P99, row.P99Ratio, strings.Join(newCalls, ", "), strings.Join(oldCalls, ", "))
	}
	fmt.Fprintf(out, "\nService configs: on `%s`; off `%s`.\n", s.With.ServiceConfig, s.Without.ServiceConfig)
}

func (r *Result) writeHeterogeneous(out *strings.Builder) {
	h := r.Heterogeneous
	c := r.Config.Heterogeneous
	fmt.Fprintf(out, "\n### heterogeneous\n\nServers of %v workers x %v (%.0f calls/s in all) offered %.0f%% of it, %.0f calls/s, for %v after %v of warmup; a server answers Busy beyond %d requests waiting per worker.\n\n",
		c.Workers, c.Service, c.Capacity(), 100*c.Load, h.With.Rate, c.Duration, c.Warmup, queuePerWorker)
	fmt.Fprintf(out, "| weights | goodput | p99 | Busy | timeouts | server | capacity share | share of calls | calls/s (capacity) | Busy | peak / mean in flight (workers) | over capacity |\n")
	fmt.Fprintf(out, "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|\n")
	for _, row := range []HeterogeneousRow{h.With, h.Without, h.LoadReports} {
		for i, s := range row.Servers {
			lead := "| | | | | "
			if i == 0 {
				ws := WeightList(row.Weights)
				if row.LoadReports {
					ws += ", load reports"
				}
				lead = fmt.Sprintf("| %s | %.1f%% | %v | %d | %d ", ws, 100*row.Goodput, row.Measured.P99, row.Measured.Busy, row.Measured.Timeouts)
			}
			over := "no"
			if s.OverCapacity {
				over = "yes"
			}
			fmt.Fprintf(out, "%s| %d workers | %.1f%% | %.1f%% | %.0f (%.0f) | %d | %d / %.2f (%d) | %s |\n",
				lead, s.Workers, 100*s.CapacityShare, 100*s.Share, s.PerSecond, s.Capacity, s.Busy, s.PeakInFlight, s.MeanInFlight, s.Workers, over)
		}
	}
}

// WeightList lists weights for a table or a chart: "1, 2, 4".
func WeightList(ws []float64) string {
	s := make([]string, len(ws))
	for i, w := range ws {
		s[i] = fmt.Sprint(w)
	}
	return strings.Join(s, ", ")
}

func (r *Result) writeShard(out *strings.Builder) {
	s := r.Shard
	c := r.Config.Shard
	fmt.Fprintf(out, "\n### shard\n\n%d servers of %d workers, each with an LRU cache of %d keys (hit %v, miss %v); %.0f calls/s, keys of %d drawn Zipf (s = %g) and a hot key at %.0f%% of the calls; %v after %v of warmup.\n\n",
		c.Servers, c.Workers, c.CacheSize, c.Hit, c.Miss, c.Rate, c.Keys, c.Zipf, 100*c.HotShare, c.Duration, c.Warmup)
	fmt.Fprintf(out, "| shard keys | hit rate | hit / miss as served (miss / hit) | at the key's home (hot key) | p99 | Busy | timeouts | pending in all (mean) | samples over the bound | worst: one peer's pending / bound (m) | busiest server's mean in flight (average) |\n")
	fmt.Fprintf(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, row := range s.Rows() {
		b := row.Bound
		fmt.Fprintf(out, "| %s | %.1f%% | %v / %v (%.1fx) | %.1f%% (%.1f%%) | %v | %d | %d | %.2f | %.2f%% of %d | %d / %d (%d) | %.2f (%.2f) |\n", row.Name(), 100*row.HitRate,
			row.HitCost, row.MissCost, share(float64(row.MissCost), float64(row.HitCost)), 100*row.AtHome, 100*row.HotAtHome,
			row.Measured.P99, row.Measured.Busy, row.Measured.Timeouts, b.MeanPending, 100*b.Over, b.Samples, b.WorstPending, b.WorstBound, b.WorstInFlight,
			row.Busiest, row.MeanInFlight)
	}
	fmt.Fprintf(out, "\nThe bound: the client's calls pending to each peer, read every %v, against ceil(%g x (m + 1) / %d) + 1, m the most calls in flight to all peers at any moment since the oldest of that peer's pending calls began (from the calls' start and end times): the chooser's bounded load at the default factor when it admitted them (plus one: it sums the peers' counts one at a time), in every row.\n",
		c.Sample, balance.DefaultBalanceFactor, c.Servers)
	g := s.Ring
	fmt.Fprintf(out, "\nHit rate with shard keys %.2fx without (miss rate %.2fx lower). On the ring (internal/balancing.Ring over the servers' host:ports, %d keys): %.1f%% of the keys move when %s leaves (%.1f%% at most over each server leaving; over %d more fleets on random ports, %.1f%% at most); %.1f%% move when an %dth server joins.\n",
		s.HitRatio, share(1-s.Without.HitRate, 1-s.With.HitRate), g.Keys, 100*g.Leave, g.Leaving, 100*g.LeaveMax, g.Fleets, 100*g.FleetsLeaveMax, 100*g.Join, c.Servers+1)
	fmt.Fprintf(out, "Routed, %d keys one at a time: %.1f%% landed on their home; after the leave %.1f%% (%.1f%% of the keys changed server); after the join %.1f%% (%.1f%% changed).\n",
		g.Probe, 100*g.AtHome, 100*g.AtHomeLeave, 100*g.RoutedLeave, 100*g.AtHomeJoin, 100*g.RoutedJoin)
}

// Rows returns the shard rows run: with, the loose one, without.
func (s *ShardResult) Rows() []ShardRow {
	rows := []ShardRow{s.With}
	if s.Loose != nil {
		rows = append(rows, *s.Loose)
	}
	return append(rows, s.Without)
}

// Name is the row's name in the table and the chart.
func (row ShardRow) Name() string {
	switch {
	case !row.ShardKeys:
		return "none (least pending)"
	case row.BalanceFactor > 0:
		return fmt.Sprintf("every call, balance factor %g", row.BalanceFactor)
	}
	return "every call"
}

func (r *Result) writeErroring(out *strings.Builder) {
	e := r.Erroring
	c := r.Config.Erroring
	fmt.Fprintf(out, "\n### erroring\n\n%d servers of %d workers x %v, %.0f calls/s for %v; the erroring ones answer UNEXPECTED to %.0f%% of their calls, after the service time. Ejection on: the defaults; off: `%s`.\n\n",
		c.Servers, c.Workers, c.Service, c.Rate, c.Duration, 100*c.ErrorShare, e.OneWithout.ServiceConfig)
	fmt.Fprintf(out, "| erroring | ejection | calls | success | first ejection | failed/s before | failed/s after | to erroring before | to erroring after | most ejected at once | ejections |\n")
	fmt.Fprintf(out, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, row := range e.Rows() {
		first, after, toAfter := "never", "-", "-"
		if row.FirstEjection != nil {
			first = fmt.Sprintf("%.2fs", time.Duration(*row.FirstEjection).Seconds())
			after = fmt.Sprintf("%.1f", *row.FailedAfter)
			toAfter = fmt.Sprintf("%.2f%%", 100**row.ToErroringAfter)
		}
		fmt.Fprintf(out, "| %d of %d | %s | %d | %.1f%% | %s | %.1f | %s | %.1f%% | %s | %d | %d |\n",
			row.Erroring, c.Servers, benchrun.OnOff(row.Ejection), row.All.Calls, 100*row.SuccessRate, first, row.FailedBefore, after,
			100*row.ToErroringBefore, toAfter, row.MaxEjected, row.Ejections)
	}
}

// ChartPaths returns the files balancingchart.Write writes for path: path
// itself for one scenario, else path with "-SCENARIO" before its extension.
func (r *Result) ChartPaths(path string) map[Scenario]string {
	run := r.run()
	out := map[Scenario]string{}
	ext := filepath.Ext(path)
	for _, s := range run {
		out[s] = path
		if len(run) > 1 {
			out[s] = strings.TrimSuffix(path, ext) + "-" + string(s) + ext
		}
	}
	return out
}

// run lists the scenarios r holds, in Run's order.
func (r *Result) run() []Scenario {
	ran := map[Scenario]bool{ScaleOut: r.ScaleOut != nil, Heterogeneous: r.Heterogeneous != nil, Shard: r.Shard != nil, Erroring: r.Erroring != nil}
	return slices.DeleteFunc(Scenarios(), func(s Scenario) bool { return !ran[s] })
}
