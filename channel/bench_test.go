package channel

import (
	"context"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/busy"
	"github.com/sluice-rpc/sluice/serviceconfig"
	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/raw"
)

// BenchmarkRawCall compares one raw call on loopback through a Sluice
// Channel with the same call through a plain tchannel-go channel, against
// the same server in the same run. Besides ns/op it reports the median
// (p50-ns) of the per-call latencies.
func BenchmarkRawCall(b *testing.B) {
	s := startServer(b)
	arg2, arg3 := []byte("h"), []byte("hello")

	b.Run("tchannel", func(b *testing.B) {
		ch, err := tchannel.NewChannel("client", nil)
		if err != nil {
			b.Fatal(err)
		}
		defer ch.Close()
		hp := s.ch.HostPort()
		ch.Peers().Add(hp)
		runLatency(b, func(ctx context.Context) error {
			_, _, _, err := raw.Call(ctx, ch, hp, "kv", "echo", arg2, arg3)
			return err
		})
	})
	b.Run("sluice", func(b *testing.B) {
		c, err := New("client")
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		if err := c.AddPeer("kv", s.ch.HostPort()); err != nil {
			b.Fatal(err)
		}
		runLatency(b, func(ctx context.Context) error {
			_, err := c.CallRaw(ctx, "kv", "echo", arg2, arg3)
			return err
		})
	})
}

