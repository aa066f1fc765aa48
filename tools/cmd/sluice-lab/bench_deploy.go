package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/tools/benchmarks/deploy"
	"github.com/sluice-rpc/sluice/tools/benchmarks/load"
	"github.com/sluice-rpc/sluice/tools/cmd/internal/cli"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

// deployFlags are the flags of `sluice-lab bench --rolling-deploy`.
type deployFlags struct {
	on   bool
	rows string
	cfg  deploy.Config
}

// deployOnly names the flags that only --rolling-deploy reads.
var deployOnly = []string{"rows", "instances", "clients", "replacements", "warmup-time", "steady", "settle",
	"dns-period", "dns-min-interval", "grace", "quiet", "etcd", "embedded-etcd"}

// addDeployFlags defines --rolling-deploy and its flags on bench's flag
// set (cli.Lab.RollingDeploy).
func addDeployFlags(fs *cli.FlagSet) cli.BenchMode {
	d := &deployFlags{cfg: deploy.Defaults()}
	c := &d.cfg
	const with = "with --rolling-deploy: "
	duration := func(p *millis.Duration, name, usage string) {
		fs.DurationVar((*time.Duration)(p), name, p.D(), with+usage)
	}
	fs.BoolVar(&d.on, "rolling-deploy", false, "run the rolling-deploy comparison: a fleet of server processes replaced one by one under load, with etcd, DNS, static Sluice and plain tchannel-go")
	fs.StringVar(&d.rows, "rows", "all", with+"the rows to run, a comma-separated `LIST` of etcd, dns, static, tchannel, or all")
	fs.IntVar(&c.Instances, "instances", c.Instances, with+"the fleet's size, `N` server processes")
	fs.IntVar(&c.Clients, "clients", c.Clients, with+"`N` clients share the load, each with its own resolver and connections")
	fs.IntVar(&c.Replacements, "replacements", 0, with+"`N` instances replaced, each in turn (0: every instance twice)")
	duration(&c.Warmup, "warmup-time", "the load's first stretch, left out of the figures")
	duration(&c.Steady, "steady", "the steady stretch before the first replacement")
	duration(&c.Settle, "settle", "the wait after each replacement")
	duration(&c.DNSPeriod, "dns-period", "how often the dns row's clients look the SRV records up")
	duration(&c.DNSMinInterval, "dns-min-interval", "the least time between two lookups a failing peer asks for")
	duration(&c.Grace, "grace", "the leaving servers' Shutdown grace (0: 2 x --dns-period + 1s)")
	duration(&c.Quiet, "quiet", "the time without requests that ends a Shutdown's grace")
	fs.StringVar(&c.EtcdEndpoint, "etcd", "", with+"the client `URL` of an etcd for the etcd row (default: start the etcd binary, or an embedded etcd)")
	fs.BoolVar(&c.EmbeddedEtcd, "embedded-etcd", false, with+"embed etcd in this process even if the etcd binary is installed")
	return d
}

func (d *deployFlags) On() bool { return d.on }

// OwnFlagGiven names the first flag given that only --rolling-deploy
// reads, "" if none.
func (d *deployFlags) OwnFlagGiven(fs *cli.FlagSet) string {
	if i := slices.IndexFunc(deployOnly, fs.IsSet); i >= 0 {
		return deployOnly[i]
	}
	return ""
}

func (d *deployFlags) Run(ctx context.Context, fs *cli.FlagSet, a cli.BenchArgs, stdout, stderr io.Writer) int {
	allowed := append([]string{"rolling-deploy", "rps", "timeout", "embedded-latency", "output"}, deployOnly...)
	if code, ok := cli.ModeFlags(fs, "--rolling-deploy", "sets its own servers, load and clients", "makes calls with no retry policy", allowed...); !ok {
		return code
	}
	rows, err := deploy.ParseRows(d.rows)
	if err != nil {
		return fs.UsageError("--rows: %v", strings.TrimPrefix(err.Error(), "deploy: "))
	}
	cfg := d.cfg
	cfg.Rows, cfg.Timeout = rows, millis.Duration(a.Timeout)
	if fs.IsSet("rps") {
		if !(a.RPS > 0) {
			return fs.UsageError("--rps is %v: --rolling-deploy offers a rate, > 0 (default 1000)", a.RPS)
		}
		cfg.Rate = a.RPS
	}
	if fs.IsSet("embedded-latency") {
		s, err := load.ParseShape(a.Shape)
		if err != nil {
			return fs.UsageError("--embedded-latency: %v", err)
		}
		if s.FastMin != s.FastMax || s.SlowFraction != 0 {
			return fs.UsageError("--embedded-latency: --rolling-deploy needs a fixed service time, such as fixed:1ms")
		}
		cfg.ServiceTime = millis.Duration(s.FastMin)
	}
	// A zero field of deploy.Config means its default: refuse a zero here
	// rather than replace it in silence.
	for _, z := range []struct {
		name string
		v    millis.Duration
	}{{"warmup-time", cfg.Warmup}, {"steady", cfg.Steady}, {"settle", cfg.Settle}, {"dns-period", cfg.DNSPeriod},
		{"dns-min-interval", cfg.DNSMinInterval}, {"quiet", cfg.Quiet}} {
		if z.v <= 0 {
			return fs.UsageError("--%s is %v, must be > 0", z.name, z.v)
		}
	}
	switch {
	case cfg.Instances < 1 || cfg.Clients < 1:
		return fs.UsageError("--instances and --clients must be >= 1; have %d and %d", cfg.Instances, cfg.Clients)
	case cfg.Replacements < 0 || cfg.Grace < 0:
		return fs.UsageError("--replacements and --grace must be >= 0 (0: the default); have %d and %v", cfg.Replacements, cfg.Grace)
	}
	if err := cfg.Validate(); err != nil {
		return fs.UsageError("%v", strings.TrimPrefix(err.Error(), "deploy: "))
	}
	cfg.Progress = func(s string) { fmt.Fprintf(stderr, "%s\n", s) }
	res, err := deploy.Run(ctx, cfg)
	n := 0
	if res != nil {
		n = len(res.Rows)
	}
	return fs.ReportMade(ctx, n, err, a.JSON, func() any { return res }, res.WriteTable, "rows")
}
