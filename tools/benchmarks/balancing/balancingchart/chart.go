// Package balancingchart draws the balancing comparison's result (package
// balancing) second by second, with gonum's plot: apart from balancing so
// that sluice, which runs the comparison, does not link the charts
// (sluice-lab draws them).
package balancingchart

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/tools/benchmarks/balancing"
	"github.com/sluice-rpc/sluice/tools/benchmarks/load"
	"github.com/sluice-rpc/sluice/tools/internal/benchrun"
	"github.com/sluice-rpc/sluice/tools/internal/chart"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Write draws each scenario r holds second by second, to the files
// ChartPaths names (.png or .svg): scale-out, the p99 of successful calls,
// the calls each new and each first server took, the p99 of the calls
// each kind answered, and the new servers' Busy answers and timeouts if
// there were any; heterogeneous, each server's share of the
// calls; shard, the cache hit rate; erroring, the failed calls and the
// calls that reached an erroring server. Both rows of a scenario are on
// the same panels, the "with" row solid and the other dashed.
func Write(r *balancing.Result, path string) error {
	if err := chart.CheckPath(path); err != nil {
		return err
	}
	draw := map[balancing.Scenario]func(*balancing.Result) ([]*plot.Plot, error){balancing.ScaleOut: scaleOutPlots,
		balancing.Heterogeneous: heterogeneousPlots, balancing.Shard: shardPlots, balancing.Erroring: erroringPlots}
	for s, p := range r.ChartPaths(path) {
		plots, err := draw[s](r)
		if err == nil {
			err = chart.WriteGrid(p, plots, 1, 3*vg.Inch)
		}
		if err != nil {
			return fmt.Errorf("balancingchart: chart of %s: %w", s, err)
		}
	}
	return nil
}

// newPlot returns a panel with a grid and its legend at the top right.
func newPlot(title, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "seconds from the first call"
	p.Y.Label.Text = y
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Padding = vg.Millimeter
	p.Legend.ThumbnailWidth = 8 * vg.Millimeter
	return p
}

// dashed is the plotutil.Dashes index of a solid line, or a dashed one
// if b.
func dashed(b bool) int {
	if b {
		return 1
	}
	return 0
}

// addLine adds a line of xys in color i with dashes plotutil.Dashes(d),
// named name in the legend unless name is "".
func addLine(p *plot.Plot, name string, xys plotter.XYs, i, d int) error {
	if len(xys) == 0 {
		return nil
	}
	l, err := plotter.NewLine(xys)
	if err != nil {
		return err
	}
	l.Color, l.Dashes, l.Width = plotutil.Color(i), plotutil.Dashes(d), vg.Points(1.5)
	p.Add(l)
	if name != "" {
		p.Legend.Add(name, l)
	}
	return nil
}

// makeRoom raises p's top so that a legend of n entries at its top right
// sits above the lines.
func makeRoom(p *plot.Plot, n int) {
	p.Y.Max = p.Y.Min + (p.Y.Max-p.Y.Min)*(1+0.13*float64(n))
}

// mid is the middle of second i, on the x axis.
func mid(i int) float64 { return float64(i) + 0.5 }

// whole reports whether second i of a run that lasted d is whole.
func whole(i int, d time.Duration) bool { return time.Duration(i+1)*time.Second <= d }

func scaleOutPlots(r *balancing.Result) ([]*plot.Plot, error) {
	s, c := r.ScaleOut, r.Config.ScaleOut
	total := c.Warmup + c.Steady + c.After
	ms := func(m load.Millis) float64 { return float64(m) / float64(time.Millisecond) }
	lat := newPlot(fmt.Sprintf("p99 of successful calls; %d cold servers join at %.1fs", c.Added, time.Duration(s.With.ScaleOutAt).Seconds()), "p99 (ms)")
	calls := newPlot("Calls each server took a second, on average", "calls per second")
	split := newPlot("p99 of the successful calls each kind of server answered", "p99 (ms)")
	fails := newPlot("Busy answers and timeouts from the new servers", "calls per second")
	lat.Y.Min, split.Y.Min = 0, 0
	anyFailed := false
	for _, row := range []balancing.ScaleOutRow{s.With, s.Without} {
		name := "slow start " + benchrun.OnOff(row.SlowStart)
		var p99, newEach, oldEach, newP99, oldP99, failed plotter.XYs
		for i, sec := range row.Seconds {
			if !whole(i, total.D()) {
				break
			}
			x := mid(i)
			if sec.P99 > 0 {
				p99 = append(p99, plotter.XY{X: x, Y: ms(sec.P99)})
			}
			if sec.OldP99 > 0 {
				oldP99 = append(oldP99, plotter.XY{X: x, Y: ms(sec.OldP99)})
			}
			oldEach = append(oldEach, plotter.XY{X: x, Y: sec.OldEach})
			if time.Duration(sec.Start)+time.Second > time.Duration(row.ScaleOutAt) {
				newEach = append(newEach, plotter.XY{X: x, Y: sec.NewEach})
				failed = append(failed, plotter.XY{X: x, Y: float64(sec.NewFailed)})
				anyFailed = anyFailed || sec.NewFailed > 0
				if sec.NewP99 > 0 {
					newP99 = append(newP99, plotter.XY{X: x, Y: ms(sec.NewP99)})
				}
			}
		}
		for _, l := range []struct {
			p    *plot.Plot
			name string
			xys  plotter.XYs
			col  int
		}{{lat, name, p99, 0}, {calls, name + ", each new", newEach, 0}, {calls, name + ", each first", oldEach, 2},
			{split, name + ", new servers", newP99, 0}, {split, name + ", first servers", oldP99, 2}, {fails, name, failed, 1}} {
			if err := addLine(l.p, l.name, l.xys, l.col, dashed(!row.SlowStart)); err != nil {
				return nil, err
			}
		}
	}
	makeRoom(lat, 2)
	makeRoom(calls, 4)
	makeRoom(split, 4)
	makeRoom(fails, 2)
	plots := []*plot.Plot{lat, calls, split}
	if anyFailed { // a panel of zeros says less than the table
		plots = append(plots, fails)
	}
	return plots, nil
}

