// Command auth authorises callers by the identity in their TLS
// certificates: the server requires mutual TLS and its inbound middleware
// lets only the SPIFFE ID spiffe://sluice.test/client call; the handler
// reads who called with channel.PeerIdentity.
//
// The port also serves plaintext (channel.TLSMixed), as during a rollout
// of TLS: plaintext callers, which have no certificate, are authorised by
// a token instead, which a client's attempt middleware adds to every
// attempt as the auth-token header. Once every caller speaks TLS the
// server moves to channel.TLSOnly and the token goes.
//
// It starts the server and five clients in one process on 127.0.0.1, with
// the certificates in certs/ (internal/gencerts made them: go generate), calls once from
// each and prints what each call got:
//
//	$ go run ./examples/auth
//	server: greeter on 127.0.0.1:41235, TLS callers must be spiffe://sluice.test/client, plaintext ones send the auth-token header
//	TLS as spiffe://sluice.test/client: hello, alice (from spiffe://sluice.test/client)
//	TLS as spiffe://sluice.test/reporting: BAD_REQUEST: spiffe://sluice.test/reporting may not call greeter
//	TLS without a certificate: UNAVAILABLE: refused in the TLS handshake: remote error: tls: certificate required
//	plaintext with the token: hello, alice (from a plaintext caller)
//	plaintext without the token: BAD_REQUEST: missing or wrong auth-token header
//	server: 2 calls served, 2 refused
package main

//go:generate go run ../../internal/gencerts -dir certs -ca "auth example CA" -server greeter -client client=client,spiffe://sluice.test/client -client reporting=reporting,spiffe://sluice.test/reporting

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/tlsfiles"
	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/json"
)

// allowed is the only identity the server lets call over TLS.
const allowed = "spiffe://sluice.test/client"

// tokenHeader is the application header that carries a plaintext caller's
// token.
const tokenHeader = "auth-token"

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "auth:", err)
		os.Exit(1)
	}
}

type helloRequest struct{ Name string }
type helloResponse struct{ Greeting string }

// run starts the server, makes the calls and prints their outcomes to out.
func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("auth", flag.ContinueOnError)
	fs.SetOutput(out)
	certs := fs.String("certs", "examples/auth/certs", "the directory of the certificates (ca.pem, server.pem, client.pem, reporting.pem and their keys)")
	token := fs.String("token", "s3cret", "the token the server requires of plaintext callers and the first plaintext client sends")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("auth takes no arguments, got %q", fs.Args())
	}
	file := func(name string) string { return filepath.Join(*certs, name) }

	// The server presents server.pem and requires client certificates the
	// CA signed; tlsfiles re-reads the files when they change.
	serverFiles, err := tlsfiles.New(tlsfiles.Config{Files: tlsfiles.Files{
		Cert: file("server.pem"), Key: file("server-key.pem"), CA: file("ca.pem")}})
	if err != nil {
		return err
	}
	serverConfig, err := serverFiles.ServerConfig()
	if err != nil {
		return err
	}
	var served, refused atomic.Int64
	server, err := channel.New("greeter",
		channel.WithServerTLS(channel.ServerTLS{Config: serverConfig, Mode: channel.TLSMixed}),
		channel.WithInboundMiddleware(authorise(*token, &refused)))
	if err != nil {
		return err
	}
	defer server.Close()
	if err := server.RegisterJSON(map[string]any{
		"hello": func(ctx json.Context, req *helloRequest) (*helloResponse, error) {
			served.Add(1)
			from := "a plaintext caller"
			if id, ok := channel.PeerIdentity(ctx); ok {
				from = id.URIs[0] // the middleware let only allowed in
			}
			return &helloResponse{Greeting: fmt.Sprintf("hello, %s (from %s)", req.Name, from)}, nil
		},
	}); err != nil {
		return err
	}
	if err := server.ListenAndServe("127.0.0.1:0"); err != nil {
		return err
	}
	fmt.Fprintf(out, "server: greeter on %s, TLS callers must be %s, plaintext ones send the %s header\n", server.HostPort(), allowed, tokenHeader)

	tlsClient := func(cert string) ([]channel.Option, error) {
		f := tlsfiles.Files{CA: file("ca.pem")} // the server must chain to it
		if cert != "" {
			f.Cert, f.Key = file(cert+".pem"), file(cert+"-key.pem")
		}
		r, err := tlsfiles.New(tlsfiles.Config{Files: f})
		if err != nil {
			return nil, err
		}
		// A configuration per connection, so that replaced files are used.
		return []channel.Option{channel.WithClientTLS(channel.ClientTLS{Config: func() *tls.Config { return r.ClientConfig("") }})}, nil
	}
	for _, c := range []struct {
		name string
		cert string // a TLS client's certificate in certs/, "-" for plaintext
		opts []channel.Option
	}{
		{"TLS as spiffe://sluice.test/client", "client", nil},
		{"TLS as spiffe://sluice.test/reporting", "reporting", nil},
		{"TLS without a certificate", "", nil},
		{"plaintext with the token", "-", []channel.Option{channel.WithAttemptMiddleware(addToken(*token))}},
		{"plaintext without the token", "-", nil},
	} {
		opts := c.opts
		if c.cert != "-" {
			if opts, err = tlsClient(c.cert); err != nil {
				return err
			}
		}
		outcome, err := hello(ctx, server.HostPort(), opts...)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: %s\n", c.name, outcome)
	}
	fmt.Fprintf(out, "server: %d calls served, %d refused\n", served.Load(), refused.Load())
	return nil
}

