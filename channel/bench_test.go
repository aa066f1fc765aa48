package channel

import (
	"context"
	"sort"
	"testing"
	"time"

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