func runLatency(b *testing.B, call func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := call(ctx); err != nil { // connect outside the timing
		b.Fatal(err)
	}
	lat := make([]time.Duration, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := call(ctx); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(t0)
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
}

// BenchmarkJSONCallRetryPolicy compares a successful JSON call with a retry
// policy (and a throttling bucket) against the same call without one.
func BenchmarkJSONCallRetryPolicy(b *testing.B) {
	s := startServer(b)
	cfg, err := serviceconfig.Parse([]byte(`{"methodConfig":[{"name":[{"service":"kv"}],
		"retryPolicy":{"maxAttempts":3,"initialBackoff":"0.001s","maxBackoff":"0.01s","backoffMultiplier":2,"retryableStatusCodes":["BUSY"]}}],
		"retryThrottling":{"maxTokens":10,"tokenRatio":0.1}}`))
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		opts []Option
	}{
		{"no-policy", nil},
		{"retry-policy", []Option{WithServiceConfig(cfg)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c, err := New("client", bc.opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			if err := c.AddPeer("kv", s.ch.HostPort()); err != nil {
				b.Fatal(err)
			}
			var out echoRes
			runLatency(b, func(ctx context.Context) error {
				return c.CallJSON(ctx, "kv", "get", &echoReq{Key: "k"}, &out)
			})
		})
	}
}

// BenchmarkCallThirdAttempt measures a call that succeeds on its third
// attempt (two BUSY answers first), backoffs of zero length aside.
func BenchmarkCallThirdAttempt(b *testing.B) {
	var n atomic.Int64
	var servers []*testServer
	for i := 0; i < 3; i++ {
		servers = append(servers, startServer(b))
	}
	cfg, err := serviceconfig.Parse([]byte(`{"methodConfig":[{"name":[{"service":"kv"}],
		"retryPolicy":{"maxAttempts":3,"initialBackoff":"0.000001s","maxBackoff":"0.000001s","backoffMultiplier":1,"retryableStatusCodes":["BUSY"]}}]}`))
	if err != nil {
		b.Fatal(err)
	}
	c, err := New("client", WithServiceConfig(cfg), WithBusyConfig(func() busy.Config {
		bc := busy.DefaultConfig()
		bc.MaxHalvings = 1 // keep every peer open: this measures the retry path, not throttling
		bc.RecoverRate = 1
		return bc
	}()))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for _, s := range servers {
		s.busyEvery = func() bool { return n.Add(1)%3 != 0 }
		if err := c.AddPeer("kv", s.ch.HostPort()); err != nil {
			b.Fatal(err)
		}
	}
	runLatency(b, func(ctx context.Context) error {
		_, err := c.CallRaw(ctx, "kv", "echo", nil, []byte("x"))
		return err
	})
}

// BenchmarkRawCallPaired alternates a plain tchannel-go raw call and a
// Sluice raw call to the same server in every iteration, so that machine
// noise hits both alike, and reports each one's median latency and their
// ratio (sluice/tchannel).
func BenchmarkRawCallPaired(b *testing.B) {
	s := startServer(b)
	hp := s.ch.HostPort()
	arg2, arg3 := []byte("h"), []byte("hello")
	tch, err := tchannel.NewChannel("plain-client", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer tch.Close()
	c, err := New("sluice-client")
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := c.AddPeer("kv", hp); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	plain := func() error { _, _, _, err := raw.Call(ctx, tch, hp, "kv", "echo", arg2, arg3); return err }
	viaSluice := func() error { _, err := c.CallRaw(ctx, "kv", "echo", arg2, arg3); return err }
	for _, f := range []func() error{plain, viaSluice} { // connect outside the timing
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
	lt, ls := make([]time.Duration, b.N), make([]time.Duration, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		first, second, d1, d2 := plain, viaSluice, &lt[i], &ls[i]
		if i%2 == 1 { // alternate the order too
			first, second, d1, d2 = viaSluice, plain, &ls[i], &lt[i]
		}
		t0 := time.Now()
		if err := first(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := second(); err != nil {
			b.Fatal(err)
		}
		*d1, *d2 = t1.Sub(t0), time.Since(t1)
	}
	b.StopTimer()
	median := func(d []time.Duration) float64 {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return float64(d[len(d)/2].Nanoseconds())
	}
	mt, ms := median(lt), median(ls)
	b.ReportMetric(mt, "p50-tchannel-ns")
	b.ReportMetric(ms, "p50-sluice-ns")
	b.ReportMetric(ms/mt, "sluice/tchannel")
}

// BenchmarkJSONRetryPolicyPaired alternates, call by call, a successful
// JSON call through a channel with a retry policy and throttling bucket and
// one through a channel without, to the same server, and reports each
// one's median latency and their ratio (policy/none).
func BenchmarkJSONRetryPolicyPaired(b *testing.B) {
	s := startServer(b)
	cfg, err := serviceconfig.Parse([]byte(`{"methodConfig":[{"name":[{"service":"kv"}],
		"retryPolicy":{"maxAttempts":3,"initialBackoff":"0.001s","maxBackoff":"0.01s","backoffMultiplier":2,"retryableStatusCodes":["BUSY"]}}],
		"retryThrottling":{"maxTokens":10,"tokenRatio":0.1}}`))
	if err != nil {
		b.Fatal(err)
	}
	mk := func(opts ...Option) func(context.Context) error {
		c, err := New("client", opts...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.Close)
		if err := c.AddPeer("kv", s.ch.HostPort()); err != nil {
			b.Fatal(err)
		}
		var out echoRes
		return func(ctx context.Context) error { return c.CallJSON(ctx, "kv", "get", &echoReq{Key: "k"}, &out) }
	}
	none, policy := mk(), mk(WithServiceConfig(cfg))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, f := range []func(context.Context) error{none, policy} {
		if err := f(ctx); err != nil {
			b.Fatal(err)
		}
	}
	ln, lp := make([]time.Duration, b.N), make([]time.Duration, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		first, second, d1, d2 := none, policy, &ln[i], &lp[i]
		if i%2 == 1 {
			first, second, d1, d2 = policy, none, &lp[i], &ln[i]
		}
		t0 := time.Now()
		if err := first(ctx); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := second(ctx); err != nil {
			b.Fatal(err)
		}
		*d1, *d2 = t1.Sub(t0), time.Since(t1)
	}
	b.StopTimer()
	median := func(d []time.Duration) float64 {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return float64(d[len(d)/2].Nanoseconds())
	}
	mn, mp := median(ln), median(lp)
	b.ReportMetric(mn, "p50-none-ns")
	b.ReportMetric(mp, "p50-policy-ns")
	b.ReportMetric(mp/mn, "policy/none")
}
