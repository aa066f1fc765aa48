package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/uber/tchannel-go"

	"github.com/sluice-rpc/sluice/busy"
	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/shed"
	"github.com/sluice-rpc/sluice/tools/benchmarks/closedloop"
	"github.com/sluice-rpc/sluice/tools/benchmarks/load"
	"github.com/sluice-rpc/sluice/tools/internal/chart"
)

var benchHelp = helpText{
	synopsis: `sluice bench -p HOST:PORT -s SERVICE -m METHOD [-r BODY] [flags]
sluice bench --embedded N [--embedded-workers N] [--embedded-shed MODE] [flags]
sluice bench --closed-loop [--embedded-workers N] [--embedded-latency fixed:D] [--load X] [--chart FILE]
sluice bench --rolling-deploy [--rows LIST] [--rps R] [--replacements N] [--steady D] [--settle D] [-o json]`,
	about: `An open-loop load of calls through Sluice's pipeline: calls arrive at --rps
on schedule whether or not earlier ones finished (at most --concurrency in
flight), for -d/--max-duration or -n/--max-requests calls, against the peers of
-p/-P or against --embedded servers in this process. Each second a progress
line goes to stderr (calls returned, successes, failures, calls refused
locally, the current rate). The report gives latency quantiles of successful
calls, of failed calls and of calls refused locally (THROTTLED, RATE_LIMITED,
NO_PEERS, UNAVAILABLE: nothing sent) separately, and attempts per call, busy
answers, throttled requests and errors by code. Latency is measured from each
call's scheduled arrival, so a stalled client cannot hide its queueing. An
interrupt ends the run early and reports the calls made so far.

Embedded servers can have a pool of workers (--embedded-workers: requests
beyond them queue) and shed load (--embedded-shed). --closed-loop runs the
comparison of server shedding and client busy throttling on one embedded
worker-pool server (default 8 workers, 2 ms each: 4,000 calls/s) offered
--load times its capacity (default 2) with no retries, for -d per
combination (default 10 s), and prints goodput, the shares answered Busy and
refused in the client, p50/p99 and the requests that reached the server.

--rolling-deploy replaces a fleet of server processes (children of this
binary; default 4, echo with a 1 ms service time) one instance at a time
under an open-loop load (default 1,000 calls/s from 2 clients, no retry
policy): --replacements in all (default 8, every instance twice), after a
steady stretch and each followed by --settle. Its rows, one after the
other: etcd (Sluice clients following etcd, servers registering there and
leaving with Shutdown; etcd is --etcd, or the etcd binary, or an embedded
one), dns (Sluice clients following SRV records served in process, looked
up every --dns-period; Shutdown), static (Sluice with a fixed peer list,
servers replaced in place with Close) and tchannel (plain tchannel-go, the
same). It prints, per row, the calls made and failed by code, p50/p99 in
the steady state and during the deploys, and how soon each new instance
got its first call. Takes about two and a half minutes with the defaults.

` + targetsHelp + `

Exit status: 0 when the run completed with at least one successful call, or
was interrupted; 1 when it could not run, or when every call failed or was
refused; 2 on a usage error.`,
	examples: `sluice bench --embedded 4 --rps 400 -d 10s --hedge-max 3 --hedge-adaptive 0.95
sluice bench -p 127.0.0.1:4040 -s kv -m get -r '{"key":"a"}' --rps 200 -d 30s -o json
sluice bench -P peers.yaml -s kv -m get --retry-max 3 --debug-listen 127.0.0.1:9090
sluice bench -P dns:///_tchannel._tcp.kv.default.svc.cluster.local -s kv -m get --rps 500 -d 1m --allow-remote
sluice bench --embedded 1 --embedded-workers 8 --embedded-latency fixed:2ms --embedded-shed adaptive --rps 8000
sluice bench --closed-loop --chart closedloop.png
sluice bench --rolling-deploy
sluice bench --rolling-deploy --rows dns,static --replacements 4 -o json`,
}

// benchEmbeddedMax bounds --embedded.
const benchEmbeddedMax = 16

