package debughttp

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/uber-go/tally/v4"
	"github.com/uber-go/tally/v4/prometheus"
)

// ReportInterval is how often a Metrics' scope hands its counters, gauges
// and histograms to the Prometheus registry (tally buffers them in
// between; timers go through at once). Prometheus scrapes every 10 s or
// more, so a scrape sees values at most a second old.
const ReportInterval = time.Second

// Metrics is a tally root scope whose metrics a Prometheus registry of its
// own exposes, with the Go runtime's and the process's collectors beside
// them. Close it when the command ends: it reports the last values, which
// Handler serves from then on.
type Metrics struct {
	scope   tally.Scope
	closer  io.Closer
	handler http.Handler
}

// NewMetrics returns a Metrics. A metric the registry refuses (the same
// name registered with two sets of tag keys, which Prometheus forbids) is
// reported once on errorLog, if not nil, and left out of /metrics; it
// never stops the command.
func NewMetrics(errorLog io.Writer) *Metrics {
	reg := prom.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
	)
	r := prometheus.NewReporter(prometheus.Options{
		Registerer: reg,
		// tally's reporter panics on a registration error by default.
		OnRegisterError: func(err error) {
			mu.Lock()
			defer mu.Unlock()
			if errorLog != nil && !seen[err.Error()] {
				seen[err.Error()] = true
				fmt.Fprintf(errorLog, "debughttp: metric left out of /metrics: %v\n", err)
			}
		},
	})
	sanitize := prometheus.DefaultSanitizerOpts
	sanitize.ValueCharacters = tally.ValidCharacters{Ranges: []tally.SanitizeRange{{0, utf8.MaxRune}}}
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  r,
		Separator:       prometheus.DefaultSeparator,
		SanitizeOptions: &sanitize,
	}, ReportInterval)
	return &Metrics{scope: scope, closer: closer, handler: r.HTTPHandler()}
}

// Scope returns the scope to record metrics on.
func (m *Metrics) Scope() tally.Scope { return m.scope }

// Handler serves the metrics in Prometheus's text format.
func (m *Metrics) Handler() http.Handler { return m.handler }

// Close stops the scope's reporting after a last report. Handler keeps
// serving what was reported.
func (m *Metrics) Close() error { return m.closer.Close() }
