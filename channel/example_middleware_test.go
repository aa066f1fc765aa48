package channel_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/json"
)

type helloRequest struct{ Name string }
type helloResponse struct{ Greeting string }

// An auth token: a client's call middleware adds it as a header to every
// call (an attempt middleware would suit a token that changes with each
// attempt, such as a signature), and the server's inbound middleware
// refuses calls without it, BAD_REQUEST, before any handler runs.
func ExampleInboundMiddleware() {
	const token = "s3cret"
	requireToken := func(ctx context.Context, in *channel.Inbound, next func(context.Context) error) error {
		if in.Headers["auth-token"] != token {
			return tchannel.NewSystemError(tchannel.ErrCodeBadRequest, "missing or wrong auth-token header")
		}
		return next(ctx)
	}
	server, err := channel.New("greeter", channel.WithInboundMiddleware(requireToken))
	if err != nil {
		panic(err)
	}
	defer server.Close()
	if err := server.RegisterJSON(map[string]any{
		"hello": func(ctx json.Context, req *helloRequest) (*helloResponse, error) {
			return &helloResponse{Greeting: "hello, " + req.Name}, nil
		},
	}); err != nil {
		panic(err)
	}
	if err := server.ListenAndServe("127.0.0.1:0"); err != nil {
		panic(err)
	}

	addToken := func(ctx context.Context, service, method string, req *channel.Request, next channel.Invoker) (*channel.Response, error) {
		return next(ctx, service, method, req.WithHeader("auth-token", token))
	}
	for _, c := range []struct {
		name string
		opts []channel.Option
	}{
		{"with the token", []channel.Option{channel.WithCallMiddleware(addToken)}},
		{"without", nil},
	} {
		client, err := channel.New("greeter-client", c.opts...)
		if err != nil {
			panic(err)
		}
		defer client.Close()
		greeter, err := client.NewClient("greeter")
		if err != nil {
			panic(err)
		}
		if err := greeter.AddPeer(server.HostPort()); err != nil {
			panic(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		var res helloResponse
		err = greeter.CallJSON(ctx, "hello", &helloRequest{Name: "alice"}, &res)
		var ce *channel.CallError
		switch {
		case err == nil:
			fmt.Printf("%s: %s\n", c.name, res.Greeting)
		case errors.As(err, &ce):
			fmt.Printf("%s: %v: %s\n", c.name, ce.Code, ce.Message)
		default:
			panic(err)
		}
	}
	// Output:
	// with the token: hello, alice
	// without: BAD_REQUEST: missing or wrong auth-token header
}
