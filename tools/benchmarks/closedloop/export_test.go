package closedloop

// drawChart draws a result's chart (closedloopchart.Write, set by
// chart_test.go); DrawChart exports it to that test.
var (
	drawChart func(r *Result, path string) error
	DrawChart = &drawChart
)
