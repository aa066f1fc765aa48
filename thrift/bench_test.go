package thrift

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/internal/testkit/benchlat"
	"github.com/sluice-rpc/sluice/shed"
	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/examples/keyvalue/gen-go/keyvalue"
	tthrift "github.com/uber/tchannel-go/thrift"
)

// benchHandler answers every Get with the same value and nothing else.
type benchHandler struct{ keyvalue.TChanKeyValue }

func (benchHandler) Get(tthrift.Context, string) (string, error) { return "value", nil }

// startBenchServer starts a Sluice Thrift server of keyvalue on 127.0.0.1
// and returns its address.
func startBenchServer(b *testing.B) string {
	sch, err := channel.New(service)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(sch.Close)
	NewServer(sch).Register(keyvalue.NewTChanKeyValueServer(benchHandler{}))
	if err := sch.ListenAndServe("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	return sch.HostPort()
}

// plainGet returns a Get through tchannel-go's own Thrift client.
func plainGet(b *testing.B, ctx tthrift.Context, hp string) func() error {
	ch, err := tchannel.NewChannel("plain-client", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { closePlain(b, ch) })
	ch.Peers().Add(hp)
	return get(ctx, keyvalue.NewTChanKeyValueClient(tthrift.NewClient(ch, service, nil)))
}

// sluiceGet returns a Get through Sluice's Thrift client.
func sluiceGet(b *testing.B, ctx tthrift.Context, hp string) func() error {
	ch, err := channel.New("sluice-client")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ch.Close)
	cl, err := ch.NewClient(service)
	if err != nil {
		b.Fatal(err)
	}
	if err := cl.AddPeer(hp); err != nil {
		b.Fatal(err)
	}
	return get(ctx, keyvalue.NewTChanKeyValueClient(NewClient(cl)))
}

func get(ctx tthrift.Context, kv keyvalue.TChanKeyValue) func() error {
	return func() error { _, err := kv.Get(ctx, "key"); return err }
}

func benchCtx(b *testing.B) tthrift.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	b.Cleanup(cancel)
	return tthrift.Wrap(ctx)
}

// BenchmarkThriftCall times one generated-client Get on loopback through a
// Sluice channel and through tchannel-go's own Thrift client, against the
// same Sluice server, one after the other (see BenchmarkThriftCallPaired for
// the fair comparison).
func BenchmarkThriftCall(b *testing.B) {
	hp := startBenchServer(b)
	ctx := benchCtx(b)
	b.Run("tchannel", func(b *testing.B) { benchlat.Median(b, plainGet(b, ctx, hp)) })
	b.Run("sluice", func(b *testing.B) { benchlat.Median(b, sluiceGet(b, ctx, hp)) })
}

// BenchmarkThriftCallPaired alternates a Get through tchannel-go's own
// Thrift client and one through Sluice's in every iteration, against the
// same Sluice server, and reports their ratio (sluice/tchannel).
func BenchmarkThriftCallPaired(b *testing.B) {
	hp := startBenchServer(b)
	ctx := benchCtx(b)
	benchlat.Paired(b, "tchannel", plainGet(b, ctx, hp), "sluice", sluiceGet(b, ctx, hp))
}

// guardOn is the server-side guard with adaptive shedding, as the issue
// measures it: one adaptive limit per method at its default config.
func guardOn() channel.Option {
	return channel.WithShedding(channel.ShedConfig{Adaptive: &shed.Config{}})
}

// sluiceKVServer starts a Sluice Thrift server of keyvalue serving
// benchHandler, with opts, and returns its address.
func sluiceKVServer(b *testing.B, opts ...channel.Option) string {
	ch, err := channel.New(service, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ch.Close)
	NewServer(ch).Register(keyvalue.NewTChanKeyValueServer(benchHandler{}))
	if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	return ch.HostPort()
}

// plainKVServer starts tchannel-go's Thrift server of keyvalue serving
// benchHandler on a plain tchannel-go channel and returns its address.
func plainKVServer(b *testing.B) string {
	ch, err := tchannel.NewChannel(service, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { closePlain(b, ch) })
	tthrift.NewServer(ch).Register(keyvalue.NewTChanKeyValueServer(benchHandler{}))
	if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	return ch.PeerInfo().HostPort
}

// kvClients returns keyvalue clients, one of each server at hps, all
// tchannel-go's own Thrift client on one plain tchannel-go channel: their
// calls differ only in the server that answers them.
func kvClients(b *testing.B, hps ...string) []keyvalue.TChanKeyValue {
	cl, err := tchannel.NewChannel("plain-client", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { closePlain(b, cl) })
	kvs := make([]keyvalue.TChanKeyValue, len(hps))
	for i, hp := range hps {
		kvs[i] = keyvalue.NewTChanKeyValueClient(tthrift.NewClient(cl, service, &tthrift.ClientOptions{HostPort: hp}))
	}
	return kvs
}

