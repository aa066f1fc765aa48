package load

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/uber/tchannel-go"
	athrift "github.com/uber/tchannel-go/thirdparty/github.com/apache/thrift/lib/go/thrift"
	tthrift "github.com/uber/tchannel-go/thrift"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/thrift"
)

// startClients starts n client channels, each with a Client of service
// that has the servers' peers.
func startClients(t *testing.T, s *Servers, service string, n int) []*channel.Client {
	t.Helper()
	chs := make([]*channel.Client, n)
	for i := range chs {
		chs[i] = startClient(t, s, service, nil)
	}
	return chs
}

// An unbounded run of Calls alone makes exactly that many calls, as fast
// as the connections and the concurrency allow: never more in flight than
// channels x Concurrency, every channel used, no schedule (so no late
// call), and the Report says how it ran.
func TestRunUnboundedMakesTheCalls(t *testing.T) {
	s := startServers(t, 2, ServerConfig{Service: "kv", Method: "get", Shape: Fixed(time.Millisecond)})
	chs := startClients(t, s, "kv", 3)
	var reports []Progress
	r, err := RunClients(context.Background(), chs, Config{Method: "get", Calls: 600, Concurrency: 2, Warmup: 1,
		ProgressEvery: 20 * time.Millisecond, Progress: func(p Progress) { reports = append(reports, p) }})
	if err != nil {
		t.Fatal(err)
	}
	if r.Calls != 600 || r.OK != 600 || len(r.Errors) != 0 || r.Attempts != 600 || r.Sent != 600 {
		t.Fatalf("calls %d ok %d errors %v attempts %d sent %d, want 600 ok", r.Calls, r.OK, r.Errors, r.Attempts, r.Sent)
	}
	if r.Mode != ModeUnbounded || r.OfferedRPS != nil || r.Connections != 3 || r.Concurrency != 2 || r.MaxInFlight != 6 || r.Late != 0 {
		t.Errorf("mode %q offered %v connections %d concurrency %d in flight %d late %d; want unbounded, none, 3, 2, 6, 0",
			r.Mode, r.OfferedRPS, r.Connections, r.Concurrency, r.MaxInFlight, r.Late)
	}
	if got := s.Received(); got != 603 {
		t.Errorf("servers received %d requests, want 603 (600 and one warm-up call per channel)", got)
	}
	if m := s.MaxInFlight(); m > 6 {
		t.Errorf("servers saw %d requests at once, want at most 3 channels x 2", m)
	}
	q := r.Latency
	if q.Count != 600 || time.Duration(q.P50) < time.Millisecond || q.P50 > q.P90 || q.P90 > q.P95 || q.P95 > q.P99 || q.P99 > q.P999 || q.P999 > q.Max {
		t.Errorf("latency %+v: want 600 calls, 1ms <= p50 <= ... <= max", q)
	}
	// 600 calls of 1 ms, 6 at a time: at least 100 ms; far less than the
	// 6 s the old default rate (100/s) would have taken.
	if e := time.Duration(r.Elapsed); e < 100*time.Millisecond || r.Throughput <= 0 {
		t.Errorf("elapsed %v throughput %v/s", e, r.Throughput)
	}
	for _, p := range reports {
		if p.Calls != p.OK || p.Calls > 600 {
			t.Errorf("progress %+v", p)
		}
	}
	var sb strings.Builder
	r.Print(&sb)
	for _, want := range []string{"load        unbounded: 3 connections x 2 calls in flight (6 in all)", "calls       600 in ", "600 ok, 0 failed, 0 refused locally; throughput "} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("Print lacks %q:\n%s", want, sb.String())
		}
	}
}

