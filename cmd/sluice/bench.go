package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-rpc/sluice/benchmarks/load"
	"github.com/sluice-rpc/sluice/channel"
	"github.com/uber/tchannel-go"
)

// benchCmd runs `sluice bench`: an open-loop load of calls at a fixed rate
// through Sluice's pipeline, against --peer servers or --embedded ones, and
// a report of throughput, latency quantiles, attempts per call, busy and
// throttled counts and errors by code. It returns 0 when the run completed
// (whatever the calls' outcomes), 1 when it could not run, 2 on bad usage.
// An interrupt ends the run early and reports the calls made so far.
func benchCmd(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return benchRun(ctx, args, stdout, stderr)
}

// benchEmbeddedMax bounds --embedded.
const benchEmbeddedMax = 16

// benchRun is benchCmd with the context that ends the run early.
func benchRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sluice bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var peers multiFlag
	fs.Var(&peers, "peer", "host:port of a server to load (repeatable; loopback only unless --allow-remote)")
	allowRemote := fs.Bool("allow-remote", false, "allow --peer addresses that are not loopback")
	embedded := fs.Int("embedded", 0, fmt.Sprintf("start this many in-process servers on 127.0.0.1 (1-%d) and load them", benchEmbeddedMax))
	shapeText := fs.String("embedded-latency", "heavy-tail",
		`the embedded servers' latency: "heavy-tail" (97% 0.5-1.5ms, 3% 100-200ms), "heavy-tail:0.05", "fixed:2ms", "1ms-3ms", "1ms,0.03@100ms-200ms"`)
	seed := fs.Uint64("seed", 1, "seed of the embedded servers' latency draws")
	service := fs.String("service", "", `the service to call (default "bench" with --embedded)`)
	method := fs.String("method", "", `the method to call (default "echo" with --embedded)`)
	format := fs.String("format", "raw", "the call format: raw or json")
	body := fs.String("body", "", `each call's body (arg3); default "" for raw, {} for json`)
	rps := fs.Float64("rps", 100, "arrival rate: calls per second, sent on schedule whether or not earlier ones finished")
	duration := fs.Duration("duration", 5*time.Second, fmt.Sprintf("how long calls arrive (at most %v)", load.MaxDuration))
	calls := fs.Int("calls", 0, "stop after this many calls (0: rps x duration)")
	concurrency := fs.Int("concurrency", 100, "the most calls in flight; later arrivals wait, and the wait counts in their latency")
	timeout := fs.Duration("timeout", time.Second, "each call's deadline, across its attempts")
	warmup := fs.Int("warmup", 10, "calls made one at a time first, left out of the report")
	policy := addPolicyFlags(fs, true)
	asJSON := fs.Bool("json", false, "print the report as one JSON object")
	if !parseFlags(fs, args) {
		return 2
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "sluice bench: "+format+"\n", a...)
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case (len(peers) == 0) == (*embedded == 0):
		return usageErr("give --peer (repeatable) or --embedded N, not both")
	case *embedded < 0 || *embedded > benchEmbeddedMax:
		return usageErr("--embedded is %d, must be in [1, %d]", *embedded, benchEmbeddedMax)
	case *embedded == 0 && set["embedded-latency"]:
		return usageErr("--embedded-latency needs --embedded")
	case *embedded == 0 && (*service == "" || *method == ""):
		return usageErr("--service and --method are required with --peer")
	case *format != "raw" && *format != "json":
		return usageErr("--format is %q, must be raw or json", *format)
	case !(*rps > 0 && *rps <= load.MaxRPS):
		return usageErr("--rps is %v, must be in (0, %d]", *rps, load.MaxRPS)
	case *duration <= 0 || *duration > load.MaxDuration:
		return usageErr("--duration is %v, must be in (0, %v]", *duration, load.MaxDuration)
	case *calls < 0 || *calls > load.MaxCalls:
		return usageErr("--calls is %d, must be in [0, %d]", *calls, load.MaxCalls)
	case *concurrency < 1 || *concurrency > load.MaxConcurrency:
		return usageErr("--concurrency is %d, must be in [1, %d]", *concurrency, load.MaxConcurrency)
	case *timeout <= 0 || *timeout > load.MaxTimeout:
		return usageErr("--timeout is %v, must be in (0, %v]", *timeout, load.MaxTimeout)
	case *warmup < 0 || *warmup > load.MaxWarmup:
		return usageErr("--warmup is %d, must be in [0, %d]", *warmup, load.MaxWarmup)
	}
	if err := policy.validate(); err != nil {
		return usageErr("%v", err)
	}
	for _, p := range peers {
		if err := checkPeer(p, *allowRemote); err != nil {
			return usageErr("--peer %s", err)
		}
	}
	if *embedded > 0 {
		if *service == "" {
			*service = "bench"
		}
		if *method == "" {
			*method = "echo"
		}
	}
	shape, err := load.ParseShape(*shapeText)
	if err != nil {
		return usageErr("--embedded-latency: %v", err)
	}
	cfg, err := policy.serviceConfig(*service, *method)
	if err != nil {
		return usageErr("%v", err)
	}
	if *body == "" && *format == "json" {
		*body = "{}"
	}
	if *format == "json" && !json.Valid([]byte(*body)) {
		return usageErr("--body is not valid JSON (--format json)")
	}

	if *embedded > 0 {
		servers, err := load.StartServers(*embedded, load.ServerConfig{Service: *service, Method: *method,
			Format: *format, Shape: shape, Seed: *seed})
		if err != nil {
			fmt.Fprintf(stderr, "sluice bench: %v\n", err)
			return 1
		}
		defer servers.Close()
		peers = servers.HostPorts()
	}
	var opts []channel.Option
	if cfg != nil {
		opts = append(opts, channel.WithServiceConfig(cfg))
	}
	ch, err := channel.New("sluice-bench", opts...)
	if err != nil {
		return usageErr("%v", err)
	}
	defer ch.Close()
	for _, p := range peers {
		if err := ch.AddPeer(*service, p); err != nil {
			return usageErr("--peer %s: %v", p, err)
		}
	}
	lc := load.Config{Service: *service, Method: *method, RPS: *rps, Duration: *duration, Calls: *calls,
		Concurrency: *concurrency, Timeout: *timeout, Warmup: *warmup,
		Request: &channel.Request{Format: tchannel.Format(*format), Arg3: []byte(*body)}}
	rep, err := load.Run(ctx, ch, lc)
	if err != nil {
		fmt.Fprintf(stderr, "sluice bench: %v\n", err)
		return 1
	}
	if *asJSON {
		out := struct {
			*load.Report
			Peers           []string `json:"peers"`
			EmbeddedLatency string   `json:"embedded_latency,omitempty"`
		}{Report: rep, Peers: peers}
		if *embedded > 0 {
			out.EmbeddedLatency = shape.String()
		}
		enc := json.NewEncoder(stdout)
		if err := enc.Encode(out); err != nil {
			fmt.Fprintf(stderr, "sluice bench: %v\n", err)
			return 1
		}
		return 0
	}
	if *embedded > 0 {
		fmt.Fprintf(stdout, "servers     %d embedded on 127.0.0.1, latency %v\n", *embedded, shape)
	} else {
		fmt.Fprintf(stdout, "servers     %s\n", strings.Join(peers, " "))
	}
	rep.Print(stdout)
	return 0
}

// checkPeer accepts host:port on a loopback address, or anywhere with
// allowRemote.
func checkPeer(hostPort string, allowRemote bool) error {
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil || port == "" {
		return fmt.Errorf("%q: want host:port", hostPort)
	}
	if allowRemote {
		return nil
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return nil
	}
	return fmt.Errorf("%q is not a loopback address; pass --allow-remote to load a remote server", hostPort)
}
