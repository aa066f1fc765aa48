package closedloop_test

import (
	"github.com/sluice-rpc/sluice/tools/benchmarks/closedloop"
	"github.com/sluice-rpc/sluice/tools/benchmarks/closedloop/closedloopchart"
)

// The chart of the run TestSmallComparison makes is drawn by
// closedloopchart, which imports this package: only a test outside it can
// hand it over.
func init() { *closedloop.DrawChart = closedloopchart.Write }
