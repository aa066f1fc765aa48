package main

import (
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
