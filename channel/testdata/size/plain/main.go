// Command plain is testdata/size/sluice on plain tchannel-go.
package main

import (
	"context"
	"fmt"

	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/json"
	"github.com/uber/tchannel-go/raw"
)

type req struct{ K string }

type echo struct{}

func (echo) Handle(ctx context.Context, args *raw.Args) (*raw.Res, error) {
	return &raw.Res{Arg3: args.Arg3}, nil
}
func (echo) OnError(ctx context.Context, err error) {}

func main() {
	s, _ := tchannel.NewChannel("kv", nil)
	s.Register(raw.Wrap(echo{}), "echo")
	_ = json.Register(s, json.Handlers{"get": func(ctx json.Context, r *req) (*req, error) { return r, nil }}, nil)
	_ = s.ListenAndServe("127.0.0.1:0")
	c, _ := tchannel.NewChannel("client", nil)
	c.Peers().Add(s.PeerInfo().HostPort)
	var out req
	cl := json.NewClient(c, "kv", nil)
	ctx, cancel := json.NewContext(1e9)
	defer cancel()
	fmt.Println(cl.Call(ctx, "get", &req{K: "x"}, &out))
	_, a3, _, err := raw.Call(context.Background(), c, s.PeerInfo().HostPort, "kv", "echo", nil, []byte("x"))
	fmt.Println(a3, err)
}
