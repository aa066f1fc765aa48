package channel

import (
	"context"
	"testing"

	"github.com/sluice-rpc/sluice/internal/testkit/benchlat"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/shed"
	"github.com/uber-go/tally/v4"
	"github.com/uber/tchannel-go"
	tjson "github.com/uber/tchannel-go/json"
	"github.com/uber/tchannel-go/raw"
)

func benchGet(ctx tjson.Context, req *echoReq) (*echoRes, error) {
	ctx.SetResponseHeaders(map[string]string{"seen": ctx.Headers()["who"]})
	return &echoRes{Key: req.Key, Server: "s"}, nil
}

// jsonServers returns JSON calls, from one plain tchannel-go client with
// arguments encoded beforehand, to benchGet registered on one server twice:
// with RegisterJSON and with tchannel-go's json.Register (what RegisterJSON
// was), both behind the Channel's guard. The calls differ only in the
// server's JSON handling.
func jsonServers(b *testing.B) (sluice, tch func() error) {
	s := startServer(b)
	registerJSONBothWays(b, s.ch, benchGet, "get-sluice", "get-tchannel")
	ch := plainClient(b, nil)
	ctx := benchCtx(b)
	call := func(method string) func() error {
		return func() error {
			call, err := ch.BeginCall(ctx, s.ch.HostPort(), "kv", method, &tchannel.CallOptions{Format: tchannel.JSON})
			if err != nil {
				return err
			}
			_, _, _, err = raw.WriteArgs(call, []byte(`{"who":"me"}`), []byte(`{"Key":"k"}`))
			return err
		}
	}
	return call("get-sluice"), call("get-tchannel")
}

// BenchmarkJSONServer times a JSON call served by RegisterJSON's handler
// and by tchannel-go's json.Register (see jsonServers), one after the other.
// Client and server run in one process, so allocs/op counts both sides;
// the client's are the same for both.
func BenchmarkJSONServer(b *testing.B) {
	sluice, tch := jsonServers(b)
	b.Run("tchannel", func(b *testing.B) { benchlat.Median(b, tch) })
	b.Run("sluice", func(b *testing.B) { benchlat.Median(b, sluice) })
}

// BenchmarkJSONServerPaired alternates the two calls of BenchmarkJSONServer
// call by call and reports their ratio (sluice/tchannel).
func BenchmarkJSONServerPaired(b *testing.B) {
	sluice, tch := jsonServers(b)
	benchlat.Paired(b, "tchannel", tch, "sluice", sluice)
}

// benchEcho is the raw handler of the server-side benchmarks: it answers a
// call's arguments back, the least a handler can do.
func benchEcho(_ context.Context, req *RawRequest) (*RawResponse, error) {
	return &RawResponse{Arg2: req.Arg2, Arg3: req.Arg3}, nil
}

// plainEcho is benchEcho for tchannel-go's raw.Wrap.
type plainEcho struct{}

func (plainEcho) Handle(_ context.Context, args *raw.Args) (*raw.Res, error) {
	return &raw.Res{Arg2: args.Arg2, Arg3: args.Arg3}, nil
}
func (plainEcho) OnError(context.Context, error) {}

// guardOn is the server-side guard with adaptive shedding, as the issue
// measures it: one adaptive limit per method at its default config.
func guardOn() Option {
	return WithShedding(ShedConfig{Adaptive: &shed.Config{}})
}

// sluiceEchoServer starts a Sluice server of "kv" serving benchEcho as
// "echo" and returns its address.
func sluiceEchoServer(b *testing.B, opts ...Option) string {
	ch, err := New("kv", opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ch.Close)
	if err := ch.RegisterRaw("echo", benchEcho); err != nil {
		b.Fatal(err)
	}
	if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	return ch.HostPort()
}

// plainEchoServer starts a plain tchannel-go server of "kv" serving
// plainEcho as "echo" and returns its address.
func plainEchoServer(b *testing.B) string {
	ch, err := tchannel.NewChannel("kv", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ch.Close()
		testwait.Recv(b, ch.ClosedChan(), "the plain server to close")
	})
	ch.Register(raw.Wrap(plainEcho{}), "echo")
	if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	return ch.PeerInfo().HostPort
}