// benchRun runs `sluice bench`; the end of ctx ends the run early.
func benchRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("sluice bench", benchHelp, stdout, stderr)
	peers := addPeerFlags(fs)
	allowRemote := fs.Bool("allow-remote", false, "allow peers that are not on a loopback address")
	embedded := fs.Int("embedded", 0, fmt.Sprintf("start `N` in-process servers on 127.0.0.1 (1-%d) and load them", benchEmbeddedMax))
	shapeText := fs.String("embedded-latency", "heavy-tail",
		"the embedded servers' latency `SHAPE`: \"heavy-tail\" (97% 0.5-1.5ms, 3% 100-200ms), \"heavy-tail:0.05\", \"fixed:2ms\", \"1ms-3ms\", \"1ms,0.03@100ms-200ms\"")
	seed := fs.Uint64("seed", 1, "seed of the embedded servers' latency draws")
	workers := fs.Int("embedded-workers", 0, fmt.Sprintf("give each embedded server `N` workers: a request holds one for its latency and waits in a queue when all are busy (0: no limit; at most %d)", load.MaxWorkers))
	shedText := fs.String("embedded-shed", "none", "the embedded servers' load shedding `MODE`: none, adaptive (an adaptive concurrency limit per method), fixed:N (at most N requests in flight)")
	throttling := fs.Bool("busy-throttling", true, "throttle a peer that answers Busy (--busy-throttling=false turns it off, to compare)")
	closedLoop := fs.Bool("closed-loop", false, "run the closed-loop comparison on one embedded worker-pool server: {no, fixed, adaptive shedding} x {busy throttling off, on}, at --load times its capacity")
	loadX := fs.Float64("load", 2, "with --closed-loop: the offered rate as a multiple of the server's capacity")
	chartPath := fs.String("chart", "", "with --closed-loop: draw goodput and p99 over time to `FILE` (.png or .svg)")
	gogc := fs.Int("gogc", closedloop.DefaultGCPercent, "with --closed-loop: the garbage collector's target `PERCENT` while it runs, as GOGC (-1: keep the process's); the load generator, client and server share one process and its collector")
	deployFlags := addDeployFlags(fs)
	target := addTargetFlags(fs, "the `SERVICE` to call (default \"bench\" with --embedded)",
		"the `METHOD` to call (default \"echo\" with --embedded)", "each call's request `BODY` (arg3; {} if none with -e json)")
	service, method, encoding, body := target.service, target.method, target.encoding, target.body
	rps := fs.Float64("rps", 100, "arrival rate: calls per second, sent on schedule whether or not earlier ones finished")
	duration := fs.Duration("max-duration", 5*time.Second, fmt.Sprintf("how long calls arrive (at most %v)", load.MaxDuration))
	fs.alias("d", "max-duration")
	calls := fs.Int("max-requests", 0, "stop after `N` calls (0: rps x max-duration)")
	fs.alias("n", "max-requests")
	concurrency := fs.Int("concurrency", 100, "the most calls in flight; later arrivals wait, and the wait counts in their latency")
	timeout := fs.Duration("timeout", time.Second, "each call's deadline, across its attempts")
	warmup := fs.Int("warmup", 10, "calls made one at a time first, left out of the report")
	output := fs.String("output", "text", "the report's `FORMAT`: text, or json (one JSON object)")
	fs.alias("o", "output")
	debugAddr := fs.String("debug-listen", "", debugListenUsage)
	policy := addPolicyFlags(fs.FlagSet, true)
	if code, ok := fs.parse(args); !ok {
		return code
	}
	if deployFlags.on {
		return benchRollingDeploy(ctx, fs, deployFlags, *rps, *timeout, *shapeText, *output, stdout, stderr)
	}
	if deployFlags.anySet(fs) {
		return fs.usageError("--%s needs --rolling-deploy", deployFlags.anySetName(fs))
	}
	if *closedLoop {
		return benchClosedLoop(ctx, fs, closedLoopArgs{embedded: *embedded, workers: *workers, shape: *shapeText,
			load: *loadX, timeout: *timeout, duration: *duration, output: *output, chart: *chartPath, gogc: *gogc}, stdout, stderr)
	}
	src, err := peers.source()
	if err != nil {
		return fs.usageError("%v", err)
	}
	defer src.close()
	switch {
	case src.empty() == (*embedded == 0):
		return fs.usageError("give peers (-p HOST:PORT, repeatable, or -P TARGET) or --embedded N, not both")
	case *embedded < 0 || *embedded > benchEmbeddedMax:
		return fs.usageError("--embedded is %d, must be in [1, %d]", *embedded, benchEmbeddedMax)
	case *embedded == 0 && (fs.set("embedded-latency") || fs.set("embedded-workers") || fs.set("embedded-shed")):
		return fs.usageError("--embedded-latency, --embedded-workers and --embedded-shed need --embedded")
	case *workers < 0 || *workers > load.MaxWorkers:
		return fs.usageError("--embedded-workers is %d, must be in [0, %d]", *workers, load.MaxWorkers)
	case fs.set("load") || fs.set("chart") || fs.set("gogc"):
		return fs.usageError("--load, --chart and --gogc need --closed-loop")
	case *embedded == 0 && (*service == "" || *method == ""):
		return fs.usageError("-s/--service and -m/--method are required with peers")
	case target.checkEncoding() != nil:
		return fs.usageError("%v", target.checkEncoding())
	case *output != "text" && *output != "json":
		return fs.usageError("-o/--output is %q, must be text or json", *output)
	case !(*rps > 0 && *rps <= load.MaxRPS):
		return fs.usageError("--rps is %v, must be in (0, %d]", *rps, load.MaxRPS)
	case *duration <= 0 || *duration > load.MaxDuration:
		return fs.usageError("-d/--max-duration is %v, must be in (0, %v]", *duration, load.MaxDuration)
	case *calls < 0 || *calls > load.MaxCalls:
		return fs.usageError("-n/--max-requests is %d, must be in [0, %d]", *calls, load.MaxCalls)
	case *concurrency < 1 || *concurrency > load.MaxConcurrency:
		return fs.usageError("--concurrency is %d, must be in [1, %d]", *concurrency, load.MaxConcurrency)
	case *timeout <= 0 || *timeout > load.MaxTimeout:
		return fs.usageError("--timeout is %v, must be in (0, %v]", *timeout, load.MaxTimeout)
	case *warmup < 0 || *warmup > load.MaxWarmup:
		return fs.usageError("--warmup is %d, must be in [0, %d]", *warmup, load.MaxWarmup)
	}
	if err := policy.validate(); err != nil {
		return fs.usageError("%v", err)
	}
	for _, p := range append(src.hostPorts, src.listed...) {
		if err := checkLoopback(p, *allowRemote); err != nil {
			return fs.usageError("%v", err)
		}
	}
	if src.resolver != nil && !*allowRemote {
		src.resolver = loopbackOnly{src.resolver}
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
		return fs.usageError("--embedded-latency: %v", err)
	}
	shedCfg, err := parseShed(*shedText)
	if err != nil {
		return fs.usageError("--embedded-shed: %v", err)
	}
	cfg, err := policy.serviceConfig(*service, *method)
	if err != nil {
		return fs.usageError("%v", err)
	}
	if err := target.checkJSONBody(); err != nil {
		return fs.usageError("%v", err)
	}

	debug, err := newDebugListener(*debugAddr, stderr)
	if err != nil {
		return fs.usageError("%v", err)
	}
	defer debug.close()
	if *embedded > 0 {
		servers, err := load.StartServers(*embedded, load.ServerConfig{Service: *service, Method: *method,
			Format: *encoding, Shape: shape, Seed: *seed, Workers: *workers, Shed: shedCfg})
		if err != nil {
			return fs.failure("%v", err)
		}
		defer servers.Close()
		src.hostPorts = servers.HostPorts()
	}
	opts := append(src.options(*service), channel.WithScope(debug.scope()), channel.WithBusyConfig(busy.Config{Disabled: !*throttling}))
	if cfg != nil {
		opts = append(opts, channel.WithServiceConfig(cfg))
	}
	ch, err := channel.New("sluice-bench", opts...)
	if err != nil {
		return fs.usageError("%v", err)
	}
	defer ch.Close()
	if err := src.addPeers(ch, *service); err != nil {
		return fs.usageError("%v", err)
	}
	if err := debug.serve("sluice bench", nil, stderr); err != nil {
		return fs.failure("%v", err)
	}
	lc := load.Config{Service: *service, Method: *method, RPS: *rps, Duration: *duration, Calls: *calls,
		Concurrency: *concurrency, Timeout: *timeout, Warmup: *warmup,
		Request: &channel.Request{Format: tchannel.Format(*encoding), Arg3: []byte(*body)},
		Progress: func(p load.Progress) {
			fmt.Fprintf(stderr, "%6.1fs  %d calls: %d ok, %d failed, %d refused locally; %.1f calls/s\n",
				p.Elapsed.Seconds(), p.Calls, p.OK, p.Failed, p.Refused, p.Rate)
		}}
	rep, err := load.Run(ctx, ch, lc)
	if err != nil {
		return fs.failure("%v", err)
	}
	if *output == "json" {
		out := struct {
			*load.Report
			Peers           []string `json:"peers"`
			PeerList        string   `json:"peer_list,omitempty"`
			EmbeddedLatency string   `json:"embedded_latency,omitempty"`
		}{Report: rep, Peers: src.hostPorts}
		if src.resolver != nil {
			out.PeerList = src.String()
		}
		if *embedded > 0 {
			out.EmbeddedLatency = shape.String()
		}
		if err := json.NewEncoder(stdout).Encode(out); err != nil {
			return fs.failure("%v", err)
		}
	} else {
		if *embedded > 0 {
			fmt.Fprintf(stdout, "servers     %d embedded on 127.0.0.1, latency %v", *embedded, shape)
			if *workers > 0 {
				fmt.Fprintf(stdout, ", %d workers each", *workers)
			}
			fmt.Fprintf(stdout, ", shedding %s\n", *shedText)
		} else {
			fmt.Fprintf(stdout, "servers     %s\n", src)
		}
		rep.Print(stdout)
	}
	if rep.Calls > 0 && rep.OK == 0 && ctx.Err() == nil {
		return fs.failure("no call succeeded: %s", rep.ErrorList())
	}
	return exitOK
}

