package load

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/internal/testkit/testnet"
	"github.com/sluice-rpc/sluice/serviceconfig"
)

func TestConfigValidate(t *testing.T) {
	ok := Config{Method: "m", RPS: 10, Duration: time.Second}
	for _, tc := range []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.Method = "" }, "Method is required"},
		{func(c *Config) { c.RPS = -1 }, "RPS is -1, must be in [0, 100000] (0: unbounded)"},
		{func(c *Config) { c.RPS, c.Timeline = 0, true }, "Timeline needs RPS > 0"},
		{func(c *Config) { c.RPS, c.Record = 0, true }, "Record, Vary, Client and Context need RPS > 0"},
		{func(c *Config) { c.RPS = 1e9 }, "RPS is 1e+09"},
		{func(c *Config) { c.Duration = time.Hour }, "Duration is 1h0m0s"},
		{func(c *Config) { c.Duration = 0 }, "give Duration or Calls"},
		{func(c *Config) { c.Calls = MaxCalls + 1 }, "Calls is 1000001"},
		{func(c *Config) { c.Concurrency = -1 }, "Concurrency is -1"},
		{func(c *Config) { c.Timeout = 2 * MaxTimeout }, "Timeout is 2m0s"},
		{func(c *Config) { c.Warmup = -1 }, "Warmup is -1"},
	} {
		c := ok
		tc.mod(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate() = %v, want an error containing %q", err, tc.want)
		}
	}
	if err := ok.Validate(); err != nil {
		t.Errorf("Validate() = %v for a good config", err)
	}
	for _, tc := range []struct {
		c    Config
		want int
	}{
		{Config{RPS: 100, Duration: time.Second}, 100},
		{Config{RPS: 100, Duration: time.Second, Calls: 30}, 30},
		{Config{RPS: 3, Calls: 30}, 30},
		{Config{RPS: 0.5, Duration: time.Second}, 1},
		{Config{RPS: 0.01, Calls: 100}, 6}, // no more than MaxDuration of arrivals
	} {
		if got := tc.c.calls(); got != tc.want {
			t.Errorf("%+v.calls() = %d, want %d", tc.c, got, tc.want)
		}
	}
}