// An unbounded run with a Duration stops starting calls when it is over
// and returns once the calls in flight have; with a cancelled context it
// makes none.
func TestRunUnboundedStopsAtItsDuration(t *testing.T) {
	s := startServers(t, 1, ServerConfig{Service: "kv", Method: "get"})
	chs := startClients(t, s, "kv", 2)
	r, err := RunClients(context.Background(), chs, Config{Method: "get", Duration: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if e := time.Duration(r.Elapsed); e < 150*time.Millisecond || e > 150*time.Millisecond+2*time.Second || r.Calls == 0 || r.OK != r.Calls {
		t.Errorf("elapsed %v, %d calls %d ok; want about 150ms of ok calls", e, r.Calls, r.OK)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r, err = RunClients(ctx, chs, Config{Method: "get", Duration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if r.Calls != 0 {
		t.Errorf("a cancelled unbounded run made %d calls", r.Calls)
	}
	if _, err := RunClients(context.Background(), chs, Config{Method: "get", Calls: 1, Concurrency: MaxConcurrency}); err == nil ||
		!strings.Contains(err.Error(), "2 channels x Concurrency 10000") {
		t.Errorf("RunClients with 20,000 in flight: %v", err)
	}
	if _, err := RunClients(context.Background(), nil, Config{Method: "get", Calls: 1}); err == nil {
		t.Error("RunClients with no Client: no error")
	}
	other := startClients(t, s, "other", 1)
	if _, err := RunClients(context.Background(), append(chs[:1:1], other...), Config{Method: "get", Calls: 1}); err == nil ||
		!strings.Contains(err.Error(), `Client 1 calls service "other", Client 0 "kv"`) {
		t.Errorf("RunClients with Clients of two services: %v", err)
	}
	if _, err := RunClients(context.Background(), []*channel.Client{chs[0], nil}, Config{Method: "get", Calls: 1}); err == nil ||
		!strings.Contains(err.Error(), "Client 1 is nil") {
		t.Errorf("RunClients with a nil Client: %v", err)
	}
}

// appErrorServer is a Thrift service whose every method answers with an
// exception: an application error, whatever the call sent.
type appErrorServer struct{}

func (appErrorServer) Service() string   { return "KeyValue" }
func (appErrorServer) Methods() []string { return []string{"get"} }
func (appErrorServer) Handle(_ tthrift.Context, _ string, p athrift.TProtocol) (bool, athrift.TStruct, error) {
	if err := p.Skip(athrift.STRUCT); err != nil {
		return false, nil, err
	}
	return false, emptyStruct{}, nil
}

// emptyStruct is a Thrift struct with no field.
type emptyStruct struct{}

func (emptyStruct) Read(p athrift.TProtocol) error { return p.Skip(athrift.STRUCT) }
func (emptyStruct) Write(p athrift.TProtocol) error {
	if err := p.WriteStructBegin("e"); err != nil {
		return err
	}
	if err := p.WriteFieldStop(); err != nil {
		return err
	}
	return p.WriteStructEnd()
}

// A Thrift request (as `sluice bench` builds one: Format thrift, the
// encoded arguments in Arg3, method Service::method) runs in both modes,
// and a Thrift exception counts as an application error, as a JSON one
// does: answered, failed, not a crash.
func TestRunThriftApplicationErrors(t *testing.T) {
	srv, err := channel.New("kv")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	thrift.NewServer(srv).Register(appErrorServer{})
	if err := srv.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	ch, err := channel.New("load-test")
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	client, err := ch.NewClient("kv")
	if err != nil {
		t.Fatal(err)
	}
	if err := client.AddPeer(srv.HostPort()); err != nil {
		t.Fatal(err)
	}
	req := &channel.Request{Format: tchannel.Thrift, Arg3: []byte{0}} // an empty arguments struct
	for _, rps := range []float64{0, 500} {
		r, err := Run(context.Background(), client, Config{Method: "KeyValue::get", Request: req, RPS: rps, Calls: 20})
		if err != nil {
			t.Fatalf("rps %v: %v", rps, err)
		}
		if r.Calls != 20 || r.Failed != 20 || r.Errors["APPLICATION"] != 20 || r.FailedLatency.Count != 20 || r.Latency.Count != 0 {
			t.Errorf("rps %v: calls %d failed %d errors %v; want 20 APPLICATION errors", rps, r.Calls, r.Failed, r.Errors)
		}
	}
}

// In JSON, a set of no call has null quantiles (not zeros), as a second
// of the timeline with no success has, and an unbounded run has a null
// offered rate; what has values keeps them.
func TestReportJSONNulls(t *testing.T) {
	rs := []result{{Record: Record{Latency: time.Millisecond}, attempts: 1}, {Record: Record{Latency: 2 * time.Millisecond, Code: "TIMEOUT", At: time.Second}, attempts: 1}}
	r := summarize(rs, time.Second)
	r.Mode = ModeUnbounded
	r.Timeline = timeline(rs)
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(js, &m); err != nil {
		t.Fatal(err)
	}
	if m["refused_latency_ms"] != nil || m["offered_rps"] != nil {
		t.Errorf("refused_latency_ms %v offered_rps %v, want null: %s", m["refused_latency_ms"], m["offered_rps"], js)
	}
	for _, k := range []string{"refused_latency_ms", "offered_rps"} {
		if _, ok := m[k]; !ok {
			t.Errorf("%s missing, want null: %s", k, js)
		}
	}
	if q, ok := m["latency_ms"].(map[string]any); !ok || q["count"] != 1.0 || q["p50"] != 1.0 {
		t.Errorf("latency_ms %v, want one call of 1ms", m["latency_ms"])
	}
	secs := m["timeline"].([]any)
	if s0, s1 := secs[0].(map[string]any), secs[1].(map[string]any); s0["p50_ms"] != 1.0 || s1["p99_ms"] != nil {
		t.Errorf("timeline %v: want 1ms in the first second, null in the second (no success)", secs)
	}
	var back Report
	if err := json.Unmarshal(js, &back); err != nil || back.RefusedLatency != (Quantiles{}) || back.Latency.Count != 1 {
		t.Errorf("round trip: %v, %+v", err, back)
	}
}

// The histogram's quantiles are within half a bucket (0.4%) of the exact
// nearest-rank ones, its count, mean and maximum exact, and merging two
// is recording both.
func TestHistQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var a, b hist
	var all []time.Duration
	for i := range 20000 {
		// Spread over several powers of two: 50 ns to about 200 ms.
		d := time.Duration(50 + rng.ExpFloat64()*float64(time.Millisecond)*float64(1+i%200))
		all = append(all, d)
		if i%3 == 0 {
			a.add(d)
		} else {
			b.add(d)
		}
	}
	a.merge(&b)
	slices.Sort(all)
	for _, q := range []float64{0, 0.001, 0.5, 0.9, 0.95, 0.99, 0.999, 1} {
		exact, got := Quantile(all, q), a.quantile(q)
		if diff := float64(got - exact); diff > 0.0041*float64(exact)+1 || -diff > 0.0041*float64(exact)+1 {
			t.Errorf("q %v: %v, exact %v", q, got, exact)
		}
	}
	var sum time.Duration
	for _, d := range all {
		sum += d
	}
	qs := a.quantiles()
	if qs.Count != len(all) || time.Duration(qs.Max) != all[len(all)-1] || time.Duration(qs.Mean) != sum/time.Duration(len(all)) {
		t.Errorf("count %d max %v mean %v, want %d %v %v", qs.Count, qs.Max, qs.Mean, len(all), all[len(all)-1], sum/time.Duration(len(all)))
	}
	var empty hist
	if empty.quantiles() != (Quantiles{}) || empty.quantile(0.5) != 0 {
		t.Error("an empty histogram has quantiles")
	}
	var small hist
	for _, d := range []time.Duration{0, 3, 127, 128, 129} {
		small.add(d)
	}
	if small.quantile(0.2) != 0 || small.quantile(0.4) != 3 || small.quantile(0.6) != 127 || small.quantile(1) != 129 {
		t.Errorf("durations below 128ns are exact: %v %v %v", small.quantile(0.2), small.quantile(0.4), small.quantile(0.6))
	}
}

// BenchmarkRunUnbounded measures an unbounded run's calls per second
// through embedded servers answering at once: 4 channels x 1 call in
// flight (yab's default on 2 cores) and 4 x 8. Compare with
// `sluice bench --embedded 1 -n 100000`, which reports calls/s too.
func BenchmarkRunUnbounded(b *testing.B) {
	for _, c := range []struct {
		name                     string
		channels, concurrency, n int
	}{{"4x1", 4, 1, 1}, {"4x8", 4, 8, 1}} {
		b.Run(c.name, func(b *testing.B) {
			s, err := StartServers(c.n, ServerConfig{Service: "kv", Method: "get"})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var chs []*channel.Client
			for range c.channels {
				ch, err := channel.New("bench")
				if err != nil {
					b.Fatal(err)
				}
				defer ch.Close()
				cl, err := ch.NewClient("kv")
				if err != nil {
					b.Fatal(err)
				}
				for _, hp := range s.HostPorts() {
					if err := cl.AddPeer(hp); err != nil {
						b.Fatal(err)
					}
				}
				chs = append(chs, cl)
			}
			b.ReportAllocs()
			b.ResetTimer()
			r, err := RunClients(context.Background(), chs, Config{Method: "get", Calls: max(b.N, 1),
				Concurrency: c.concurrency, Warmup: 10})
			if err != nil {
				b.Fatal(err)
			}
			if r.OK != r.Calls {
				b.Fatalf("%d of %d calls failed: %v", r.Calls-r.OK, r.Calls, r.Errors)
			}
			b.ReportMetric(float64(r.Calls)/time.Duration(r.Elapsed).Seconds(), "calls/s")
		})
	}
}

// BenchmarkHistAdd is the cost of recording one latency in an unbounded
// run: no allocation once its bucket group exists.
func BenchmarkHistAdd(b *testing.B) {
	var h hist
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		h.add(time.Duration(50_000 + i%100_000))
	}
}
