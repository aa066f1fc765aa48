package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/channel"
)

// multiFlag collects a repeatable flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func callCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sluice call", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var peers, headers multiFlag
	fs.Var(&peers, "peer", "host:port of a peer (repeatable)")
	fs.Var(&headers, "header", "application header key=value for JSON calls (repeatable)")
	service := fs.String("service", "", "the TChannel service to call")
	method := fs.String("method", "", "the method (endpoint) to call")
	jsonBody := fs.String("json", "", "a JSON request body (a JSON call)")
	rawBody := fs.String("raw", "", "a raw request body, arg3 (a raw call)")
	timeout := fs.Duration("timeout", time.Second, "the whole call's deadline, across attempts")
	policy := addPolicyFlags(fs, false)
	if !parseFlags(fs, args) {
		return 2
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "sluice call: "+format+"\n", a...)
		return 2
	}
	switch {
	case len(peers) == 0:
		return usageErr("--peer is required (host:port, repeatable)")
	case *service == "" || *method == "":
		return usageErr("--service and --method are required")
	case (*jsonBody == "") == (*rawBody == ""):
		return usageErr("give exactly one of --json or --raw")
	case *timeout <= 0:
		return usageErr("--timeout is %v, must be > 0", *timeout)
	}

	cfg, err := policy.serviceConfig(*service, *method)
	if err != nil {
		return usageErr("%v", err)
	}
	hdrs := map[string]string{}
	for _, h := range headers {
		k, v, ok := strings.Cut(h, "=")
		if !ok || k == "" {
			return usageErr("--header %q: want key=value", h)
		}
		hdrs[k] = v
	}

	ch, err := channel.New("sluice-call", channel.WithServiceConfig(cfg))
	if err != nil {
		return usageErr("%v", err)
	}
	defer ch.Close()
	for _, p := range peers {
		if err := ch.AddPeer(*service, p); err != nil {
			return usageErr("%v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	req := &channel.Request{Format: "raw", Arg3: []byte(*rawBody)}
	if *jsonBody != "" {
		if !json.Valid([]byte(*jsonBody)) {
			return usageErr("--json is not valid JSON")
		}
		req = &channel.Request{Format: "json", Headers: hdrs, Arg3: []byte(*jsonBody)}
	}
	res, err := ch.Call(ctx, *service, *method, req)
	if err != nil {
		var ce *channel.CallError
		if errors.As(err, &ce) {
			fmt.Fprintf(stderr, "error: %s: %v\n", ce.CodeName(), err)
			fmt.Fprintf(stderr, "attempts: %d\npeers: %s\n", ce.Attempts, strings.Join(ce.Peers, " "))
		} else {
			fmt.Fprintf(stderr, "error: %v\n", err)
		}
		return 1
	}
	if res.AppError {
		fmt.Fprintf(stdout, "application error: %s\n", res.Arg3)
	} else {
		fmt.Fprintf(stdout, "%s\n", res.Arg3)
	}
	if len(res.Headers) > 0 {
		h, _ := json.Marshal(res.Headers)
		fmt.Fprintf(stdout, "headers: %s\n", h)
	}
	fmt.Fprintf(stdout, "attempts: %d\npeers: %s\n", res.Attempts, strings.Join(res.Peers, " "))
	if res.AppError {
		return 1
	}
	return 0
}