// echoCalls returns raw calls of "echo", one to each server at hps, all
// from one plain tchannel-go client: the calls differ only in the server
// that answers them.
func echoCalls(b *testing.B, hps ...string) []func() error {
	cl := plainClient(b, nil)
	ctx := benchCtx(b)
	calls := make([]func() error, len(hps))
	for i, hp := range hps {
		calls[i] = func() error {
			_, _, _, err := raw.Call(ctx, cl, hp, "kv", "echo", benchArg2, benchArg3)
			return err
		}
	}
	return calls
}

// BenchmarkRawServer times a raw echo call served by plain tchannel-go and
// by a Sluice server with the guard off and on, one after the other (see
// BenchmarkRawServerPaired for the fair comparison). Client and server run
// in one process, so allocs/op counts both sides; the client's are the same
// for all three, so the differences are the servers'.
func BenchmarkRawServer(b *testing.B) {
	plain, off, on := plainEchoServer(b), sluiceEchoServer(b), sluiceEchoServer(b, guardOn())
	// A client (and a deadline) of its own for each run: -count repeats
	// each sub-benchmark within one run of this function.
	b.Run("tchannel", func(b *testing.B) { benchlat.Median(b, echoCalls(b, plain)[0]) })
	b.Run("sluice-guard-off", func(b *testing.B) { benchlat.Median(b, echoCalls(b, off)[0]) })
	b.Run("sluice-guard-on", func(b *testing.B) { benchlat.Median(b, echoCalls(b, on)[0]) })
}

// BenchmarkRawServerPaired alternates, call by call, a raw echo call served
// by plain tchannel-go and one served by a Sluice server, from one plain
// tchannel-go client, and reports their latency ratio (sluice/tchannel):
// with the guard off, with it on (adaptive shedding), with it on and the
// server metrics recorded (a scope), and an A/A run of two plain
// tchannel-go servers that shows the harness's own bias.
func BenchmarkRawServerPaired(b *testing.B) {
	b.Run("aa", func(b *testing.B) {
		c := echoCalls(b, plainEchoServer(b), plainEchoServer(b))
		benchlat.Paired(b, "tchannel", c[0], "tchannel2", c[1])
	})
	b.Run("guard-off", func(b *testing.B) {
		c := echoCalls(b, plainEchoServer(b), sluiceEchoServer(b))
		benchlat.Paired(b, "tchannel", c[0], "sluice", c[1])
	})
	b.Run("guard-on", func(b *testing.B) {
		c := echoCalls(b, plainEchoServer(b), sluiceEchoServer(b, guardOn()))
		benchlat.Paired(b, "tchannel", c[0], "sluice", c[1])
	})
	b.Run("guard-on-metrics", func(b *testing.B) {
		c := echoCalls(b, plainEchoServer(b), sluiceEchoServer(b, guardOn(), WithScope(tally.NewTestScope("", nil))))
		benchlat.Paired(b, "tchannel", c[0], "sluice", c[1])
	})
}

// BenchmarkRawServerLoadPaired is BenchmarkRawServerPaired under load:
// loadCallers callers keep calls in flight, in blocks of calls that
// alternate between the two servers, and it reports the ratio of their
// time per call (sluice/tchannel; the throughput ratio is its inverse).
// The guard is on with a limit that never binds (guardOnOpen), so that
// both servers answer every call.
func BenchmarkRawServerLoadPaired(b *testing.B) {
	b.Run("aa", func(b *testing.B) {
		c := echoCalls(b, plainEchoServer(b), plainEchoServer(b))
		benchlat.PairedLoad(b, loadCallers, "tchannel", c[0], "tchannel2", c[1])
	})
	b.Run("guard-off", func(b *testing.B) {
		c := echoCalls(b, plainEchoServer(b), sluiceEchoServer(b))
		benchlat.PairedLoad(b, loadCallers, "tchannel", c[0], "sluice", c[1])
	})
	b.Run("guard-on-open", func(b *testing.B) {
		c := echoCalls(b, plainEchoServer(b), sluiceEchoServer(b, guardOnOpen()))
		benchlat.PairedLoad(b, loadCallers, "tchannel", c[0], "sluice", c[1])
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
func guardOnOpen() Option {
	n := 4 * loadCallers
	return WithShedding(ShedConfig{Adaptive: &shed.Config{MinLimit: n, InitialLimit: n, ProbeLimit: n}})
}
