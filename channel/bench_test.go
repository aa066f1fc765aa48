package channel

import (
	"context"
	"crypto/tls"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/busy"
	"github.com/sluice-rpc/sluice/internal/testkit/benchlat"
	"github.com/sluice-rpc/sluice/internal/testkit/testcerts"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/sluice-rpc/sluice/serviceconfig"
	"github.com/sluice-rpc/sluice/tlsfiles"
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
func sluiceClient(tb testing.TB, hp string, opts ...Option) *Channel {
	tb.Helper()
	c, err := New("sluice-client", opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	if err := to(c, "kv").AddPeer(hp); err != nil {
		tb.Fatal(err)
	}
	return c
}

func sluiceRawCall(ctx context.Context, c *Channel) func() error {
	kv := to(c, "kv")
	return func() error {
		_, err := kv.CallRaw(ctx, "echo", benchArg2, benchArg3)
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

// BenchmarkRawCallParallelPaired is BenchmarkRawCallPaired under load:
// loadCallers goroutines call at once, each call to the next of n raw
// methods, through a plain tchannel-go channel and through a Sluice
// Client in alternating blocks (benchlat.PairedLoad). With 4 methods the
// calls look up 4 policies at once: the lookup must cost no more than
// with one.
func BenchmarkRawCallParallelPaired(b *testing.B) {
	for _, n := range []int{1, 4} {
		b.Run(fmt.Sprintf("methods=%d", n), func(b *testing.B) {
			s := startServer(b)
			methods := make([]string, n)
			for i := range methods {
				methods[i] = fmt.Sprintf("echo%d", i)
				if err := s.ch.RegisterRaw(methods[i], func(_ context.Context, req *RawRequest) (*RawResponse, error) {
					return &RawResponse{Arg3: req.Arg3}, nil
				}); err != nil {
					b.Fatal(err)
				}
			}
			ctx := benchCtx(b)
			plain, err := tchannel.NewChannel("plain-client", nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(plain.Close)
			hp := s.ch.HostPort()
			kv := to(sluiceClient(b, hp), "kv")
			var np, ns atomic.Uint32
			benchlat.PairedLoad(b, loadCallers, "tchannel", func() error {
				_, _, _, err := raw.Call(ctx, plain, hp, "kv", methods[int(np.Add(1))%n], benchArg2, benchArg3)
				return err
			}, "sluice", func() error {
				_, err := kv.CallRaw(ctx, methods[int(ns.Add(1))%n], benchArg2, benchArg3)
				return err
			})
		})
	}
}

// BenchmarkPolicyLookup times the policy lookup of a call, from
// loadCallers goroutines at once, each call to the next of n methods.
func BenchmarkPolicyLookup(b *testing.B) {
	for _, n := range []int{1, 4} {
		b.Run(fmt.Sprintf("methods=%d", n), func(b *testing.B) {
			c, err := New("client")
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(c.Close)
			kv := to(c, "kv")
			methods := make([]string, n)
			for i := range methods {
				methods[i] = fmt.Sprintf("m%d", i)
				if _, err := kv.policyFor(methods[i]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.SetParallelism(max(1, loadCallers/runtime.GOMAXPROCS(0)))
			var next atomic.Uint32
			b.RunParallel(func(pb *testing.PB) {
				i := int(next.Add(1))
				for pb.Next() {
					i++
					if _, err := kv.policyFor(methods[i%n]); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkRawCallPairedAA is BenchmarkRawCallPaired with two plain
// tchannel-go clients: the harness's own bias, expected at 1.00.
func BenchmarkRawCallPairedAA(b *testing.B) {
	s := startServer(b)
	ctx := benchCtx(b)
	benchlat.Paired(b, "tchannel", plainRawCall(b, ctx, s.ch.HostPort()),
		"tchannel2", plainRawCall(b, ctx, s.ch.HostPort()))
}

// benchTLS is the mutual TLS of the TLS benchmarks, as a deployment would
// set it up: testcerts' ECDSA P-256 certificates, read through tlsfiles;
// a TLS-only server requiring client certificates of the CA, clients
// presenting one and verifying the server's IP address against the CA.
type benchTLS struct {
	server ServerTLS
	client ClientTLS
}

// newBenchTLS makes fresh certificates and the TLS options that use them.
func newBenchTLS(tb testing.TB) benchTLS {
	tb.Helper()
	certs := testcerts.New(tb)
	sr, err := tlsfiles.New(tlsfiles.Config{Files: tlsfiles.Files{Cert: certs.Server.Cert, Key: certs.Server.Key, CA: certs.CA.File}})
	if err != nil {
		tb.Fatal(err)
	}
	scfg, err := sr.ServerConfig()
	if err != nil {
		tb.Fatal(err)
	}
	cr, err := tlsfiles.New(tlsfiles.Config{Files: tlsfiles.Files{Cert: certs.Client.Cert, Key: certs.Client.Key, CA: certs.CA.File}})
	if err != nil {
		tb.Fatal(err)
	}
	return benchTLS{
		server: ServerTLS{Config: scfg, Mode: TLSOnly},
		client: ClientTLS{Config: func() *tls.Config { return cr.ClientConfig("") }},
	}
}

// reportAllocsPerCall reports, as "allocs/call-<name>", the allocations of
// one call of each arm (client and server: they share the process), the
// mean of 50 calls, untimed; After's are not counted. The benchmark's
// allocs/op counts one call of every arm together.
func reportAllocsPerCall(b *testing.B, arms []benchlat.Arm) {
	const calls = 50
	var before, after runtime.MemStats
	for _, a := range arms {
		var n uint64
		for range calls {
			runtime.ReadMemStats(&before)
			err := a.Call()
			runtime.ReadMemStats(&after)
			if err != nil {
				b.Fatal(err)
			}
			n += after.Mallocs - before.Mallocs
			if a.After != nil {
				a.After()
			}
		}
		b.ReportMetric(float64(n)/calls, "allocs/call-"+a.Name)
	}
}

// BenchmarkRawCallPairedTLS is BenchmarkRawCallPaired with a third client,
// Sluice with mutual TLS (to a TLS-only server requiring a client
// certificate), interleaved call by call with plain tchannel-go and
// plaintext Sluice (to a plaintext server). Its connection is set up
// before the timing: the ratios sluice-tls/tchannel and sluice-tls/sluice
// are TLS's cost per call, the records' encryption both ways.
func BenchmarkRawCallPairedTLS(b *testing.B) {
	mtls := newBenchTLS(b)
	plain, secure := startServer(b), startServer(b, WithServerTLS(mtls.server))
	ctx := benchCtx(b)
	arms := []benchlat.Arm{
		{Name: "tchannel", Call: plainRawCall(b, ctx, plain.ch.HostPort())},
		{Name: "sluice", Call: sluiceRawCall(ctx, sluiceClient(b, plain.ch.HostPort()))},
		{Name: "sluice-tls", Call: sluiceRawCall(ctx, sluiceClient(b, secure.ch.HostPort(), WithClientTLS(mtls.client)))},
	}
	b.ReportAllocs()
	benchlat.Interleaved(b, arms...)
	reportAllocsPerCall(b, arms)
}

// firstCall is an arm whose every call is a new client Channel's first
// call to the server at hp: the Channel made, the connection dialled
// (with its handshakes), the call made. The Channel is closed after each,
// untimed.
func firstCall(b *testing.B, ctx context.Context, name, hp string, opts ...Option) benchlat.Arm {
	var c *Channel
	b.Cleanup(func() {
		if c != nil {
			c.Close()
		}
	})
	return benchlat.Arm{
		Name: name,
		Call: func() error {
			var err error
			if c, err = New("first-call-client", opts...); err != nil {
				return err
			}
			if err := to(c, "kv").AddPeer(hp); err != nil {
				return err
			}
			_, err = to(c, "kv").CallRaw(ctx, "echo", benchArg2, benchArg3)
			return err
		},
		After: func() { c.Close() },
	}
}

// BenchmarkTLSFirstCall times a new client Channel's first call (New,
// connect, TChannel's init, the call) to a TLS-only server with mutual TLS
// and to a plaintext one, interleaved, and reports the difference of
// their medians as "handshake-ns": the TLS handshake's cost to the first
// call on a connection (crypto/tls's default, TLS 1.3; a full handshake
// every time, since tlsfiles' client configurations keep no session
// cache). The Channel is closed after each call, untimed.
func BenchmarkTLSFirstCall(b *testing.B) {
	mtls := newBenchTLS(b)
	plain, secure := startServer(b), startServer(b, WithServerTLS(mtls.server))
	ctx := benchCtx(b)
	arms := []benchlat.Arm{
		firstCall(b, ctx, "plain", plain.ch.HostPort()),
		firstCall(b, ctx, "tls", secure.ch.HostPort(), WithClientTLS(mtls.client)),
	}
	b.ReportAllocs()
	p50 := benchlat.Interleaved(b, arms...)
	b.ReportMetric(p50[1]-p50[0], "handshake-ns")
	reportAllocsPerCall(b, arms)
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
	pol, err := policyOf(c, "kv", "echo")
	if err != nil {
		b.Fatal(err)
	}
	l := pol.list
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
			_, _, err = exchange(call, req, &res, defaultMaxResponseSize, c.responses, nil)
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
	kv := to(c, "kv")
	return func() error { return kv.CallJSON(ctx, "get", &echoReq{Key: "k"}, &out) }
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
	// No retry budget: every call retries twice, ten times its ratio.
	c, err := New("client", WithServiceConfig(cfg), WithBusyConfig(bc), WithRetries(RetryConfig{Budget: retry.BudgetConfig{Disabled: true}}))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < 3; i++ {
		s := startServer(b)
		s.busyEvery = func() bool { return n.Add(1)%3 != 0 }
		if err := to(c, "kv").AddPeer(s.ch.HostPort()); err != nil {
			b.Fatal(err)
		}
	}
	benchlat.Median(b, sluiceRawCall(benchCtx(b), c))
}