// kvGets returns Gets, one to each server at hps (see kvClients), all
// in one Thrift context: call them one at a time.
func kvGets(b *testing.B, hps ...string) []func() error {
	ctx := benchCtx(b)
	var gets []func() error
	for _, kv := range kvClients(b, hps...) {
		gets = append(gets, get(ctx, kv))
	}
	return gets
}

// kvGetsConcurrent is kvGets for callers that call at once: each Get has a
// Thrift context of its own, since the client writes the response headers
// into its call's context.
func kvGetsConcurrent(b *testing.B, hps ...string) []func() error {
	// A plain context: wrapping a Thrift context again would share its
	// headers.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	b.Cleanup(cancel)
	var gets []func() error
	for _, kv := range kvClients(b, hps...) {
		gets = append(gets, func() error { _, err := kv.Get(tthrift.Wrap(ctx), "key"); return err })
	}
	return gets
}

// BenchmarkThriftServer times a Get served by tchannel-go's Thrift server on
// a plain tchannel-go channel and by Sluice's on a Channel with the guard
// off and on, one after the other (see BenchmarkThriftServerPaired for the
// fair comparison). Client and server run in one process, so allocs/op
// counts both sides; the client's are the same for all three, so the
// differences are the servers'.
func BenchmarkThriftServer(b *testing.B) {
	plain, off, on := plainKVServer(b), sluiceKVServer(b), sluiceKVServer(b, guardOn())
	// A client (and a deadline) of its own for each run: -count repeats
	// each sub-benchmark within one run of this function.
	b.Run("tchannel", func(b *testing.B) { benchlat.Median(b, kvGets(b, plain)[0]) })
	b.Run("sluice-guard-off", func(b *testing.B) { benchlat.Median(b, kvGets(b, off)[0]) })
	b.Run("sluice-guard-on", func(b *testing.B) { benchlat.Median(b, kvGets(b, on)[0]) })
}

// BenchmarkThriftServerPaired alternates, call by call, a Get served by
// tchannel-go's Thrift server and one served by Sluice's, from one plain
// tchannel-go client, and reports their latency ratio (sluice/tchannel):
// with the guard off, with it on (adaptive shedding), and an A/A run of two
// tchannel-go servers that shows the harness's own bias.
func BenchmarkThriftServerPaired(b *testing.B) {
	b.Run("aa", func(b *testing.B) {
		g := kvGets(b, plainKVServer(b), plainKVServer(b))
		benchlat.Paired(b, "tchannel", g[0], "tchannel2", g[1])
	})
	b.Run("guard-off", func(b *testing.B) {
		g := kvGets(b, plainKVServer(b), sluiceKVServer(b))
		benchlat.Paired(b, "tchannel", g[0], "sluice", g[1])
	})
	b.Run("guard-on", func(b *testing.B) {
		g := kvGets(b, plainKVServer(b), sluiceKVServer(b, guardOn()))
		benchlat.Paired(b, "tchannel", g[0], "sluice", g[1])
	})
}

// BenchmarkThriftServerLoadPaired is BenchmarkThriftServerPaired under
// load: loadCallers callers keep Gets in flight, in blocks of calls that
// alternate between the two servers, and it reports the ratio of their time
// per call (sluice/tchannel; the throughput ratio is its inverse). The guard
// is on with a limit that never binds (guardOnOpen), so that both servers
// answer every call.
func BenchmarkThriftServerLoadPaired(b *testing.B) {
	b.Run("aa", func(b *testing.B) {
		g := kvGetsConcurrent(b, plainKVServer(b), plainKVServer(b))
		benchlat.PairedLoad(b, loadCallers, "tchannel", g[0], "tchannel2", g[1])
	})
	b.Run("guard-off", func(b *testing.B) {
		g := kvGetsConcurrent(b, plainKVServer(b), sluiceKVServer(b))
		benchlat.PairedLoad(b, loadCallers, "tchannel", g[0], "sluice", g[1])
	})
	b.Run("guard-on-open", func(b *testing.B) {
		g := kvGetsConcurrent(b, plainKVServer(b), sluiceKVServer(b, guardOnOpen()))
		benchlat.PairedLoad(b, loadCallers, "tchannel", g[0], "sluice", g[1])
	})
}

// loadCallers is how many calls the load benchmarks keep in flight. On a
// 2-core machine the throughput of client and server together still grows
// up to about this many (one caller: about 30,000 calls/s, 16: 41,000, 64:
// 53,000 raw and 49,000 Thrift), as more calls share each write and wakeup.
const loadCallers = 64

// guardOnOpen is guardOn with the adaptive limit held at or above
// 4*loadCallers, more than the load benchmarks ever have in flight: all
// its work on every request (admission, latency windows, probes), none of
// its shedding. With its defaults the limit sheds under loadCallers calls
// on 2 cores, rightly (their latency is the wait for a CPU, far above the
// no-load latency), and a Busy answer is not a served call.
func guardOnOpen() channel.Option {
	n := 4 * loadCallers
	return channel.WithShedding(channel.ShedConfig{Adaptive: &shed.Config{MinLimit: n, InitialLimit: n, ProbeLimit: n}})
}
