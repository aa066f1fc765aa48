package channel_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/uber/tchannel-go/json"
)

type GetRequest struct{ Key string }
type GetResponse struct{ Value string }

// A server and a client on 127.0.0.1: the client's calls choose a peer,
// honour busy throttling and report metrics by themselves.
func Example() {
	server, err := channel.New("kv")
	if err != nil {
		panic(err)
	}
	defer server.Close()
	server.RegisterJSON(map[string]any{
		"get": func(ctx json.Context, req *GetRequest) (*GetResponse, error) {
			return &GetResponse{Value: "value of " + req.Key}, nil
		},
	})
	if err := server.ListenAndServe("127.0.0.1:0"); err != nil {
		panic(err)
	}

	client, err := channel.New("example-client")
	if err != nil {
		panic(err)
	}
	defer client.Close()
	kv, err := client.NewClient("kv")
	if err != nil {
		panic(err)
	}
	if err := kv.AddPeer(server.HostPort()); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var res GetResponse
	if err := kv.CallJSON(ctx, "get", &GetRequest{Key: "a"}, &res); err != nil {
		panic(err)
	}
	fmt.Println(res.Value)
	// Output: value of a
}

// A peer nobody listens on: its connector's connect is refused, so a call
// fails at once with UNAVAILABLE instead of waiting for its deadline, and
// nothing is sent.
func ExampleErrUnavailable() {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	dead := l.Addr().String()
	l.Close() // nothing listens there now

	client, err := channel.New("example-client")
	if err != nil {
		panic(err)
	}
	defer client.Close()
	kv, err := client.NewClient("kv")
	if err != nil {
		panic(err)
	}
	if err := kv.AddPeer(dead); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err = kv.CallRaw(ctx, "get", nil, nil)
	var ce *channel.CallError
	fmt.Println(errors.As(err, &ce), ce.Code, ce.Attempts, errors.Is(err, channel.ErrUnavailable), time.Since(start) < time.Second)
	fmt.Println(kv.Peers()[0].State)
	// Output:
	// true UNAVAILABLE 0 true true
	// TRANSIENT_FAILURE
}
