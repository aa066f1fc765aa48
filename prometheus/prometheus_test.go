package prometheus_test

import (
	"bytes"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/uber-go/tally/v4"
	"go.uber.org/goleak"

	"github.com/sluice-rpc/sluice/prometheus"
	"github.com/sluice-rpc/sluice/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// scrape returns what m's handler serves, after a last report.
func scrape(t *testing.T, m *prometheus.Metrics) string {
	t.Helper()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// A timer is a Prometheus histogram (in seconds, with DefaultTimerBuckets),
// not tally's default summary; a tally histogram keeps its own buckets; tag
// values keep their dots and colons; names get "_" for ".".
func TestHistogramsAndNames(t *testing.T) {
	m, err := prometheus.New(prometheus.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := m.Scope().Tagged(map[string]string{"peer": "127.0.0.1:4040"})
	s.Timer("ratelimit.sleep").Record(3 * time.Millisecond)
	s.Histogram("call.size", tally.ValueBuckets{1, 10}).RecordValue(5)
	out := scrape(t, m)
	for _, want := range []string{
		"# TYPE ratelimit_sleep histogram",
		`ratelimit_sleep_bucket{peer="127.0.0.1:4040",le="0.0025"} 0`,
		`ratelimit_sleep_bucket{peer="127.0.0.1:4040",le="0.005"} 1`,
		`ratelimit_sleep_bucket{peer="127.0.0.1:4040",le="10"} 1`,
		`ratelimit_sleep_count{peer="127.0.0.1:4040"} 1`,
		"# TYPE call_size histogram",
		`call_size_bucket{peer="127.0.0.1:4040",le="1"} 0`,
		`call_size_bucket{peer="127.0.0.1:4040",le="10"} 1`,
		"go_goroutines ", // the runtime's collector, in a registry of New's own
		"process_",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("/metrics lacks %q; it serves:\n%s", want, out)
		}
	}
	if strings.Contains(out, "ratelimit_sleep{") {
		t.Errorf("/metrics has a summary; want histograms only:\n%s", out)
	}
}

// A registry given in Options receives the metrics and is what the handler
// serves; New adds no collector to it.
func TestGivenRegistry(t *testing.T) {
	reg := prom.NewRegistry()
	c := prom.NewCounter(prom.CounterOpts{Name: "mine_total", Help: "the program's own"})
	reg.MustRegister(c)
	c.Inc()
	m, err := prometheus.New(prometheus.Options{Registry: reg, ReportInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	m.Scope().Counter("requests").Inc(2)
	out := scrape(t, m)
	for _, want := range []string{"mine_total 1", "requests 2"} {
		if !strings.Contains(out, want) {
			t.Errorf("/metrics lacks %q; it serves:\n%s", want, out)
		}
	}
	if strings.Contains(out, "go_goroutines") {
		t.Errorf("New added the Go collector to a given registry:\n%s", out)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		found = found || mf.GetName() == "requests"
	}
	if !found {
		t.Error("the given registry does not hold the scope's counter")
	}
}

// One name with two sets of tag keys, which Prometheus forbids: the second
// is left out and said once on ErrorLog, however often it is recorded;
// nothing panics.
func TestRegisterErrorSaidOnce(t *testing.T) {
	var log bytes.Buffer
	m, err := prometheus.New(prometheus.Options{ErrorLog: &log})
	if err != nil {
		t.Fatal(err)
	}
	m.Scope().Tagged(map[string]string{"a": "1"}).Counter("clash").Inc(1)
	for range 3 {
		m.Scope().Tagged(map[string]string{"b": "2"}).Counter("clash").Inc(1)
		m.Scope().Tagged(map[string]string{"b": "3"}).Counter("clash").Inc(1)
	}
	out := scrape(t, m)
	if n := strings.Count(log.String(), "left out of the registry"); n != 1 {
		t.Errorf("ErrorLog has %d lines about the clash, want 1:\n%s", n, log.String())
	}
	if !strings.Contains(out, `clash{a="1"} 1`) {
		t.Errorf("/metrics lacks the first clash series:\n%s", out)
	}
	if strings.Contains(out, `b="2"`) {
		t.Errorf("/metrics has the refused series:\n%s", out)
	}
}

// A negative interval is refused with a FieldError naming the field; the
// zero Options is valid.
func TestValidate(t *testing.T) {
	if err := (prometheus.Options{}).Validate(); err != nil {
		t.Errorf("zero Options: %v", err)
	}
	_, err := prometheus.New(prometheus.Options{ReportInterval: -time.Second})
	var fe *retry.FieldError
	if !errors.As(err, &fe) || fe.Field != "Options.ReportInterval" || fe.Package != "prometheus" {
		t.Fatalf("New with a negative interval: %v, want a FieldError on Options.ReportInterval", err)
	}
	if !strings.Contains(err.Error(), "-1s") {
		t.Errorf("error %q does not name the value", err)
	}
}
