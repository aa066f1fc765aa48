package recorder

import (
	"time"

	"github.com/uber-go/tally/v4"
)

// nopScope is the scope of a Recorder made without one: every metric it
// hands out does nothing at all. It embeds tally.NoopScope for the rest of
// the interface (capabilities, snapshots, ...).
type nopScope struct{ tally.Scope }

func (s nopScope) Counter(string) tally.Counter                    { return nopMetric{} }
func (s nopScope) Gauge(string) tally.Gauge                        { return nopMetric{} }
func (s nopScope) Timer(string) tally.Timer                        { return nopMetric{} }
func (s nopScope) Histogram(string, tally.Buckets) tally.Histogram { return nopMetric{} }
func (s nopScope) Tagged(map[string]string) tally.Scope            { return s }
func (s nopScope) SubScope(string) tally.Scope                     { return s }

type nopMetric struct{}

func (nopMetric) Inc(int64)                    {}
func (nopMetric) Update(float64)               {}
func (nopMetric) Record(time.Duration)         {}
func (nopMetric) RecordValue(float64)          {}
func (nopMetric) RecordDuration(time.Duration) {}
func (nopMetric) Start() tally.Stopwatch       { return tally.NoopScope.Timer("").Start() }
