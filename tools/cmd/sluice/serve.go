package main

import (
	"context"
	"fmt"
	"io"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/uber/tchannel-go"
)

var serveHelp = helpText{
	synopsis: `sluice serve [--listen HOST:PORT] [--service NAME] [--debug-listen ADDR] [limits flags]`,
	about: `A Sluice TChannel server to try call and bench on (and to test a client's
error handling against): service --service on --listen, with three methods
that take raw and JSON calls alike:

  echo   answers with the request's arg2 (a JSON call's headers) and arg3 (its body)
  fail   answers an application error, {"type":"error","message":"..."}
  busy   answers BUSY, the system error a Sluice client throttles on

It prints "serving SERVICE on HOST:PORT" on stdout once it listens, and runs
until interrupted. With --debug-listen it serves its metrics (server.requests,
...) at /metrics and the runtime's profiles at /debug/pprof/.

` + peerLimitsHelp + `

Exit status: 0 when interrupted, 1 when it cannot listen, 2 on a usage error.`,
	examples: `sluice serve --listen 127.0.0.1:4040
sluice call -p 127.0.0.1:4040 -s echo -m echo -r '{"a":1}'    # {"a":1}, exit 0
sluice call -p 127.0.0.1:4040 -s echo -m fail                 # the error body, exit 1
sluice bench -p 127.0.0.1:4040 -s echo -m echo --rps 1000 -d 10s
sluice serve --listen 127.0.0.1:4040 --max-conns 10000 --idle-timeout 1m   # tighter limits on peers`,
}

// serveFailBody is the application error the fail method answers.
const serveFailBody = `{"type":"error","message":"sluice serve: fail always fails"}`

// serveRun runs `sluice serve` until ctx ends.
func serveRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("sluice serve", serveHelp, stdout, stderr)
	listen := fs.String("listen", "127.0.0.1:0", "`HOST:PORT` to serve TChannel on (port 0: a free port)")
	service := fs.String("service", "echo", "the `SERVICE` name the server answers to")
	fs.alias("s", "service")
	debugAddr := fs.String("debug-listen", "", debugListenUsage)
	limits := peerLimitFlags(fs)
	if code, ok := fs.parse(args); !ok {
		return code
	}
	if *service == "" {
		return fs.usageError("-s/--service is empty")
	}
	debug, err := newDebugListener(*debugAddr, stderr)
	if err != nil {
		return fs.usageError("%v", err)
	}
	defer debug.close()
	ch, err := channel.New(*service, channel.WithScope(debug.scope()), channel.WithPeerLimits(*limits),
		channel.WithTChannelOptions(tchannel.ChannelOptions{Logger: newWarnLogger(stderr)}))
	if err != nil {
		return fs.usageError("%v", err)
	}
	defer ch.Close()
	// Raw handlers take JSON calls too: echoing arg2 and arg3 answers a
	// JSON call with its own headers and body.
	handlers := map[string]channel.RawHandler{
		"echo": func(_ context.Context, req *channel.RawRequest) (*channel.RawResponse, error) {
			return &channel.RawResponse{Arg2: req.Arg2, Arg3: req.Arg3}, nil
		},
		"fail": func(_ context.Context, req *channel.RawRequest) (*channel.RawResponse, error) {
			return &channel.RawResponse{AppError: true, Arg2: req.Arg2, Arg3: []byte(serveFailBody)}, nil
		},
		"busy": func(context.Context, *channel.RawRequest) (*channel.RawResponse, error) {
			return nil, channel.Busy("sluice serve: busy always answers BUSY")
		},
	}
	for m, h := range handlers {
		if err := ch.RegisterRaw(m, h); err != nil {
			return fs.failure("%v", err)
		}
	}
	if err := ch.ListenAndServe(*listen); err != nil {
		return fs.failure("%v", err)
	}
	if err := debug.serve("sluice serve", nil, stderr); err != nil {
		return fs.failure("%v", err)
	}
	fmt.Fprintf(stdout, "serving %s on %s\n", *service, ch.HostPort())
	<-ctx.Done()
	return exitOK
}
