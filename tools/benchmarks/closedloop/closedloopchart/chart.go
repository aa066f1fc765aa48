// Package closedloopchart draws the closed-loop comparison's result
// (package closedloop) second by second, with gonum's plot: apart from
// closedloop so that sluice, which runs the comparison, does not link the
// charts (sluice-lab draws them).
package closedloopchart

import (
	"fmt"
	"time"

	"github.com/sluice-rpc/sluice/tools/benchmarks/closedloop"
	"github.com/sluice-rpc/sluice/tools/internal/benchrun"
	"github.com/sluice-rpc/sluice/tools/internal/chart"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Write draws r second by second to path (.png or .svg): goodput as a
// share of the capacity, and the p99 latency of successful calls on a log
// scale, one line per combination (per row: with a Mix or Callers, the
// unaware and the aware run of each).
func Write(r *closedloop.Result, path string) error {
	if err := chart.CheckPath(path); err != nil {
		return err
	}
	c := r.Config
	good := plot.New()
	good.Title.Text = fmt.Sprintf("Goodput: %d workers x %v (C = %.0f/s), offered %.1f x C", c.Workers, c.Service, c.Capacity(), c.Load)
	good.X.Label.Text = "seconds"
	good.Y.Label.Text = "successful calls per second / C"
	good.Y.Min, good.Y.Max = 0, 1.1
	lat := plot.New()
	lat.Title.Text = fmt.Sprintf("p99 latency of successful calls (unloaded p99 %v)", r.Unloaded.Latency.P99)
	lat.X.Label.Text = "seconds"
	lat.Y.Label.Text = "p99 (ms, log scale)"
	lat.Y.Scale = plot.LogScale{}
	lat.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	good.Legend.YOffs = -2 * vg.Millimeter
	for _, p := range []*plot.Plot{good, lat} {
		p.Add(plotter.NewGrid())
		p.Legend.Top = true
		p.Legend.Left = false
		p.Legend.Padding = vg.Millimeter
		p.Legend.ThumbnailWidth = 8 * vg.Millimeter
	}
	for i, row := range r.Rows {
		var g, l plotter.XYs
		for _, s := range row.Report.Timeline {
			x := time.Duration(s.Start).Seconds() + 0.5
			if x > c.Duration.D().Seconds() {
				break // the last, partial second
			}
			g = append(g, plotter.XY{X: x, Y: float64(s.OK) / c.Capacity()})
			if s.OK > 0 {
				l = append(l, plotter.XY{X: x, Y: float64(s.P99) / float64(time.Millisecond)})
			}
		}
		name := fmt.Sprintf("shed %s, throttle %s", row.Shedding, benchrun.OnOff(row.Throttling))
		if row.Aware != nil && *row.Aware {
			name += ", aware"
		} else if row.Aware != nil {
			name += ", unaware"
		}
		for _, pl := range []struct {
			p   *plot.Plot
			xys plotter.XYs
		}{{good, g}, {lat, l}} {
			if len(pl.xys) == 0 {
				continue
			}
			line, err := plotter.NewLine(pl.xys)
			if err != nil {
				return err
			}
			line.Color = plotutil.Color(i)
			line.Dashes = plotutil.Dashes(i % 2)
			line.Width = vg.Points(1.5)
			pl.p.Add(line)
			pl.p.Legend.Add(name, line)
		}
	}
	return chart.WriteGrid(path, []*plot.Plot{good, lat}, 1, 4*vg.Inch)
}
