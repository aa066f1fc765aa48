package debughttp

import (
	"io"

	"github.com/sluice-rpc/sluice/prometheus"
)

// ReportInterval is how often a Metrics' scope hands its counters, gauges
// and histograms to the Prometheus registry: the prometheus module's
// default.
const ReportInterval = prometheus.DefaultReportInterval

// Metrics is a tally root scope whose metrics a Prometheus registry of its
// own exposes, with the Go runtime's and the process's collectors beside
// them: the prometheus module's, which a service uses too (one place for
// the set-up). Close it when the command ends: it reports the last values,
// which Handler serves from then on.
type Metrics = prometheus.Metrics

// NewMetrics returns a Metrics. A metric the registry refuses (the same
// name registered with two sets of tag keys, which Prometheus forbids) is
// reported once on errorLog, if not nil, and left out of /metrics; it
// never stops the command.
func NewMetrics(errorLog io.Writer) *Metrics {
	m, err := prometheus.New(prometheus.Options{ErrorLog: errorLog})
	if err != nil { // the options above are valid: a bug
		panic(err)
	}
	return m
}
