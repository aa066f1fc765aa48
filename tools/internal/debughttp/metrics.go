package debughttp

import (
	"io"

	"github.com/sluice-rpc/sluice/prometheus"
)

// ReportInterval is how often a Metrics' scope reports to the registry.
const ReportInterval = prometheus.DefaultReportInterval

// Metrics is a tally root scope exposed by a Prometheus registry of its
// own, with the Go runtime's and the process's collectors.
type Metrics = prometheus.Metrics

// NewMetrics returns a Metrics. A metric the registry refuses is reported
// once on errorLog, if not nil, and left out of /metrics.
func NewMetrics(errorLog io.Writer) *Metrics {
	m, err := prometheus.New(prometheus.Options{ErrorLog: errorLog})
	if err != nil { // the options above are valid: a bug
		panic(err)
	}
	return m
}
