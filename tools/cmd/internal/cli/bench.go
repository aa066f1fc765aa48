package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/busy"
	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/shed"
	"github.com/sluice-rpc/sluice/tools/benchmarks/closedloop"
	"github.com/sluice-rpc/sluice/tools/benchmarks/load"
)

var benchHelp = Help{
	Synopsis: `sluice bench -p HOST:PORT -s SERVICE -m METHOD [-r BODY] [-n N] [-d D] [--rps R] [flags]
sluice bench -p HOST:PORT -t FILE.thrift [flags] SERVICE Service::method [-r BODY] [-n N]
sluice bench -p HOST:PORT [--tls | --tls-ca FILE] [--tls-cert FILE --tls-key FILE] [--tls-server-name NAME] [--tls-fallback] ...
sluice bench --embedded N [--embedded-workers N] [--embedded-shed MODE] [flags]
sluice bench --closed-loop [--embedded-workers N] [--embedded-latency fixed:D] [--load X] [-o json]
sluice bench --closed-loop [--mix CLASS=PERCENT,...] [--callers N [--heavy-factor X]] [--shedding LIST] [--throttling LIST] ...
sluice-lab bench --rolling-deploy [--rows LIST] [--rps R] [--replacements N] [--steady D] [--settle D] [-o json]
sluice bench --balancing SCENARIO[,SCENARIO...] [--ci] [-o json]
sluice-lab bench --closed-loop|--balancing ... --chart FILE
sluice bench --amplification SCENARIO[,SCENARIO...] [--ci] [--rps R] [-d D] [-o json]`,
	About: `Load through Sluice's pipeline, against the peers of -p/-P or against
--embedded servers in this process, in one of two modes:

  unbounded (the default, --rps 0), as yab's benchmark: on each of
    --connections connections --concurrency calls are in flight (default
    1), each started as soon as one returns; latency is from each call's
    start.
  rate (--rps R): calls arrive on schedule, R a second, whether or not
    earlier ones returned (open loop), at most --concurrency in flight in
    all (default 100); latency is from each call's scheduled arrival, so a
    stalled client cannot hide its queueing.

Each call sends what 'sluice call' sends with the same flags (JSON, raw, or
Thrift through -t), encoded once before the run; the TLS flags are call's
too. Each connection is a Sluice Channel of its own, as each of yab's is.
The run stops after -n calls or -d of calls, whichever comes first (neither:
5s); an interrupt ends it early and reports the calls made so far. Each
second a progress line goes to stderr. The report gives throughput and the
latency quantiles of successful, failed and locally refused calls, attempts
per call, busy answers and errors by code. As yab, bench first makes one
call and prints its answer (--no-first-response skips it); --per-peer-stats
adds a row per peer. docs/cli.md maps yab's flags to these.

The other modes run servers and a client of their own in this process, and
print a table of rows (tools/benchmarks/README.md describes each and its
figures): --closed-loop compares server shedding and client busy
throttling on one worker-pool server at --load times its capacity (--mix
and --callers split the load by class and by caller, rows in pairs,
unaware and aware); --balancing SCENARIOS runs each balancing feature with
and without it, then the issue's checks; --amplification SCENARIOS runs a
call chain whose every layer retries, naive and bounded; sluice-lab's
--rolling-deploy replaces a fleet of server processes under load (rows
etcd, dns, static, tchannel). --ci makes --balancing and --amplification a
second or two a run; sluice-lab's --chart draws --closed-loop and
--balancing over time.

` + OutputJSONHelp + ` In every mode the JSON carries
the same figures as the table.

` + clientTLSHelp + `

` + targetsHelp + `

Exit status: 0 when the run completed with at least one successful call, or
was interrupted (--balancing: when the scenarios ran, whatever the checks
say); 1 when it could not run, or when every call failed or was refused; 2
on a usage error.`,
	Examples: `sluice bench --embedded 1 -n 100000                 # as fast as 2 x GOMAXPROCS connections allow
sluice bench -t keyvalue.thrift -p 127.0.0.1:4040 keyvalue KeyValue::Get -r '{"key":"a"}' -n 100000 --concurrency 4
sluice bench -p 127.0.0.1:4040 -s kv -m get -r '{"key":"a"}' -n 2000 --connections 4 --concurrency 8
sluice bench --embedded 4 --rps 400 -d 10s --hedge-max 3 --hedge-adaptive 0.95
sluice bench -p 127.0.0.1:4040 -s kv -m get -r '{"key":"a"}' --rps 200 -d 30s -o json
sluice bench -p 127.0.0.1:4040 -p 127.0.0.1:4041 -p 127.0.0.1:4042 -s kv -m get --per-peer-stats -o json | jq .per_peer
sluice bench -P peers.yaml -s kv -m get --retry-max 3 --debug-listen 127.0.0.1:9090
sluice bench -p 127.0.0.1:4040 --tls-ca ca.pem --tls-cert c.pem --tls-key c-key.pem -s echo -m echo -n 10000   # mutual TLS
sluice bench -P dns:///_tchannel._tcp.kv.default.svc.cluster.local -s kv -m get --rps 500 -d 1m --allow-remote
sluice bench --embedded 1 --embedded-workers 8 --embedded-latency fixed:2ms --embedded-shed adaptive --rps 8000
sluice-lab bench --closed-loop --chart closedloop.png
sluice bench --closed-loop --load 3 --mix critical_plus=20,critical=30,sheddable=50
sluice bench --closed-loop --load 4 --mix critical_plus=10,sheddable=90 --shedding adaptive --throttling on -o json
sluice bench --closed-loop --load 1.5 --callers 10 --heavy-factor 10 --shedding adaptive
sluice-lab bench --rolling-deploy
sluice-lab bench --rolling-deploy --rows dns,static --replacements 4 -o json
sluice-lab bench --balancing all --chart balancing.png    # balancing-scale-out.png, ... one per scenario
sluice bench --balancing shard,erroring --ci -o json`,
}

