// Package prometheus exposes a Sluice program's metrics to Prometheus in one
// call: New returns a tally root scope, to pass to channel.WithScope (or any
// Sluice package taking a scope), whose metrics a Prometheus registry holds,
// and the http.Handler that serves them in Prometheus's text format.
//
// It replaces the set-up a program otherwise writes with tally's reporter
// (github.com/uber-go/tally/v4/prometheus): a registry, the reporter, a
// root scope with the "_" separator, and a sanitizer that keeps tag values
// as they are (tally's default for Prometheus rewrites
// peer="127.0.0.1:4040" as peer="127_0_0_1_4040"). What it sets:
//
//   - tally histograms (call.latency, call.attempts, ...) are Prometheus
//     histograms with the buckets the library gave them, and timers are
//     Prometheus histograms too (tally's reporter makes summaries by
//     default, which cannot be aggregated across instances), with
//     DefaultTimerBuckets;
//   - tag values keep every character; names keep letters, digits and "_"
//     (Prometheus's rule), "." becoming "_": call.latency is
//     call_latency_bucket{le="..."} in seconds;
//   - a metric the registry refuses (one name with two sets of tag keys,
//     which Prometheus forbids) is reported once on Options.ErrorLog and
//     left out, where tally's reporter would panic;
//   - a new registry holds the Go runtime's and the process's collectors
//     beside the scope's metrics, unless Options.Registry names one.
//
// This package is a module of its own (github.com/sluice-rpc/sluice/prometheus)
// so that the library's module never requires the Prometheus client: a
// program that does not import it does not have client_golang in its
// module graph.
package prometheus
