// Command sluice is a raw and JSON client and server on a Sluice channel:
// TestBinarySize compares its size with plain's, the same program on
// plain tchannel-go.
package main

import (
	"context"
	"fmt"

	"github.com/sluice-rpc/sluice/channel"
)

type req struct{ K string }

func main() {
	s, _ := channel.New("kv")
	_ = s.RegisterRaw("echo", func(ctx context.Context, r *channel.RawRequest) (*channel.RawResponse, error) {
		return &channel.RawResponse{Arg3: r.Arg3}, nil
	})
	_ = s.RegisterJSON(map[string]any{"get": func(ctx context.Context, r *req) (*req, error) { return r, nil }})
	_ = s.ListenAndServe("127.0.0.1:0")
	c, _ := channel.New("client")
	kv, _ := c.NewClient("kv")
	_ = kv.AddPeer(s.HostPort())
	var out req
	fmt.Println(kv.CallJSON(context.Background(), "get", &req{K: "x"}, &out))
	res, err := kv.CallRaw(context.Background(), "echo", nil, []byte("x"))
	fmt.Println(res, err)
}
