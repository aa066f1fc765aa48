package stats_test

import (
	"fmt"
	"strings"

	"github.com/sluice-rpc/sluice/stats"
)

// A dashboard names the metrics by these constants. Through tally's
// Prometheus reporter (separator "_") a service's error ratio is the
// call.errors counter over calls, both tagged service.
func Example() {
	prom := func(name string) string { return strings.ReplaceAll(name, ".", "_") }
	fmt.Printf("sum(rate(%s{%s=%q}[1m])) by (%s) / ignoring(%s) group_left sum(rate(%s{%s=%q}[1m]))\n",
		prom(stats.CallErrors), stats.TagService, "kv", stats.TagCode, stats.TagCode, prom(stats.Calls), stats.TagService, "kv")
	fmt.Println(len(stats.LatencyBuckets), "latency bounds from", stats.LatencyBuckets[0], "to", stats.LatencyBuckets[len(stats.LatencyBuckets)-1])
	// Output:
	// sum(rate(call_errors{service="kv"}[1m])) by (code) / ignoring(code) group_left sum(rate(calls{service="kv"}[1m]))
	// 16 latency bounds from 100µs to 10s
}