// checkLoopback accepts a host:port on a loopback address, or anywhere
// with allowRemote: a load generator should not point at a remote service
// by accident.
func checkLoopback(hostPort string, allowRemote bool) error {
	if allowRemote {
		return nil
	}
	host, _, _ := net.SplitHostPort(hostPort)
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return nil
	}
	return fmt.Errorf("peer %q is not a loopback address; pass --allow-remote to load a remote server", hostPort)
}

// parseShed reads --embedded-shed: none (nil), adaptive, or fixed:N.
func parseShed(v string) (*channel.ShedConfig, error) {
	switch {
	case v == "none":
		return nil, nil
	case v == "adaptive":
		return &channel.ShedConfig{Adaptive: &shed.Config{}}, nil
	case strings.HasPrefix(v, "fixed:"):
		n, err := strconv.Atoi(strings.TrimPrefix(v, "fixed:"))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q: the fixed limit must be a whole number >= 1", v)
		}
		return &channel.ShedConfig{MaxInFlight: n}, nil
	}
	return nil, fmt.Errorf("%q: want none, adaptive or fixed:N", v)
}

// closedLoopArgs are the flags --closed-loop reads.
type closedLoopArgs struct {
	embedded, workers int
	shape             string
	load              float64
	timeout, duration time.Duration
	output, chart     string
	gogc              int
}

