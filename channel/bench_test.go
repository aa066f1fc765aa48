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
