package debughttp

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/uber-go/tally/v4"

	"github.com/sluice-rpc/sluice/tools/internal/testkit/testhttp"
)

func serve(t *testing.T, m *Metrics, pages map[string]http.Handler) *Server {
	t.Helper()
	s, err := Serve("127.0.0.1:0", m, pages)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// Metrics recorded on the scope reach /metrics under Prometheus names,
// with the tag values as they were; the pprof index, a page of the
// command's own and the index of them all are on the same listener.
func TestServe(t *testing.T) {
	var errLog bytes.Buffer
	m := NewMetrics(&errLog)
	s := serve(t, m, map[string]http.Handler{"/status": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "all well\n")
	})})

	sc := m.Scope().Tagged(map[string]string{"peer": "127.0.0.1:4040", "bucket": ">=1"})
	sc.Counter("peer.sent").Inc(3)
	sc.Histogram("call.latency", tally.DurationBuckets{time.Millisecond, 10 * time.Millisecond}).RecordDuration(2 * time.Millisecond)
	m.Scope().SubScope("server").Gauge("in.flight").Update(2)
	if err := m.Close(); err != nil { // the last report: what follows sees every value
		t.Fatal(err)
	}

	code, body := testhttp.Get(t, "http://"+s.Addr()+MetricsPath)
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d\n%s", code, body)
	}
	for _, want := range []string{
		`peer_sent{bucket=">=1",peer="127.0.0.1:4040"} 3`,
		`call_latency_bucket{bucket=">=1",peer="127.0.0.1:4040",le="0.001"} 0`,
		`call_latency_bucket{bucket=">=1",peer="127.0.0.1:4040",le="0.01"} 1`,
		`server_in_flight 2`,
		"go_goroutines ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	if errLog.Len() > 0 {
		t.Errorf("error log: %s", errLog.String())
	}

	if code, body := testhttp.Get(t, "http://"+s.Addr()+PprofPath); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("%s: %d\n%s", PprofPath, code, body)
	}
	if code, body := testhttp.Get(t, "http://"+s.Addr()+PprofPath+"goroutine?debug=1"); code != http.StatusOK || !strings.Contains(body, "goroutine profile:") {
		t.Errorf("goroutine profile: %d\n%s", code, body)
	}
	if code, body := testhttp.Get(t, "http://"+s.Addr()+"/status"); code != http.StatusOK || body != "all well\n" {
		t.Errorf("/status: %d %q", code, body)
	}
	code, body = testhttp.Get(t, s.URL())
	for _, p := range []string{MetricsPath, PprofPath, "/status"} {
		if code != http.StatusOK || !strings.Contains(body, `href="`+p+`"`) {
			t.Errorf("index: %d, no link to %s:\n%s", code, p, body)
		}
	}
	if code, _ := testhttp.Get(t, "http://"+s.Addr()+"/nope"); code != http.StatusNotFound {
		t.Errorf("/nope: %d, want 404", code)
	}
}

// Without a Metrics there is no /metrics; the profiles are still there.
func TestServeWithoutMetrics(t *testing.T) {
	s := serve(t, nil, nil)
	if code, _ := testhttp.Get(t, "http://"+s.Addr()+MetricsPath); code != http.StatusNotFound {
		t.Errorf("/metrics: %d, want 404", code)
	}
	if code, _ := testhttp.Get(t, "http://"+s.Addr()+PprofPath+"cmdline"); code != http.StatusOK {
		t.Errorf("cmdline: %d", code)
	}
}

// Two metrics of one name with different tag keys cannot both be
// Prometheus series: the second is reported and left out, and the
// command goes on.
func TestConflictingMetricIsReportedNotFatal(t *testing.T) {
	var errLog bytes.Buffer
	m := NewMetrics(&errLog)
	m.Scope().Tagged(map[string]string{"a": "1"}).Counter("dup").Inc(1)
	m.Scope().Tagged(map[string]string{"b": "1"}).Counter("dup").Inc(1)
	m.Scope().Tagged(map[string]string{"b": "2"}).Counter("dup").Inc(1)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(errLog.String(), "left out of the registry"); n != 1 {
		t.Errorf("error log has %d reports, want 1:\n%s", n, errLog.String())
	}
}

func TestServeRejectsBadInput(t *testing.T) {
	ok := http.NotFoundHandler()
	for _, tc := range []struct {
		addr  string
		pages map[string]http.Handler
		want  string
	}{
		{"127.0.0.1:0", map[string]http.Handler{"/": ok}, `page path "/"`},
		{"127.0.0.1:0", map[string]http.Handler{"/metrics": ok}, `page path "/metrics"`},
		{"127.0.0.1:0", map[string]http.Handler{"/debug/pprof/heap": ok}, `page path "/debug/pprof/heap"`},
		{"127.0.0.1:0", map[string]http.Handler{"status": ok}, `page path "status"`},
		{"127.0.0.1:0", map[string]http.Handler{"/status": nil}, `page "/status" has a nil handler`},
		// Of several bad pages, the first by path: the same one every time.
		{"127.0.0.1:0", map[string]http.Handler{"a": ok, "b": ok, "c": ok, "d": ok, "/e": nil}, `page "/e" has a nil handler`},
		{"127.0.0.1:0", map[string]http.Handler{"/x": nil, "/y": nil, "/z": nil, "/w": nil}, `page "/w" has a nil handler`},
		{"127.0.0.1:99999", nil, "debughttp: listen tcp"},
		{"nonsense", nil, "debughttp: listen tcp"},
	} {
		if s, err := Serve(tc.addr, nil, tc.pages); err == nil || !strings.Contains(err.Error(), tc.want) {
			if s != nil {
				s.Close()
			}
			t.Errorf("Serve(%q, %v) = %v, want an error containing %q", tc.addr, tc.pages, err, tc.want)
		}
	}
}
