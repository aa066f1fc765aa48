package channel

import (
	"context"
	"testing"

	"github.com/sluice-rpc/sluice/internal/benchlat"
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
