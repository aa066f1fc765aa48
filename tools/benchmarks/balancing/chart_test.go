package balancing_test

import (
	"github.com/sluice-rpc/sluice/tools/benchmarks/balancing"
	"github.com/sluice-rpc/sluice/tools/benchmarks/balancing/balancingchart"
)

// The charts of the runs the tests make are drawn by balancingchart, which
// imports this package: only a test outside it can hand it over.
func init() { *balancing.DrawCharts = balancingchart.Write }