// authorise returns the server's inbound middleware: a call over TLS must
// come from the allowed identity (the server verified the certificate
// against its CA during the handshake), a plaintext call must carry
// token. It counts the calls it refuses on refused and passes the others
// on to the handler.
func authorise(token string, refused *atomic.Int64) channel.InboundMiddleware {
	return func(ctx context.Context, in *channel.Inbound, next func(context.Context) error) error {
		switch {
		case in.TLS == nil: // plaintext, on the mixed port
			if in.Headers[tokenHeader] != token {
				refused.Add(1)
				return tchannel.NewSystemError(tchannel.ErrCodeBadRequest, "missing or wrong %s header", tokenHeader)
			}
		case !in.TLS.Verified || !slices.Contains(in.TLS.Identity.URIs, allowed):
			refused.Add(1)
			who := strings.Join(in.TLS.Identity.URIs, ", ")
			if who == "" {
				who = in.TLS.Identity.Subject
			}
			return tchannel.NewSystemError(tchannel.ErrCodeBadRequest, "%s may not call greeter", who)
		}
		return next(ctx)
	}
}

// addToken returns a plaintext client's attempt middleware: it adds token
// to each attempt's request. An attempt middleware runs for every attempt,
// retries and hedges included, so a token source that renews tokens would
// give each attempt a fresh one; a fixed token could as well be added once
// per call by a channel.CallMiddleware.
func addToken(token string) channel.AttemptMiddleware {
	return func(ctx context.Context, a *channel.Attempt, next channel.AttemptInvoker) (*channel.Response, error) {
		a.Request = a.Request.WithHeader(tokenHeader, token)
		return next(ctx, a)
	}
}

// hello calls greeter's hello at hostPort from a client made with opts and
// returns the greeting, or the code and message of a refusal: the server's
// answer, or the TLS handshake's when the server refused the connection.
func hello(ctx context.Context, hostPort string, opts ...channel.Option) (string, error) {
	client, err := channel.New("greeter-client", opts...)
	if err != nil {
		return "", err
	}
	defer client.Close()
	greeter, err := client.NewClient("greeter")
	if err != nil {
		return "", err
	}
	if err := greeter.AddPeer(hostPort); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var res helloResponse
	err = greeter.CallJSON(ctx, "hello", &helloRequest{Name: "alice"}, &res)
	var (
		ce    *channel.CallError
		alert *net.OpError // crypto/tls's error for the alert the server sent
	)
	switch {
	case err == nil:
		return res.Greeting, nil
	case errors.As(err, &ce) && ce.Peer != "": // the server answered with an error
		return fmt.Sprintf("%v: %s", ce.Code, ce.Message), nil
	case errors.As(err, &ce) && errors.As(err, &alert) && alert.Op == "remote error":
		return fmt.Sprintf("%v: refused in the TLS handshake: %v", ce.Code, alert), nil
	}
	return "", err
}