func startClient(t *testing.T, s *Servers, service string, cfg *serviceconfig.Config) *channel.Client {
	t.Helper()
	var opts []channel.Option
	if cfg != nil {
		opts = append(opts, channel.WithServiceConfig(cfg))
	}
	ch, err := channel.New("load-test", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.Close)
	c, err := ch.NewClient(service)
	if err != nil {
		t.Fatal(err)
	}
	for _, hp := range s.HostPorts() {
		if err := c.AddPeer(hp); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func startServers(t *testing.T, n int, cfg ServerConfig) *Servers {
	t.Helper()
	s, err := StartServers(n, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// 200 calls at 400/s against 2 ms servers: every call is made and answered,
// the latencies are at least the servers', and the concurrency bound holds.
func TestRunMakesTheCalls(t *testing.T) {
	s := startServers(t, 2, ServerConfig{Service: "kv", Method: "get", Shape: Fixed(2 * time.Millisecond)})
	c := startClient(t, s, "kv", nil)
	r, err := Run(context.Background(), c, Config{Method: "get", RPS: 400, Calls: 200,
		Concurrency: 3, Warmup: 2, Request: &channel.Request{Format: "raw", Arg3: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Calls != 200 || r.OK != 200 || len(r.Errors) != 0 {
		t.Fatalf("calls %d ok %d errors %v, want 200 ok", r.Calls, r.OK, r.Errors)
	}
	if r.Attempts != 200 || r.AttemptsPerCall != 1 || r.ExtraPercent != 0 || r.Sent != 200 {
		t.Errorf("attempts %d (%.2f per call, %.1f%% extra), sent %d; want 200, 1, 0, 200",
			r.Attempts, r.AttemptsPerCall, r.ExtraPercent, r.Sent)
	}
	if got := s.Received(); got != 202 || r.WarmupCalls != 2 {
		t.Errorf("servers received %d requests, %d warmup calls reported; want 202 (200 and 2 warm-up), 2", got, r.WarmupCalls)
	}
	if m := s.MaxInFlight(); m > 3 {
		t.Errorf("servers saw %d requests at once, want at most the concurrency, 3", m)
	}
	q := r.Latency
	if time.Duration(q.P50) < 2*time.Millisecond || q.P50 > q.P90 || q.P90 > q.P99 || q.P99 > q.P999 || q.P999 > q.Max {
		t.Errorf("latency quantiles %+v: want 2ms <= p50 <= p90 <= p99 <= p99.9 <= max", q)
	}
	// 200 arrivals 2.5 ms apart take about half a second.
	if e := time.Duration(r.Elapsed); e < 495*time.Millisecond || e > 10*time.Second {
		t.Errorf("elapsed %v, want about 0.5s", e)
	}
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	// JSON carries whole microseconds of latency and seconds of elapsed time;
	// the round trip may only lose what is finer.
	near := func(a, b, within time.Duration) bool { return a-b <= within && b-a <= within }
	if back.Calls != r.Calls || !near(time.Duration(back.Latency.P50), time.Duration(r.Latency.P50), 500*time.Nanosecond) ||
		!near(time.Duration(back.Elapsed), time.Duration(r.Elapsed), 500*time.Nanosecond) {
		t.Errorf("JSON round trip: %s -> %+v", js, back)
	}
	var sb strings.Builder
	r.Print(&sb)
	for _, want := range []string{"warmup      2 calls one at a time", "calls       200", "p99.9", "1.000 per call", "errors      none"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("Print output lacks %q:\n%s", want, sb.String())
		}
	}
}

// Failures are counted by code, and hedges show up as extra attempts.
func TestRunCountsErrorsAndHedges(t *testing.T) {
	s := startServers(t, 2, ServerConfig{Service: "kv", Method: "get", Format: "json", Shape: Fixed(50 * time.Millisecond)})
	cfg, err := serviceconfig.Parse([]byte(`{"methodConfig":[{"name":[{"service":"kv"}],
		"hedgingPolicy":{"maxAttempts":2,"hedgingDelay":"0.005s","nonFatalStatusCodes":["BUSY"]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	c := startClient(t, s, "kv", cfg)
	req := &channel.Request{Format: "json", Arg3: []byte(`{"k":1}`)}
	r, err := Run(context.Background(), c, Config{Method: "get", RPS: 200, Calls: 20, Request: req})
	if err != nil {
		t.Fatal(err)
	}
	if r.OK != 20 || r.Attempts != 40 || r.ExtraPercent != 100 {
		t.Errorf("ok %d attempts %d extra %.0f%%, want 20 calls each hedged once", r.OK, r.Attempts, r.ExtraPercent)
	}
	// A method nobody serves fails every call with BAD_REQUEST; a timeout
	// shorter than the servers' latency fails with TIMEOUT.
	r, err = Run(context.Background(), c, Config{Method: "nope", RPS: 200, Calls: 5, Request: req})
	if err != nil {
		t.Fatal(err)
	}
	if r.OK != 0 || r.Failed != 5 || r.Errors["BAD_REQUEST"] != 5 || r.Latency != (Quantiles{}) || r.FailedLatency.Max == 0 {
		t.Errorf("unknown method: ok %d failed %d errors %v, latency %+v failed %+v; want 5 BAD_REQUEST timed as failures",
			r.OK, r.Failed, r.Errors, r.Latency, r.FailedLatency)
	}
	plain := startClient(t, s, "kv", nil)
	r, err = Run(context.Background(), plain, Config{Method: "get", RPS: 200, Calls: 5, Request: req,
		Timeout: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.OK != 0 || r.Failed != 5 || r.Errors["TIMEOUT"] != 5 || time.Duration(r.FailedLatency.P50) < 10*time.Millisecond {
		t.Errorf("short timeout: ok %d failed %d errors %v failed latency %+v, want 5 TIMEOUT after 10ms", r.OK, r.Failed, r.Errors, r.FailedLatency)
	}
}

// Calls refused in this process (nothing listens: UNAVAILABLE) count as
// refused, apart from failures, with their own latency.
func TestRunCountsRefusedCalls(t *testing.T) {
	ch, err := channel.New("load-test")
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	c, err := ch.NewClient("kv")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddPeer(testnet.Refused(t)); err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), c, Config{Method: "get", RPS: 500, Calls: 10})
	if err != nil {
		t.Fatal(err)
	}
	if r.Refused != 10 || r.Failed != 0 || r.OK != 0 || r.Errors["UNAVAILABLE"] != 10 || r.RefusedLatency.Max == 0 || r.Latency != (Quantiles{}) {
		t.Errorf("refused %d failed %d ok %d errors %v refused latency %+v latency %+v; want 10 UNAVAILABLE, timed apart",
			r.Refused, r.Failed, r.OK, r.Errors, r.RefusedLatency, r.Latency)
	}
}

// Progress reports the running totals, one report at a time, while the run
// lasts; a run of several periods reports at least once, with totals that
// only grow and add up.
func TestRunReportsProgress(t *testing.T) {
	s := startServers(t, 1, ServerConfig{Service: "kv", Method: "get"})
	c := startClient(t, s, "kv", nil)
	var reports []Progress
	r, err := Run(context.Background(), c, Config{Method: "get", RPS: 200, Calls: 60,
		ProgressEvery: 50 * time.Millisecond, Progress: func(p Progress) { reports = append(reports, p) }})
	if err != nil {
		t.Fatal(err)
	}
	// 60 arrivals 5 ms apart span 295 ms: at least one 50 ms period ends.
	if len(reports) == 0 {
		t.Fatal("no progress report")
	}
	prev := Progress{}
	for _, p := range reports {
		if p.Calls != p.OK+p.Failed+p.Refused || p.Calls < prev.Calls || p.Elapsed <= prev.Elapsed || p.Elapsed < 50*time.Millisecond ||
			p.Failed != 0 || p.Refused != 0 || p.Rate < 0 {
			t.Errorf("report %+v after %+v", p, prev)
		}
		prev = p
	}
	if prev.Calls > r.Calls {
		t.Errorf("last report %d calls, the run made %d", prev.Calls, r.Calls)
	}
	if err := (Config{Method: "get", RPS: 1, Calls: 1, ProgressEvery: -time.Second}).Validate(); err == nil ||
		!strings.Contains(err.Error(), "ProgressEvery is -1s") {
		t.Errorf("Validate() = %v for a negative ProgressEvery", err)
	}
}

// A cancelled context ends the run early with the calls made so far.
func TestRunStopsWithItsContext(t *testing.T) {
	s := startServers(t, 1, ServerConfig{Service: "kv", Method: "get"})
	c := startClient(t, s, "kv", nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r, err := Run(ctx, c, Config{Method: "get", RPS: 10, Duration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if r.Calls > 1 {
		t.Errorf("a cancelled run made %d calls", r.Calls)
	}
}

func TestStartServersValidates(t *testing.T) {
	for _, tc := range []struct {
		n    int
		cfg  ServerConfig
		want string
	}{
		{0, ServerConfig{Service: "s", Method: "m"}, "0 servers"},
		{1, ServerConfig{Method: "m"}, "need a service"},
		{1, ServerConfig{Service: "s", Method: "m", Format: "thrift"}, `format "thrift"`},
		{1, ServerConfig{Service: "s", Method: "m", Shape: Shape{FastMin: 2, FastMax: 1}}, "fast range"},
	} {
		if _, err := StartServers(tc.n, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("StartServers(%d, %+v) = %v, want an error containing %q", tc.n, tc.cfg, err, tc.want)
		}
	}
}

// Whole microseconds (and seconds to the microsecond) survive JSON exactly:
// 1.005 ms is 1005000 ns, not the 1004999 a truncated float product gives.
func TestDurationsRoundTripJSON(t *testing.T) {
	for _, d := range []time.Duration{2825 * time.Microsecond, 1005 * time.Microsecond, 1, 0, 7314 * time.Microsecond, 123456789 * time.Microsecond} {
		m := Millis(d.Round(time.Microsecond))
		js, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var back Millis
		if err := json.Unmarshal(js, &back); err != nil {
			t.Fatal(err)
		}
		if back != m {
			t.Errorf("Millis %v -> %s -> %v", time.Duration(m), js, time.Duration(back))
		}
		s := Seconds(d.Round(time.Microsecond))
		if js, err = json.Marshal(s); err != nil {
			t.Fatal(err)
		}
		var sback Seconds
		if err := json.Unmarshal(js, &sback); err != nil {
			t.Fatal(err)
		}
		if sback != s {
			t.Errorf("Seconds %v -> %s -> %v", time.Duration(s), js, time.Duration(sback))
		}
	}
}

// TestWorkersNeverExceedTheirCapacity: however the schedule absorbs late
// timers, a pool of N workers of d never finishes k requests sooner than
// k/N x d after they all arrive.
func TestWorkersNeverExceedTheirCapacity(t *testing.T) {
	const workers, d, requests = 4, 10 * time.Millisecond, 40
	s := startServers(t, 1, ServerConfig{Service: "s", Method: "m", Shape: Fixed(d), Workers: workers})
	start := time.Now()
	var wg sync.WaitGroup
	for range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.serve(context.Background(), s.servers[0])
		}()
	}
	wg.Wait()
	if took, least := time.Since(start), requests/workers*d; took < least {
		t.Fatalf("%d requests on %d workers of %v took %v, less than %v", requests, workers, d, took, least)
	}
	if q := s.servers[0].pool.Stats().Queued; q < requests-workers {
		t.Errorf("Queued() = %d, want at least %d", q, requests-workers)
	}
}

// A channel's warmup ends at its first call that finds the peer
// unreachable or overloaded, and only then: of 20 warmup calls to a
// server that answers every request Busy, or never in time, one reaches
// it; to one that answers with an application error or UNEXPECTED, all
// 20 do (the peer is reachable); with nothing listening, one is made.
// The Report counts the warmup calls made.
func TestWarmupEndsAtAFailure(t *testing.T) {
	const warmup = 20
	blackHole := make(chan struct{})
	defer close(blackHole)
	for _, tc := range []struct {
		name    string
		handler channel.RawHandler // nil: nothing listens
		timeout time.Duration
		want    int // warmup calls made, and reaching the server
	}{
		{"busy", func(ctx context.Context, req *channel.RawRequest) (*channel.RawResponse, error) {
			return nil, channel.Busy("no")
		}, 0, 1},
		{"no answer", func(ctx context.Context, req *channel.RawRequest) (*channel.RawResponse, error) {
			<-blackHole // past the caller's deadline: TIMEOUT
			return nil, nil
		}, 50 * time.Millisecond, 1},
		{"refused", nil, 0, 1},
		{"application error", func(ctx context.Context, req *channel.RawRequest) (*channel.RawResponse, error) {
			return &channel.RawResponse{AppError: true}, nil
		}, 0, warmup},
		{"unexpected", func(ctx context.Context, req *channel.RawRequest) (*channel.RawResponse, error) {
			return nil, errors.New("no")
		}, 0, warmup},
		{"ok", func(ctx context.Context, req *channel.RawRequest) (*channel.RawResponse, error) {
			return &channel.RawResponse{}, nil
		}, 0, warmup},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var received atomic.Int64
			hostPort := ""
			if tc.handler == nil {
				hostPort = testnet.Refused(t)
			} else {
				srv, err := channel.New("kv")
				if err != nil {
					t.Fatal(err)
				}
				defer srv.Close()
				srv.RegisterRaw("get", func(ctx context.Context, req *channel.RawRequest) (*channel.RawResponse, error) {
					received.Add(1)
					return tc.handler(ctx, req)
				})
				if err := srv.ListenAndServe("127.0.0.1:0"); err != nil {
					t.Fatal(err)
				}
				hostPort = srv.HostPort()
			}
			ch, err := channel.New("load-test")
			if err != nil {
				t.Fatal(err)
			}
			defer ch.Close()
			c, err := ch.NewClient("kv")
			if err != nil {
				t.Fatal(err)
			}
			if err := c.AddPeer(hostPort); err != nil {
				t.Fatal(err)
			}
			r, err := Run(context.Background(), c, Config{Method: "get", RPS: 500, Calls: 3, Warmup: warmup, Timeout: tc.timeout})
			if err != nil {
				t.Fatal(err)
			}
			if r.WarmupCalls != tc.want {
				t.Errorf("Report.WarmupCalls = %d, want %d", r.WarmupCalls, tc.want)
			}
			if tc.handler == nil {
				return
			}
			if warm := received.Load() - int64(r.Sent); warm != int64(tc.want) {
				t.Errorf("%d warmup requests reached the server (%d in all, %d in the run), want %d", warm, received.Load(), r.Sent, tc.want)
			}
		})
	}
}
