package prometheus

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"

	"github.com/sluice-rpc/sluice/retry"
)

// DefaultReportInterval is how often the scope hands its counters, gauges
// and histograms to the registry when Options.ReportInterval is zero
// (tally buffers them in between; timers go through at once). Prometheus
// scrapes every 10 s or more, so a scrape sees values at most a second old.
const DefaultReportInterval = time.Second

// DefaultTimerBuckets returns the buckets, in seconds, of the Prometheus
// histogram a tally timer becomes: 100 µs to 10 s, the range of the
// library's call.latency histogram.
func DefaultTimerBuckets() []float64 {
	return []float64{
		0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
		0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
	}
}

// Options configures New. The zero value is valid and means: a new
// registry with the Go runtime's and the process's collectors, a report
// every DefaultReportInterval, registration errors dropped.
type Options struct {
	// Registry receives the scope's metrics, and Handler serves what it
	// gathers. Nil means a new registry holding the Go runtime's and the
	// process's collectors too. Give prometheus.DefaultRegisterer's
	// registry (or your own) to serve the scope's metrics beside others.
	Registry *prom.Registry

	// ReportInterval is how often the scope reports to the registry; zero
	// means DefaultReportInterval.
	ReportInterval time.Duration

	// ErrorLog, if not nil, receives one line for each distinct metric the
	// registry refuses; the metric is left out and the program goes on.
	ErrorLog io.Writer
}

// Validate reports the first rule o breaks, as a *retry.FieldError, or
// nil.
func (o Options) Validate() error {
	if o.ReportInterval < 0 {
		return &retry.FieldError{Package: "prometheus", Field: "Options.ReportInterval",
			Value: o.ReportInterval.String(), Rule: "must be >= 0 (0 means " + DefaultReportInterval.String() + ")"}
	}
	return nil
}

// Metrics is a tally root scope whose metrics a Prometheus registry holds,
// and the handler serving them. Close it when the program ends: it makes
// a last report, which Handler serves from then on.
type Metrics struct {
	scope   tally.Scope
	closer  io.Closer
	handler http.Handler
}

// New returns the Metrics opts describes, or the *retry.FieldError of an
// invalid opts.
func New(opts Options) (*Metrics, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	reg := opts.Registry
	if reg == nil {
		reg = prom.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	interval := opts.ReportInterval
	if interval == 0 {
		interval = DefaultReportInterval
	}
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
	)
	r := tallyprom.NewReporter(tallyprom.Options{
		Registerer:              reg,
		DefaultTimerType:        tallyprom.HistogramTimerType,
		DefaultHistogramBuckets: DefaultTimerBuckets(),
		// tally's reporter panics on a registration error by default.
		OnRegisterError: func(err error) {
			mu.Lock()
			defer mu.Unlock()
			if opts.ErrorLog != nil && !seen[err.Error()] {
				seen[err.Error()] = true
				fmt.Fprintf(opts.ErrorLog, "prometheus: metric left out of the registry: %v\n", err)
			}
		},
	})
	sanitize := tallyprom.DefaultSanitizerOpts
	sanitize.ValueCharacters = tally.ValidCharacters{Ranges: []tally.SanitizeRange{{0, utf8.MaxRune}}}
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  r,
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &sanitize,
	}, interval)
	return &Metrics{scope: scope, closer: closer, handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}, nil
}

// Scope returns the scope to record metrics on: pass it to
// channel.WithScope.
func (m *Metrics) Scope() tally.Scope { return m.scope }

// Handler serves the registry's metrics in Prometheus's text format: mount
// it at /metrics.
func (m *Metrics) Handler() http.Handler { return m.handler }

// Close stops the scope's reporting after a last report. Handler keeps
// serving what was reported.
func (m *Metrics) Close() error { return m.closer.Close() }