// benchClosedLoop runs `sluice bench --closed-loop`.
func benchClosedLoop(ctx context.Context, fs *flagSet, a closedLoopArgs, stdout, stderr io.Writer) int {
	for _, name := range []string{"peer", "peer-list", "embedded-shed", "busy-throttling", "rps", "max-requests", "concurrency", "warmup", "service", "method", "encoding", "request", "debug-listen"} {
		if fs.set(name) {
			return fs.usageError("--closed-loop sets its own servers, load and client; drop --%s", name)
		}
	}
	var policy string
	fs.Visit(func(f *flag.Flag) {
		if strings.HasPrefix(f.Name, "retry-") || strings.HasPrefix(f.Name, "hedge-") || f.Name == "service-config" {
			policy = f.Name
		}
	})
	if policy != "" {
		return fs.usageError("--closed-loop makes calls with no retries or hedges; drop --%s", policy)
	}
	if !(a.load > 0 && a.load <= 100) {
		return fs.usageError("--load is %v, must be in (0, 100]", a.load)
	}
	if a.embedded > 1 {
		return fs.usageError("--closed-loop runs one embedded server; --embedded is %d", a.embedded)
	}
	if a.gogc == 0 || a.gogc < -1 {
		return fs.usageError("--gogc is %d, must be a positive percent or -1 (keep the process's)", a.gogc)
	}
	cfg := closedloop.Config{Workers: a.workers, Load: a.load, Timeout: a.timeout, GCPercent: a.gogc}
	if fs.set("max-duration") {
		cfg.Duration = a.duration
	}
	if fs.set("embedded-latency") {
		shape, err := load.ParseShape(a.shape)
		if err != nil {
			return fs.usageError("--embedded-latency: %v", err)
		}
		if shape.FastMin != shape.FastMax || shape.SlowFraction != 0 {
			return fs.usageError("--embedded-latency: --closed-loop needs a fixed service time, such as fixed:2ms")
		}
		cfg.Service = shape.FastMin
	}
	if err := cfg.Validate(); err != nil {
		return fs.usageError("%v", strings.TrimPrefix(err.Error(), "closedloop: "))
	}
	switch {
	case a.output != "text" && a.output != "json":
		return fs.usageError("-o/--output is %q, must be text or json", a.output)
	case a.chart != "" && chart.CheckPath(a.chart) != nil:
		return fs.usageError("--chart: %v", chart.CheckPath(a.chart))
	}
	cfg.Progress = func(s string) { fmt.Fprintf(stderr, "running: %s\n", s) }
	res, err := closedloop.Run(ctx, cfg)
	if err != nil {
		return fs.failure("%v", err)
	}
	if a.output == "json" {
		if err := json.NewEncoder(stdout).Encode(res); err != nil {
			return fs.failure("%v", err)
		}
	} else if err := res.WriteTable(stdout); err != nil {
		return fs.failure("%v", err)
	}
	if a.chart != "" {
		if err := res.WriteChart(a.chart); err != nil {
			return fs.failure("chart: %v", err)
		}
		if a.output != "json" {
			fmt.Fprintf(stdout, "\nchart: %s\n", a.chart)
		}
	}
	return exitOK
}
