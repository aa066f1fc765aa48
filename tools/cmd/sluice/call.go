package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/channel"
)

var callHelp = helpText{
	synopsis: `sluice call -p HOST:PORT -s SERVICE -m METHOD [-r BODY | -f FILE] [flags]`,
	about: `Makes one call through Sluice's pipeline (peer choice, busy throttling,
retries or hedges under a budget), as yab and tcurl make one: the response body,
and nothing else, goes to stdout, so that 'sluice call ... | jq .' works. With -v
the peer, the attempts, the response headers and the time go to stderr.

The call is JSON (-e json, the default: the body must be JSON, {} if none is
given) or raw (-e raw: arg3 as given). A retry or hedging policy comes from
flags (--retry-max, --hedge-max) or from a service config file
(--service-config). A peer that refuses connections fails the call at once
with UNAVAILABLE rather than at the timeout.

` + targetsHelp + `

Exit status: 0 when the call succeeded; 1 when it failed, with a system error
(BUSY, TIMEOUT, UNAVAILABLE, ...) or an application error (whose body still
goes to stdout); 2 on a usage error.`,
	examples: `sluice call -p 127.0.0.1:4040 -s kv -m get -r '{"key":"a"}' | jq .
sluice call -p 127.0.0.1:4040 -s kv -m echo -e raw -r hello
sluice call -P peers.txt -s kv -m get -r '{"key":"a"}' --retry-max 3 -v
sluice call -P dns:///kv.default.svc.cluster.local:4040 -s kv -m get -r '{"key":"a"}'
sluice call -P etcd://127.0.0.1:2379/services/kv -s kv -m get -r '{"key":"a"}'
sluice call -p 127.0.0.1:4040 -s kv -m get -f request.json -H auth:secret --timeout 200ms`,
}

func callCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("sluice call", callHelp, stdout, stderr)
	peers := addPeerFlags(fs)
	target := addTargetFlags(fs, "the TChannel `SERVICE` to call", "the `METHOD` (endpoint) to call", "the request `BODY` (arg3)")
	service, method, encoding, body := target.service, target.method, target.encoding, target.body
	file := fs.String("file", "", "read the request body from `FILE`")
	fs.alias("f", "file")
	var headers multiFlag
	fs.Var(&headers, "header", "an application header `KEY:VALUE` of a JSON call (repeatable)")
	fs.alias("H", "header")
	timeout := fs.Duration("timeout", time.Second, "the whole call's deadline, across attempts")
	verbose := fs.Bool("verbose", false, "print the peer, attempts, response headers and time on stderr")
	fs.alias("v", "verbose")
	policy := addPolicyFlags(fs.FlagSet, false)
	if code, ok := fs.parse(args); !ok {
		return code
	}

	src, err := peers.source()
	if err != nil {
		return fs.usageError("%v", err)
	}
	defer src.close()
	switch {
	case src.empty():
		return fs.usageError("give a peer: -p HOST:PORT (repeatable) or -P TARGET")
	case *service == "" || *method == "":
		return fs.usageError("-s/--service and -m/--method are required")
	case target.checkEncoding() != nil:
		return fs.usageError("%v", target.checkEncoding())
	case *body != "" && *file != "":
		return fs.usageError("give -r/--request or -f/--file, not both")
	case *timeout <= 0:
		return fs.usageError("--timeout is %v, must be > 0", *timeout)
	case len(headers) > 0 && *encoding == "raw":
		return fs.usageError("-H/--header needs -e json: a raw call's arg2 is not headers")
	}
	if *file != "" {
		b, err := os.ReadFile(*file)
		if err != nil {
			return fs.usageError("-f/--file: %v", err)
		}
		*body = string(b)
	}
	if err := target.checkJSONBody(); err != nil {
		return fs.usageError("%v", err)
	}
	req := &channel.Request{Format: "raw", Arg3: []byte(*body)}
	if *encoding == "json" {
		hdrs := map[string]string{}
		for _, h := range headers {
			k, v, ok := strings.Cut(h, ":")
			if !ok || k == "" {
				return fs.usageError("-H/--header %q: want key:value", h)
			}
			hdrs[k] = v
		}
		req = &channel.Request{Format: "json", Headers: hdrs, Arg3: []byte(*body)}
	}
	cfg, err := policy.serviceConfig(*service, *method)
	if err != nil {
		return fs.usageError("%v", err)
	}

	ch, err := channel.New("sluice-call", append(src.options(*service), channel.WithServiceConfig(cfg))...)
	if err != nil {
		return fs.usageError("%v", err)
	}
	defer ch.Close()
	if err := src.addPeers(ch, *service); err != nil {
		return fs.usageError("%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	start := time.Now()
	res, err := ch.Call(ctx, *service, *method, req)
	elapsed := time.Since(start)
	if err != nil {
		fs.failure("%v", err) // the error names the code
		var ce *channel.CallError
		if errors.As(err, &ce) && *verbose {
			fmt.Fprintf(stderr, "attempts  %d\npeers     %s\ntime      %v\n", ce.Attempts, strings.Join(ce.Peers, " "), elapsed)
		}
		return exitFail
	}
	out := res.Arg3
	if !bytes.HasSuffix(out, []byte("\n")) {
		out = append(out, '\n')
	}
	stdout.Write(out)
	if *verbose {
		fmt.Fprintf(stderr, "peer      %s\nattempts  %d\npeers     %s\n", res.Peer, res.Attempts, strings.Join(res.Peers, " "))
		if len(res.Headers) > 0 {
			h, _ := json.Marshal(res.Headers)
			fmt.Fprintf(stderr, "headers   %s\n", h)
		}
		fmt.Fprintf(stderr, "time      %v\n", elapsed)
	}
	if res.AppError {
		return fs.failure("application error: the handler answered with an error, whose body is on stdout")
	}
	return exitOK
}