// Bounds and defaults of `sluice bench`.
const (
	benchEmbeddedMax      = 16              // --embedded
	benchConnectionsMax   = 1000            // --connections
	benchDefaultDuration  = 5 * time.Second // -d without -n
	benchDefaultRateLimit = 100             // --concurrency with --rps: in flight in all
)

// benchDefaultConnections is --connections' default, yab's.
func benchDefaultConnections() int { return 2 * runtime.GOMAXPROCS(0) }

// benchRun runs `sluice bench`; the end of ctx ends the run early.
func benchRun(ctx context.Context, args []string, lab *Lab, stdout, stderr io.Writer) int {
	lab = lab.or()
	fs := NewFlagSet(lab.Name+" bench", benchHelp, stdout, stderr)
	var deployMode BenchMode
	if lab.RollingDeploy != nil {
		deployMode = lab.RollingDeploy(fs)
	} else if hasFlag(args, "rolling-deploy") {
		return fs.UsageError("%s", labOnly("bench --rolling-deploy (it may embed an etcd server)", "bench --rolling-deploy ..."))
	}
	charts := lab.Charts
	if charts == nil && hasFlag(args, "chart") {
		return fs.UsageError("%s", labOnly("bench --chart (charts link gonum's plot)", "bench --closed-loop --chart FILE ..."))
	}
	a := modeArgs{charts: charts}
	peers := addPeerFlags(fs, lab)
	allowRemote := fs.Bool("allow-remote", false, "allow peers that are not on a loopback address")
	fs.IntVar(&a.embedded, "embedded", 0, fmt.Sprintf("start `N` in-process servers on 127.0.0.1 (1-%d) and load them", benchEmbeddedMax))
	fs.StringVar(&a.shape, "embedded-latency", "",
		"the embedded servers' latency `SHAPE`: \"0\" (at once: the run measures the client and the server's stack, the default unbounded), \"heavy-tail\" (97% 0.5-1.5ms, 3% 100-200ms: the default with --rps), \"heavy-tail:0.05\", \"fixed:2ms\", \"1ms-3ms\", \"1ms,0.03@100ms-200ms\"")
	fs.Uint64Var(&a.seed, "seed", 1, "seed of the embedded servers' latency draws (with --balancing, of its keys and failures)")
	fs.IntVar(&a.workers, "embedded-workers", 0, fmt.Sprintf("give each embedded server `N` workers: a request holds one for its latency and waits in a queue when all are busy (0: no limit; at most %d)", load.MaxWorkers))
	shedText := fs.String("embedded-shed", "none", "the embedded servers' load shedding `MODE`: none, adaptive (an adaptive concurrency limit per method), fixed:N (at most N requests in flight)")
	throttling := fs.Bool("busy-throttling", true, "throttle a peer that answers Busy (--busy-throttling=false turns it off, to compare)")
	closedLoop := fs.Bool("closed-loop", false, "run the closed-loop comparison on one embedded worker-pool server: {no, fixed, adaptive shedding} x {busy throttling off, on}, at --load times its capacity")
	fs.Float64Var(&a.load, "load", 2, "with --closed-loop: the offered rate as a multiple of the server's capacity")
	if charts != nil {
		fs.StringVar(&a.chart, "chart", "", "with --closed-loop: draw goodput and p99 over time to `FILE` (.png or .svg); with --balancing, each scenario second by second")
	}
	fs.StringVar(&a.mix, "mix", "", "with --closed-loop: the criticality classes' `SHARES` of the offered calls, CLASS=PERCENT,... (critical_plus, critical, sheddable_plus, sheddable; summing to 100); rows come in pairs, unaware and aware")
	fs.IntVar(&a.callers, "callers", 0, fmt.Sprintf("with --closed-loop: offer the load from `N` callers, caller-1 ... caller-N, each a client of its own (2-%d); rows come in pairs, unaware and aware", closedloop.MaxCallers))
	fs.Float64Var(&a.heavy, "heavy-factor", 1, fmt.Sprintf("with --callers: caller-1 offers `X` times each other caller's rate (1-%d)", closedloop.MaxHeavyFactor))
	fs.StringVar(&a.sheddings, "shedding", "", "with --closed-loop: the server sheddings to run, `LIST` of none, fixed, adaptive (default all)")
	fs.StringVar(&a.throttlings, "throttling", "", "with --closed-loop: the client busy throttlings to run, `LIST` of off, on (default both)")
	fs.IntVar(&a.gogc, "gogc", closedloop.DefaultGCPercent, "with --closed-loop or --balancing: the garbage collector's target `PERCENT` while it runs, as GOGC (-1: keep the process's); the load generator, client and servers share one process and its collector")
	fs.StringVar(&a.balancing, "balancing", "", "run the balancing comparison's `SCENARIOS`, comma-separated: scale-out, heterogeneous, shard, erroring, or all; each with and without its feature")
	fs.BoolVar(&a.ci, "ci", false, "with --balancing or --amplification: the CI size, a second or two a run")
	fs.StringVar(&a.amplification, "amplification", "", "run the amplification comparison's `SCENARIOS`, comma-separated: down, flaky, recovery, deadline, or all; each naive and bounded")
	target := addTargetFlags(fs, "the `SERVICE` to call (default \"bench\" with --embedded)",
		"the `METHOD` to call (default \"echo\" with --embedded)", "each call's request `BODY` (arg3; {} if none with -e json)")
	fs.Float64Var(&a.rps, "rps", 0, fmt.Sprintf("`R` calls per second, sent on schedule whether or not earlier ones returned (open loop; at most %d); 0: unbounded, each call started as soon as one returns (closed loop)", load.MaxRPS))
	fs.DurationVar(&a.duration, "max-duration", 0, fmt.Sprintf("how long calls start, `D` (default %v; with -n alone, until the n calls are made, at most %v)", benchDefaultDuration, load.MaxDuration))
	fs.alias("d", "max-duration")
	calls := fs.Int("max-requests", 0, fmt.Sprintf("stop after `N` calls (0: no limit but -d; at most %d)", load.MaxCalls))
	fs.alias("n", "max-requests")
	connections := fs.Int("connections", 0, fmt.Sprintf("`N` connections, each a Sluice Channel (channel.New) with its own connections to the peers, busy limiters and retry state; calls are spread over them (default 2 x GOMAXPROCS, %d here, as yab's; with --rps, 1; at most %d)", benchDefaultConnections(), benchConnectionsMax))
	concurrency := fs.Int("concurrency", 0, fmt.Sprintf("`C` calls in flight on each connection, as yab's (default 1); with --rps, the most calls in flight in all, over every connection (default %d): an arrival finding them all busy waits, and the wait counts in its latency", benchDefaultRateLimit))
	fs.DurationVar(&a.timeout, "timeout", time.Second, "each call's deadline, across its attempts")
	warmup := fs.Int("warmup", 10, "calls made one at a time on each connection first, left out of the report")
	output := AddOutputFlag(fs, false)
	perPeer := fs.Bool("per-peer-stats", false, "report the calls by peer too: a row for each peer in the table, per_peer in the JSON (as yab's flag); a peer that left during the run keeps its row")
	noFirst := fs.Bool("no-first-response", false, "do not make the first call before the run, whose answer bench prints as yab does (with -o json: first_response)")
	debugAddr := fs.String("debug-listen", "", DebugListenUsage)
	policy := addPolicyFlags(fs.FlagSet, true)
	tlsFlags := addChannelClientTLSFlags(fs)
	words, code, ok := fs.parseWords(args, 2)
	if !ok {
		return code
	}
	asJSON, err := output.Check()
	if err != nil {
		return fs.UsageError("%v", err)
	}
	a.json = asJSON
	deployOn := deployMode != nil && deployMode.On()
	if len(words) > 0 && (deployOn || *closedLoop || fs.IsSet("balancing") || fs.IsSet("amplification")) {
		return fs.UsageError("unexpected argument %q: --closed-loop, --rolling-deploy and --balancing call servers of their own", words[0])
	}
	if deployOn {
		return deployMode.Run(ctx, fs, BenchArgs{RPS: a.rps, Timeout: a.timeout, Shape: a.shape, JSON: asJSON}, stdout, stderr)
	}
	if deployMode != nil {
		if name := deployMode.OwnFlagGiven(fs); name != "" {
			return fs.UsageError("--%s needs --rolling-deploy", name)
		}
	}
	switch {
	case fs.IsSet("amplification"):
		return benchAmplification(ctx, fs, a, stderr)
	case fs.IsSet("balancing") && !*closedLoop:
		return benchBalancing(ctx, fs, a, stdout, stderr)
	case *closedLoop:
		return benchClosedLoop(ctx, fs, a, stderr)
	}
	src, err := peers.source()
	if err != nil {
		return fs.UsageError("%v", err)
	}
	defer src.close()
	unbounded := a.rps == 0
	if !fs.IsSet("connections") {
		*connections = 1 // a rate run's calls share one connection
		if unbounded {
			*connections = benchDefaultConnections()
		}
	}
	if !fs.IsSet("concurrency") {
		*concurrency = benchDefaultRateLimit
		if unbounded {
			*concurrency = 1
		}
	}
	// Without -d a run lasts benchDefaultDuration, but with -n alone,
	// which runs until the calls are made (a.duration stays 0).
	if !fs.IsSet("max-duration") && *calls == 0 {
		a.duration = benchDefaultDuration
	}
	switch {
	case src.empty() == (a.embedded == 0):
		return fs.UsageError("give peers (-p HOST:PORT, repeatable, or -P TARGET) or --embedded N, not both")
	case a.embedded < 0 || a.embedded > benchEmbeddedMax:
		return fs.UsageError("--embedded is %d, must be in [1, %d]", a.embedded, benchEmbeddedMax)
	case a.embedded == 0 && (fs.IsSet("embedded-latency") || fs.IsSet("embedded-workers") || fs.IsSet("embedded-shed")):
		return fs.UsageError("--embedded-latency, --embedded-workers and --embedded-shed need --embedded")
	case a.workers < 0 || a.workers > load.MaxWorkers:
		return fs.UsageError("--embedded-workers is %d, must be in [0, %d]", a.workers, load.MaxWorkers)
	case fs.IsSet("load") || fs.IsSet("chart") || fs.IsSet("gogc"):
		return fs.UsageError("--load, --chart and --gogc need --closed-loop (--chart and --gogc also --balancing)")
	case fs.IsSet("mix") || fs.IsSet("callers") || fs.IsSet("heavy-factor") || fs.IsSet("shedding") || fs.IsSet("throttling"):
		return fs.UsageError("--mix, --callers, --heavy-factor, --shedding and --throttling need --closed-loop")
	case fs.IsSet("ci"):
		return fs.UsageError("--ci needs --balancing")
	case !(a.rps >= 0 && a.rps <= load.MaxRPS):
		return fs.UsageError("--rps is %v, must be in [0, %d] (0: unbounded)", a.rps, load.MaxRPS)
	case fs.IsSet("max-duration") && (a.duration <= 0 || a.duration > load.MaxDuration):
		return fs.UsageError("-d/--max-duration is %v, must be in (0, %v]", a.duration, load.MaxDuration)
	case *calls < 0 || *calls > load.MaxCalls:
		return fs.UsageError("-n/--max-requests is %d, must be in [0, %d]", *calls, load.MaxCalls)
	case *connections < 1 || *connections > benchConnectionsMax:
		return fs.UsageError("--connections is %d, must be in [1, %d]", *connections, benchConnectionsMax)
	case *concurrency < 1 || *concurrency > load.MaxConcurrency:
		return fs.UsageError("--concurrency is %d, must be in [1, %d]", *concurrency, load.MaxConcurrency)
	case unbounded && *connections**concurrency > load.MaxConcurrency:
		return fs.UsageError("--connections %d x --concurrency %d is %d calls in flight, more than %d", *connections, *concurrency,
			*connections**concurrency, load.MaxConcurrency)
	case a.timeout <= 0 || a.timeout > load.MaxTimeout:
		return fs.UsageError("--timeout is %v, must be in (0, %v]", a.timeout, load.MaxTimeout)
	case *warmup < 0 || *warmup > load.MaxWarmup:
		return fs.UsageError("--warmup is %d, must be in [0, %d]", *warmup, load.MaxWarmup)
	}
	if err := policy.validate(); err != nil {
		return fs.UsageError("%v", err)
	}
	if !*allowRemote {
		for _, p := range append(src.hostPorts, src.listed...) {
			if err := checkLoopback(p); err != nil {
				return fs.UsageError("%v", err)
			}
		}
		if src.resolver != nil {
			src.resolver = loopbackOnly{src.resolver}
		}
	}
	if a.embedded > 0 && len(words) == 0 {
		*target.service, *target.method = cmp.Or(*target.service, "bench"), cmp.Or(*target.method, "echo")
	}
	tg, err := target.resolve(words)
	if err != nil {
		return fs.UsageError("%v", err)
	}
	if a.embedded > 0 && tg.encoding == "thrift" {
		return fs.UsageError("--embedded servers answer json and raw calls, not Thrift: give -p or -P peers")
	}
	if a.embedded > 0 && (tlsFlags.enabled() || tlsFlags.serverName != "" || tlsFlags.fallback) {
		return fs.UsageError("--embedded servers speak plaintext: the TLS flags need -p or -P peers")
	}
	// Reload errors and fallbacks go to stderr, beside the progress lines.
	stderr = Locked(stderr)
	tlsOpts, err := tlsFlags.options(func(err error) { fmt.Fprintf(stderr, "sluice bench: %v\n", err) })
	if err != nil {
		return fs.UsageError("%v", err)
	}
	if a.shape == "" && unbounded {
		a.shape = "0"
	} else if a.shape == "" {
		a.shape = "heavy-tail"
	}
	shape, err := load.ParseShape(a.shape)
	if err != nil {
		return fs.UsageError("--embedded-latency: %v", err)
	}
	shedCfg, err := parseShed(*shedText)
	if err != nil {
		return fs.UsageError("--embedded-shed: %v", err)
	}
	cfg, err := policy.serviceConfig(tg.service, tg.method)
	if err != nil {
		return fs.UsageError("%v", err)
	}

	debug, err := NewDebugListener(*debugAddr, stderr)
	if err != nil {
		return fs.UsageError("%v", err)
	}
	defer debug.Close()
	if a.embedded > 0 {
		servers, err := load.StartServers(a.embedded, load.ServerConfig{Service: tg.service, Method: tg.method,
			Format: tg.encoding, Shape: shape, Seed: a.seed, Workers: a.workers, Shed: shedCfg})
		if err != nil {
			return fs.Failure("%v", err)
		}
		defer servers.Close()
		src.hostPorts = servers.HostPorts()
	}
	opts := append([]channel.Option{channel.WithScope(debug.Scope()), channel.WithBusyConfig(busy.Config{Disabled: !*throttling}),
		channel.WithServiceConfig(cfg)}, tlsOpts...)
	clients := make([]*channel.Client, *connections)
	for i := range clients {
		// Warnings and fallbacks are logged once, not once a connection.
		warnings := slog.New(slog.DiscardHandler)
		if i == 0 {
			warnings = configWarnings(stderr)
		}
		cl, closeCh, err := src.client("sluice-bench", tg, append(slices.Clip(opts), channel.WithLogger(warnings))...)
		if err != nil {
			return fs.UsageError("%v", err)
		}
		defer closeCh()
		clients[i] = cl
	}
	if err := debug.Serve("sluice bench", nil); err != nil {
		return fs.Failure("%v", err)
	}
	var first json.RawMessage
	if !*noFirst {
		if first = firstResponse(ctx, clients[0], tg, a.timeout, stderr); first != nil && !asJSON {
			stdout.Write(first)
		}
	}
	lc := load.Config{Method: tg.method, RPS: a.rps, Duration: a.duration, Calls: *calls,
		Concurrency: *concurrency, Timeout: a.timeout, Warmup: *warmup,
		Request: tg.req, CallOptions: tg.opts, PerPeer: *perPeer,
		Progress: func(p load.Progress) {
			fmt.Fprintf(stderr, "%6.1fs  %d calls: %d ok, %d failed, %d refused locally; %.1f calls/s\n",
				p.Elapsed.Seconds(), p.Calls, p.OK, p.Failed, p.Refused, p.Rate)
		}}
	if m := tg.thrift; m != nil {
		lc.Exception = func(res *channel.Response) string { return m.ExceptionType(res.Arg3) }
	}
	rep, err := load.RunClients(ctx, clients, lc)
	if err != nil {
		return fs.Failure("%v", err)
	}
	if asJSON {
		out := benchReport{Report: rep, Peers: src.hostPorts, FirstResponse: bytes.TrimSpace(first)}
		if src.resolver != nil {
			out.PeerList = new(src.String())
		}
		if a.embedded > 0 {
			out.Embedded, out.EmbeddedLatency = &a.embedded, new(shape.String())
		}
		if code := fs.WriteJSON(out); code != ExitOK {
			return code
		}
	} else {
		if a.embedded > 0 {
			fmt.Fprintf(stdout, "servers     %d embedded on 127.0.0.1, latency %v", a.embedded, shape)
			if a.workers > 0 {
				fmt.Fprintf(stdout, ", %d workers each", a.workers)
			}
			fmt.Fprintf(stdout, ", shedding %s\n", *shedText)
		} else {
			fmt.Fprintf(stdout, "servers     %s\n", src)
		}
		rep.Print(stdout)
	}
	if rep.Calls > 0 && rep.OK == 0 && ctx.Err() == nil {
		return fs.Failure("no call succeeded: %s", rep.ErrorList())
	}
	return ExitOK
}

