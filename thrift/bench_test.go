package thrift

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/examples/keyvalue/gen-go/keyvalue"
	tthrift "github.com/uber/tchannel-go/thrift"
)

// benchHandler answers every Get with the same value and nothing else.
type benchHandler struct{ keyvalue.TChanKeyValue }

func (benchHandler) Get(tthrift.Context, string) (string, error) { return "value", nil }

// BenchmarkThriftCall compares one generated-client Get on loopback through
// a Sluice channel with the same call through tchannel-go's own Thrift
// client, against the same Sluice server in the same run. Besides ns/op and
// allocs/op it reports the median per-call latency (p50-ns).
func BenchmarkThriftCall(b *testing.B) {
	sch, err := channel.New(service)
	if err != nil {
		b.Fatal(err)
	}
	defer sch.Close()
	NewServer(sch).Register(keyvalue.NewTChanKeyValueServer(benchHandler{}))
	if err := sch.ListenAndServe("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	hp := sch.HostPort()

	b.Run("tchannel", func(b *testing.B) {
		ch, err := tchannel.NewChannel("bench-client", nil)
		if err != nil {
			b.Fatal(err)
		}
		defer closePlain(ch)
		ch.Peers().Add(hp)
		runLatency(b, keyvalue.NewTChanKeyValueClient(tthrift.NewClient(ch, service, nil)))
	})
	b.Run("sluice", func(b *testing.B) {
		ch, err := channel.New("bench-client")
		if err != nil {
			b.Fatal(err)
		}
		defer ch.Close()
		if err := ch.AddPeer(service, hp); err != nil {
			b.Fatal(err)
		}
		runLatency(b, keyvalue.NewTChanKeyValueClient(NewClient(ch, service)))
	})
}

func runLatency(b *testing.B, kv keyvalue.TChanKeyValue) {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctx := tthrift.Wrap(c)
	if _, err := kv.Get(ctx, "key"); err != nil { // connect outside the timing
		b.Fatal(err)
	}
	lat := make([]time.Duration, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := kv.Get(ctx, "key"); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(t0)
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
}

// BenchmarkThriftCallPaired alternates a Get through tchannel-go's own
// Thrift client and one through Sluice's in every iteration, against the
// same Sluice server, so that machine noise hits both alike; it reports each
// one's median latency and their ratio (sluice/tchannel).
func BenchmarkThriftCallPaired(b *testing.B) {
	sch, err := channel.New(service)
	if err != nil {
		b.Fatal(err)
	}
	defer sch.Close()
	NewServer(sch).Register(keyvalue.NewTChanKeyValueServer(benchHandler{}))
	if err := sch.ListenAndServe("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	hp := sch.HostPort()
	pch, err := tchannel.NewChannel("plain-client", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer closePlain(pch)
	pch.Peers().Add(hp)
	plain := keyvalue.NewTChanKeyValueClient(tthrift.NewClient(pch, service, nil))
	sc, err := channel.New("sluice-client")
	if err != nil {
		b.Fatal(err)
	}
	defer sc.Close()
	if err := sc.AddPeer(service, hp); err != nil {
		b.Fatal(err)
	}
	viaSluice := keyvalue.NewTChanKeyValueClient(NewClient(sc, service))

	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctx := tthrift.Wrap(c)
	for _, kv := range []keyvalue.TChanKeyValue{plain, viaSluice} { // connect outside the timing
		if _, err := kv.Get(ctx, "key"); err != nil {
			b.Fatal(err)
		}
	}
	lp, ls := make([]time.Duration, b.N), make([]time.Duration, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		first, second, d1, d2 := plain, viaSluice, &lp[i], &ls[i]
		if i%2 == 1 {
			first, second, d1, d2 = viaSluice, plain, &ls[i], &lp[i]
		}
		t0 := time.Now()
		if _, err := first.Get(ctx, "key"); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := second.Get(ctx, "key"); err != nil {
			b.Fatal(err)
		}
		*d1, *d2 = t1.Sub(t0), time.Since(t1)
	}
	b.StopTimer()
	median := func(d []time.Duration) float64 {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return float64(d[len(d)/2].Nanoseconds())
	}
	mp, ms := median(lp), median(ls)
	b.ReportMetric(mp, "p50-tchannel-ns")
	b.ReportMetric(ms, "p50-sluice-ns")
	b.ReportMetric(ms/mp, "sluice/tchannel")
}
