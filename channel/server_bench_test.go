package channel

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/benchlat"
	"github.com/sluice-rpc/sluice/internal/testwait"
	"github.com/sluice-rpc/sluice/shed"
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
	if err := s.ch.RegisterJSON(map[string]any{"get-sluice": benchGet}); err != nil {
		b.Fatal(err)
	}
	if err := tjson.Register(s.ch.Registrar(), tjson.Handlers{"get-tchannel": benchGet}, func(context.Context, error) {}); err != nil {
		b.Fatal(err)
	}
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
	cfg := shed.DefaultConfig()
	return WithShedding(ShedConfig{Adaptive: &cfg})
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
// with the guard off, with it on (adaptive shedding), and an A/A run of two
// plain tchannel-go servers that shows the harness's own bias.
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
		pairedLoad(b, loadCallers, "tchannel", c[0], "tchannel2", c[1])
	})
	b.Run("guard-off", func(b *testing.B) {
		c := echoCalls(b, plainEchoServer(b), sluiceEchoServer(b))
		pairedLoad(b, loadCallers, "tchannel", c[0], "sluice", c[1])
	})
	b.Run("guard-on-open", func(b *testing.B) {
		c := echoCalls(b, plainEchoServer(b), sluiceEchoServer(b, guardOnOpen()))
		pairedLoad(b, loadCallers, "tchannel", c[0], "sluice", c[1])
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
	cfg := shed.DefaultConfig()
	cfg.MinLimit, cfg.InitialLimit, cfg.ProbeLimit = 4*loadCallers, 4*loadCallers, 4*loadCallers
	return WithShedding(ShedConfig{Adaptive: &cfg})
}

// loadBlock is how many calls a block of pairedLoad makes of one kind:
// about 20 ms of load, long enough that starting and stopping the callers
// is a small part of it, short enough that the machine's drift is about
// the same for the two blocks of a pair.
const loadBlock = 1000

// pairedLoad times b.N calls of x and of y made by callers goroutines at
// once, in blocks of up to loadBlock calls of one kind that alternate
// between x and y, in pairs (which goes first alternating too). It reports
// each one's median time per call over the blocks as "ns/call-<name>", and
// as "<nameY>/<nameX>" the median over the pairs of the ratio of y's time
// to x's: a ratio per pair cancels the drift both blocks of a pair share.
// Each is loaded for one block untimed first.
func pairedLoad(b *testing.B, callers int, nameX string, x func() error, nameY string, y func() error) {
	b.Helper()
	block := min(b.N, loadBlock)
	for _, f := range []func() error{x, y} {
		if err := runBlock(f, callers, block); err != nil {
			b.Fatal(err)
		}
	}
	var tx, ty, ratios []float64
	b.ResetTimer()
	for i, left := 0, b.N; left > 0; i, left = i+1, left-block {
		n := min(block, left)
		var dx, dy float64
		first, second, d1, d2 := x, y, &dx, &dy
		if i%2 == 1 {
			first, second, d1, d2 = y, x, &dy, &dx
		}
		for _, run := range []struct {
			f func() error
			d *float64
		}{{first, d1}, {second, d2}} {
			t0 := time.Now()
			if err := runBlock(run.f, callers, n); err != nil {
				b.Fatal(err)
			}
			*run.d = float64(time.Since(t0).Nanoseconds()) / float64(n)
		}
		tx, ty, ratios = append(tx, dx), append(ty, dy), append(ratios, dy/dx)
	}
	b.StopTimer()
	b.ReportMetric(median(tx), "ns/call-"+nameX)
	b.ReportMetric(median(ty), "ns/call-"+nameY)
	b.ReportMetric(median(ratios), nameY+"/"+nameX)
}

// runBlock makes n calls of f from callers goroutines at once and returns
// the first error.
func runBlock(f func() error, callers, n int) error {
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	for range min(callers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if err := f(); err != nil {
					errOnce.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

func median(v []float64) float64 {
	slices.Sort(v)
	return v[len(v)/2]
}
