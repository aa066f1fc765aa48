package main

import (
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/sluice-rpc/sluice/tools/benchmarks/balancing"
	"github.com/sluice-rpc/sluice/tools/benchmarks/balancing/balancingchart"
	"github.com/sluice-rpc/sluice/tools/benchmarks/closedloop"
	"github.com/sluice-rpc/sluice/tools/benchmarks/closedloop/closedloopchart"
	"github.com/sluice-rpc/sluice/tools/internal/chart"
)

// charts draws bench's --chart: cli.Lab.Charts.
type charts struct{}

func (charts) CheckPath(path string) error { return chart.CheckPath(path) }

func (charts) ClosedLoop(res *closedloop.Result, path string) error {
	return closedloopchart.Write(res, path)
}

func (charts) Balancing(res *balancing.Result, path string) error {
	return balancingchart.Write(res, path)
}

// panel is a chart's panel: a grid, y from 0, the axes named x and y.
func panel(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text, p.Y.Label.Text = x, y
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	return p
}

// addLine draws xys on p as its i-th line, in the legend as name.
func addLine(p *plot.Plot, name string, xys plotter.XYs, i int) error {
	line, err := plotter.NewLine(xys)
	if err != nil {
		return err
	}
	line.Color = plotutil.Color(i)
	line.Dashes = plotutil.Dashes(i)
	line.Width = vg.Points(1.2)
	p.Add(line)
	p.Legend.Add(name, line)
	return nil
}
