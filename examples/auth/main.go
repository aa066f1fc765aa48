// Command auth guards a service with a token through Sluice middleware: a
// client's attempt middleware adds an auth-token header to every attempt it
// sends, and the server's inbound middleware refuses, BAD_REQUEST, every
// call without the right token, before any handler runs.
//
// It starts the server and two clients in one process on 127.0.0.1, calls
// once with the token and once without, and prints what each call got:
//
//	$ go run ./examples/auth
//	server: greeter on 127.0.0.1:41235, requiring the auth-token header
//	with the token: hello, alice
//	without the token: BAD_REQUEST: missing or wrong auth-token header
//	server: 1 call served, 1 refused
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/json"
)

// tokenHeader is the application header that carries the token.
const tokenHeader = "auth-token"

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "auth:", err)
		os.Exit(1)
	}
}

type helloRequest struct{ Name string }
type helloResponse struct{ Greeting string }

// run starts the server, makes the two calls and prints their outcomes to
// out.
func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("auth", flag.ContinueOnError)
	fs.SetOutput(out)
	token := fs.String("token", "s3cret", "the token the server requires and the first client sends")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("auth takes no arguments, got %q", fs.Args())
	}

	var served, refused atomic.Int64
	server, err := channel.New("greeter", channel.WithInboundMiddleware(requireToken(*token, &refused)))
	if err != nil {
		return err
	}
	defer server.Close()
	if err := server.RegisterJSON(map[string]any{
		"hello": func(ctx json.Context, req *helloRequest) (*helloResponse, error) {
			served.Add(1)
			return &helloResponse{Greeting: "hello, " + req.Name}, nil
		},
	}); err != nil {
		return err
	}
	if err := server.ListenAndServe("127.0.0.1:0"); err != nil {
		return err
	}
	fmt.Fprintf(out, "server: greeter on %s, requiring the %s header\n", server.HostPort(), tokenHeader)

	for _, c := range []struct {
		name string
		opts []channel.Option
	}{
		{"with the token", []channel.Option{channel.WithAttemptMiddleware(addToken(*token))}},
		{"without the token", nil},
	} {
		outcome, err := hello(ctx, server.HostPort(), c.opts...)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: %s\n", c.name, outcome)
	}
	fmt.Fprintf(out, "server: %d call served, %d refused\n", served.Load(), refused.Load())
	return nil
}

// requireToken returns the server's inbound middleware: it refuses calls
// whose tokenHeader is not token, counting them on refused, and passes the
// others on to the handler.
func requireToken(token string, refused *atomic.Int64) channel.InboundMiddleware {
	return func(ctx context.Context, in *channel.Inbound, next func(context.Context) error) error {
		if in.Headers[tokenHeader] != token {
			refused.Add(1)
			return tchannel.NewSystemError(tchannel.ErrCodeBadRequest, "missing or wrong %s header", tokenHeader)
		}
		return next(ctx)
	}
}

// addToken returns the client's attempt middleware: it adds token to each
// attempt's request. An attempt middleware runs for every attempt, retries
// and hedges included, so a token source that renews tokens would give each
// attempt a fresh one; a fixed token could as well be added once per call
// by a channel.CallMiddleware.
func addToken(token string) channel.AttemptMiddleware {
	return func(ctx context.Context, a *channel.Attempt, next channel.AttemptInvoker) (*channel.Response, error) {
		a.Request = a.Request.WithHeader(tokenHeader, token)
		return next(ctx, a)
	}
}

// hello calls greeter's hello at hostPort from a client made with opts and
// returns the greeting, or the code and message of a refusal.
func hello(ctx context.Context, hostPort string, opts ...channel.Option) (string, error) {
	client, err := channel.New("greeter-client", opts...)
	if err != nil {
		return "", err
	}
	defer client.Close()
	if err := client.AddPeer("greeter", hostPort); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var res helloResponse
	err = client.CallJSON(ctx, "greeter", "hello", &helloRequest{Name: "alice"}, &res)
	var ce *channel.CallError
	switch {
	case err == nil:
		return res.Greeting, nil
	case errors.As(err, &ce) && ce.Peer != "": // the server answered with an error
		return fmt.Sprintf("%v: %s", ce.Code, ce.Message), nil
	}
	return "", err
}
