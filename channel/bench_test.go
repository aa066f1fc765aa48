package channel

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/busy"
	"github.com/sluice-rpc/sluice/internal/testkit/benchlat"
	"github.com/sluice-rpc/sluice/serviceconfig"
	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/raw"
)

var benchArg2, benchArg3 = []byte("h"), []byte("hello")

// benchCtx is the context of a benchmark's calls: one long deadline, so
// that no call pays for a context of its own.
func benchCtx(b *testing.B) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	b.Cleanup(cancel)
	return ctx
}

// plainRawCall returns a raw call to the server at hp through a plain
// tchannel-go channel.
func plainRawCall(b *testing.B, ctx context.Context, hp string) func() error {
	ch, err := tchannel.NewChannel("plain-client", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ch.Close)
	return func() error {
		_, _, _, err := raw.Call(ctx, ch, hp, "kv", "echo", benchArg2, benchArg3)
		return err
	}
}

// sluiceClient returns a Sluice channel with the server at hp as its peer
// of "kv".
func sluiceClient(b *testing.B, hp string, opts ...Option) *Channel {
	c, err := New("sluice-client", opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	if err := c.AddPeer("kv", hp); err != nil {
		b.Fatal(err)
	}
	return c
}

func sluiceRawCall(ctx context.Context, c *Channel) func() error {
	return func() error {
		_, err := c.CallRaw(ctx, "kv", "echo", benchArg2, benchArg3)
		return err
	}
}

// BenchmarkRawCall times one raw call on loopback through a Sluice Channel
// and through a plain tchannel-go channel, against the same server, one
// after the other (see BenchmarkRawCallPaired for the fair comparison).
func BenchmarkRawCall(b *testing.B) {
	s := startServer(b)
	ctx := benchCtx(b)
	b.Run("tchannel", func(b *testing.B) { benchlat.Median(b, plainRawCall(b, ctx, s.ch.HostPort())) })
	b.Run("sluice", func(b *testing.B) { benchlat.Median(b, sluiceRawCall(ctx, sluiceClient(b, s.ch.HostPort()))) })
}

// BenchmarkRawCallPaired alternates a plain tchannel-go raw call and a
// Sluice raw call to the same server in every iteration and reports each
// one's median latency and their ratio (sluice/tchannel).
func BenchmarkRawCallPaired(b *testing.B) {
	s := startServer(b)
	ctx := benchCtx(b)
	benchlat.Paired(b, "tchannel", plainRawCall(b, ctx, s.ch.HostPort()),
		"sluice", sluiceRawCall(ctx, sluiceClient(b, s.ch.HostPort())))
}

// BenchmarkRawCallPairedAA is BenchmarkRawCallPaired with two plain
// tchannel-go clients: the harness's own bias, expected at 1.00.
func BenchmarkRawCallPairedAA(b *testing.B) {
	s := startServer(b)
	ctx := benchCtx(b)
	benchlat.Paired(b, "tchannel", plainRawCall(b, ctx, s.ch.HostPort()),
		"tchannel2", plainRawCall(b, ctx, s.ch.HostPort()))
}

// BenchmarkRawCallPartsPaired takes BenchmarkRawCallPaired's gap apart,
// each part interleaved with a plain tchannel-go call to the same server:
// "exchange" is Sluice's own tchannel channel sending and reading the
// arguments (BeginCall and exchange, no pipeline); "attempt" adds one
// attempt's work (peer choice, busy limiter, peer accounting, stats).
func BenchmarkRawCallPartsPaired(b *testing.B) {
	s := startServer(b)
	ctx := benchCtx(b)
	c := sluiceClient(b, s.ch.HostPort())
	pol, err := c.policyFor("kv", "echo")
	if err != nil {
		b.Fatal(err)
	}
	l := pol.peers(c, "kv")
	req := &Request{Format: tchannel.Raw, Arg2: benchArg2, Arg3: benchArg3}
	if err := sluiceRawCall(ctx, c)(); err != nil { // connects the peer
		b.Fatal(err)
	}
	b.Run("exchange", func(b *testing.B) {
		p, err := l.Choose(nil)
		if err != nil {
			b.Fatal(err)
		}
		benchlat.Paired(b, "tchannel", plainRawCall(b, ctx, s.ch.HostPort()), "sluice", func() error {
			call, err := p.TChannel().BeginCall(ctx, "kv", "echo", rawCallOptions)
			if err != nil {
				return err
			}
			var res Response
			_, _, err = exchange(call, req, &res, DefaultMaxResponseSize)
			return err
		})
	})
	b.Run("attempt", func(b *testing.B) {
		benchlat.Paired(b, "tchannel", plainRawCall(b, ctx, s.ch.HostPort()), "sluice", func() error {
			st := &callState{c: c, l: l, pol: pol, spec: attemptSpec{service: "kv", method: "echo", req: req}}
			st.used, st.wins = st.usedBuf[:0], st.winsBuf[:0]
			_, _, _, err := c.attempt(ctx, st, &st.spec, 0, &st.resBuf)
			return err
		})
	})
}

const benchRetryConfig = `{"methodConfig":[{"name":[{"service":"kv"}],
	"retryPolicy":{"maxAttempts":3,"initialBackoff":"0.001s","maxBackoff":"0.01s","backoffMultiplier":2,"retryableStatusCodes":["BUSY"]}}],
	"retryThrottling":{"maxTokens":10,"tokenRatio":0.1}}`

func jsonCall(ctx context.Context, c *Channel) func() error {
	var out echoRes
	return func() error { return c.CallJSON(ctx, "kv", "get", &echoReq{Key: "k"}, &out) }
}

func benchRetryPolicy(b *testing.B) *serviceconfig.Config {
	cfg, err := serviceconfig.Parse([]byte(benchRetryConfig))
	if err != nil {
		b.Fatal(err)
	}
	return cfg
}

// BenchmarkJSONCallRetryPolicy times a successful JSON call with a retry
// policy (and a throttling bucket) and the same call without one.
func BenchmarkJSONCallRetryPolicy(b *testing.B) {
	s := startServer(b)
	ctx := benchCtx(b)
	cfg := benchRetryPolicy(b)
	b.Run("no-policy", func(b *testing.B) { benchlat.Median(b, jsonCall(ctx, sluiceClient(b, s.ch.HostPort()))) })
	b.Run("retry-policy", func(b *testing.B) {
		benchlat.Median(b, jsonCall(ctx, sluiceClient(b, s.ch.HostPort(), WithServiceConfig(cfg))))
	})
}

// BenchmarkJSONRetryPolicyPaired alternates, call by call, a successful
// JSON call through a channel with a retry policy and throttling bucket and
// one through a channel without, and reports their ratio (policy/none).
func BenchmarkJSONRetryPolicyPaired(b *testing.B) {
	s := startServer(b)
	ctx := benchCtx(b)
	benchlat.Paired(b, "none", jsonCall(ctx, sluiceClient(b, s.ch.HostPort())),
		"policy", jsonCall(ctx, sluiceClient(b, s.ch.HostPort(), WithServiceConfig(benchRetryPolicy(b)))))
}

// BenchmarkCallThirdAttempt measures a call that succeeds on its third
// attempt (two BUSY answers first), backoffs of zero length aside.
func BenchmarkCallThirdAttempt(b *testing.B) {
	var n atomic.Int64
	cfg, err := serviceconfig.Parse([]byte(`{"methodConfig":[{"name":[{"service":"kv"}],
		"retryPolicy":{"maxAttempts":3,"initialBackoff":"0.000001s","maxBackoff":"0.000001s","backoffMultiplier":1,"retryableStatusCodes":["BUSY"]}}]}`))
	if err != nil {
		b.Fatal(err)
	}
	// MaxHalvings 1 keeps every peer open: this measures the retry path, not throttling.
	bc := busy.Config{MaxHalvings: 1, RecoverRate: 1}
	c, err := New("client", WithServiceConfig(cfg), WithBusyConfig(bc))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < 3; i++ {
		s := startServer(b)
		s.busyEvery = func() bool { return n.Add(1)%3 != 0 }
		if err := c.AddPeer("kv", s.ch.HostPort()); err != nil {
			b.Fatal(err)
		}
	}
	benchlat.Median(b, sluiceRawCall(benchCtx(b), c))
}
