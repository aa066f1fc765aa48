package balancing

// drawCharts draws a result's charts (balancingchart.Write, set by
// chart_test.go); DrawCharts exports it to that test.
var (
	drawCharts func(r *Result, path string) error
	DrawCharts = &drawCharts
)
