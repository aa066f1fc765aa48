package thrift

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/internal/benchlat"
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
	if err := ch.AddPeer(service, hp); err != nil {
		b.Fatal(err)
	}
	return get(ctx, keyvalue.NewTChanKeyValueClient(NewClient(ch, service)))
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