// benchReport is `sluice bench -o json`'s report: the load generator's,
// and where the servers were.
// Each pointer is null without its flag (-P, --embedded); FirstResponse is
// null with --no-first-response or when that call failed.
type benchReport struct {
	*load.Report
	Peers           []string        `json:"peers"` // given or started
	PeerList        *string         `json:"peer_list"`
	Embedded        *int            `json:"embedded"`
	EmbeddedLatency *string         `json:"embedded_latency"`
	FirstResponse   json.RawMessage `json:"first_response"` // as firstResponse
}

// firstResponse makes one call through cl before the run, as yab does,
// and returns its answer as yab prints it (call -o yab's envelope); a
// failure goes to stderr, and it returns nil.
func firstResponse(ctx context.Context, cl *channel.Client, tg *target, timeout time.Duration, stderr io.Writer) json.RawMessage {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := cl.Call(cctx, tg.method, tg.req, tg.opts...)
	if err != nil {
		fmt.Fprintf(stderr, "sluice bench: the first call, before the run: %v\n", err)
		return nil
	}
	out, _, err := tg.answer(res)
	if err == nil {
		out, err = yabEnvelope(tg, out, res)
	}
	if err != nil {
		fmt.Fprintf(stderr, "sluice bench: the first call, before the run: %v (from %s)\n", err, res.Peer)
		return nil
	}
	return out
}

// checkLoopback accepts a host:port on a loopback address only: bench
// should not load a remote service by accident (--allow-remote).
func checkLoopback(hostPort string) error {
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

// hasFlag reports whether args give the flag name (-name, --name,
// --name=V), before a "--".
func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}
