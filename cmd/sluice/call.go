package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/hedge"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/sluice-rpc/sluice/serviceconfig"
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
	configFile := fs.String("config", "", "a JSON service config file (gRPC's shape)")
	retryMax := fs.Int("retry-max", 0, "retry: maxAttempts (>= 2) for this method; 0 means no retry policy from flags")
	retryCodes := fs.String("retry-codes", "BUSY", "retry: retryable codes, comma-separated")
	retryBackoff := fs.Duration("retry-backoff", 10*time.Millisecond, "retry: initial backoff (max is 10x)")
	hedgeMax := fs.Int("hedge-max", 0, "hedge: maxAttempts (>= 2) for this method; 0 means no hedging from flags")
	hedgeDelay := fs.Duration("hedge-delay", 0, "hedge: delay between hedged attempts (0 sends all at once)")
	hedgeCodes := fs.String("hedge-codes", "BUSY", "hedge: non-fatal codes, comma-separated")
	if err := fs.Parse(args); err != nil {
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
	case *configFile != "" && (*retryMax != 0 || *hedgeMax != 0):
		return usageErr("--config cannot be combined with --retry-max or --hedge-max")
	case *retryMax != 0 && *hedgeMax != 0:
		return usageErr("--retry-max and --hedge-max are exclusive: a method has a retry or a hedging policy")
	}

	cfg, err := callConfig(*configFile, *service, *method, *retryMax, *retryCodes, *retryBackoff, *hedgeMax, *hedgeDelay, *hedgeCodes)
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
			code := ce.Code.String()
			if ce.Code == codes.OK {
				code = "LOCAL"
			}
			fmt.Fprintf(stderr, "error: %s: %v\n", code, err)
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

// callConfig builds the service config of a call from a file or the policy
// flags (nil when neither is given).
func callConfig(file, service, method string, retryMax int, retryCodes string, backoff time.Duration,
	hedgeMax int, hedgeDelay time.Duration, hedgeCodes string) (*serviceconfig.Config, error) {
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		return serviceconfig.Parse(data)
	}
	name := []serviceconfig.Name{{Service: service, Method: method}}
	switch {
	case retryMax != 0:
		set, err := parseCodes("--retry-codes", retryCodes)
		if err != nil {
			return nil, err
		}
		p := &retry.Policy{MaxAttempts: retryMax, InitialBackoff: backoff, MaxBackoff: 10 * backoff,
			BackoffMultiplier: 2, RetryableCodes: set}
		return serviceconfig.New([]serviceconfig.MethodConfig{{Names: name, Retry: p}}, nil)
	case hedgeMax != 0:
		set, err := parseCodes("--hedge-codes", hedgeCodes)
		if err != nil {
			return nil, err
		}
		p := &hedge.Policy{MaxAttempts: hedgeMax, HedgingDelay: hedgeDelay, NonFatalCodes: set}
		return serviceconfig.New([]serviceconfig.MethodConfig{{Names: name, Hedge: p}}, nil)
	}
	return nil, nil
}

func parseCodes(flagName, list string) (codes.Set, error) {
	var set codes.Set
	for _, s := range strings.Split(list, ",") {
		c, err := codes.Parse(s)
		if err != nil {
			return 0, fmt.Errorf("%s: %v", flagName, err)
		}
		set |= codes.NewSet(c)
	}
	return set, nil
}