func heterogeneousPlots(r *balancing.Result) ([]*plot.Plot, error) {
	h, c := r.Heterogeneous, r.Config.Heterogeneous
	p := newPlot(fmt.Sprintf("Each server's share of the calls: weighted %s (solid), all weights 1 (dashed), load reports (dotted); capacity shares %s",
		balancing.WeightList(h.With.Weights), capacityShares(c)), "share of the calls")
	p.Y.Min = 0
	for k, row := range []balancing.HeterogeneousRow{h.With, h.Without, h.LoadReports} {
		for i := range c.Workers {
			var xys plotter.XYs
			for s, shares := range row.Seconds {
				if whole(s, (c.Warmup + c.Duration).D()) {
					xys = append(xys, plotter.XY{X: mid(s), Y: shares[i]})
				}
			}
			name := ""
			if k == 0 {
				name = fmt.Sprintf("%d workers", c.Workers[i])
			}
			// Dashed (6-2), then dotted (2-2).
			if err := addLine(p, name, xys, i, k); err != nil {
				return nil, err
			}
		}
	}
	makeRoom(p, len(c.Workers))
	return []*plot.Plot{p}, nil
}

func capacityShares(c balancing.HeterogeneousConfig) string {
	var s []string
	for _, w := range c.Workers {
		s = append(s, fmt.Sprintf("%.0f%%", 100*balancing.PoolCapacity(w, c.Service.D())/c.Capacity()))
	}
	return strings.Join(s, ", ")
}

func shardPlots(r *balancing.Result) ([]*plot.Plot, error) {
	s, c := r.Shard, r.Config.Shard
	p := newPlot(fmt.Sprintf("Cache hit rate, %d servers of %d keys each", c.Servers, c.CacheSize), "hit rate")
	p.Y.Min, p.Y.Max = 0, 1
	p.Legend.Top = false // the lines run high
	for k, row := range s.Rows() {
		var xys plotter.XYs
		for i, h := range row.Seconds {
			xys = append(xys, plotter.XY{X: mid(i), Y: h})
		}
		if err := addLine(p, row.Name(), xys, k, dashed(!row.ShardKeys)); err != nil {
			return nil, err
		}
	}
	return []*plot.Plot{p}, nil
}

func erroringPlots(r *balancing.Result) ([]*plot.Plot, error) {
	e, c := r.Erroring, r.Config.Erroring
	failed := newPlot("Failed calls a second", "calls per second")
	reached := newPlot("Calls a second that reached an erroring server", "calls per second")
	for k, row := range e.Rows() {
		name := fmt.Sprintf("%d of %d erroring, ejection %s", row.Erroring, c.Servers, benchrun.OnOff(row.Ejection))
		var f, to plotter.XYs
		for i, sec := range row.Seconds {
			if !whole(i, c.Duration.D()) {
				break
			}
			f = append(f, plotter.XY{X: mid(i), Y: float64(sec.Failed)})
			to = append(to, plotter.XY{X: mid(i), Y: float64(sec.ToErroring)})
		}
		for _, l := range []struct {
			p   *plot.Plot
			xys plotter.XYs
		}{{failed, f}, {reached, to}} {
			if err := addLine(l.p, name, l.xys, k/2, dashed(!row.Ejection)); err != nil {
				return nil, err
			}
		}
	}
	makeRoom(failed, 4)
	makeRoom(reached, 4)
	return []*plot.Plot{failed, reached}, nil
}
