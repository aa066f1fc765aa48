package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/sluice-rpc/sluice/tools/benchmarks/hostile"
	"github.com/sluice-rpc/sluice/tools/cmd/internal/cli"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

var hostileHelp = cli.Help{
	Synopsis: `sluice-lab hostile [--attacks LIST] [--ci] [--markdown] [--server-bin PATH] [limits]
sluice-lab hostile --target 127.0.0.1:PORT --pid PID [--debug-url URL] [--attacks LIST]`,
	About: `Attacks a Sluice server the way a hostile peer would and measures what each
attack costs it: whether the process survives, which connections it closes
and when, its resident memory and goroutines before, at the peak during and
after the attack, and whether a legitimate client is still served, and how
fast, meanwhile. Each attack gets a fresh server: the 'serve' command (the
'doorman serve' command for the doorman attacks) of --server-bin, by default
this binary, started on 127.0.0.1 with a descriptor limit of 20,000.
With --target and --pid it attacks a server already running (its
goroutines need --debug-url, its --debug-listen); such a server is not
restarted after a crash. Only 127.0.0.1 is ever attacked.

Bulk attackers run in child processes of this binary (2 x 10,000 connections
for the stall attacks: no process may hold 20,000 here). The full size takes
about ten minutes; --ci about a minute. The limit flags are passed to the
servers started, when their 'serve -h' lists them (the table says which were
missing); --ci sets low ones (--max-conns 100 --idle-timeout 1s
--handshake-timeout 1s --stall-timeout 1s --write-timeout 1s --max-clients
1000) so that they show in a few seconds; 0 leaves a limit at the server's
default.

Attacks: %s

The table, one row per figure, goes to stdout; progress to stderr.
` + cli.OutputJSONHelp + ` It holds each attack's figures as
the table prints them and as numbers (memory and goroutines null where
unknown).
Exit status: 0 when every attack was made (whatever it did to the server) or
the run was interrupted, 1 when an attack could not be made, 2 on a usage
error.`,
	Examples: `sluice-lab hostile --ci                                   # every attack, small, against this binary
sluice-lab hostile --attacks checksum,malformed --server-bin /tmp/sluice-before.bin
sluice-lab hostile --attacks stall-handshaken --max-conns 5000 --idle-timeout 30s --markdown
sluice-lab hostile --ci --attacks checksum -o json | jq '.attacks[].server.alive_after'
sluice serve --debug-listen 127.0.0.1:6061 &      # then attack it where it runs:
sluice-lab hostile --target 127.0.0.1:4040 --pid $! --debug-url http://127.0.0.1:6061 --attacks soak`,
}

// hostileRun runs `sluice-lab hostile`, printing the attacks made until
// ctx ends.
func hostileRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newSuite("hostile", hostileHelp, hostile.Attacks(), "attacks", "comma-separated `ATTACKS` to make, or all",
		"the CI size: a few seconds an attack, with low server limits", stdout, stderr)
	serverBin := fs.String("server-bin", "", "the sluice-lab binary `PATH` whose servers (and, for the client attacks, clients) are attacked (default this binary; sluice has no doorman command for the Doorman attacks)")
	target := fs.String("target", "", "attack the TChannel server already running at `127.0.0.1:PORT` instead (needs --pid)")
	pid := fs.Int("pid", 0, "the --target server's process `ID`, for its memory and liveness")
	debugURL := fs.String("debug-url", "", "the --target server's debug listener, `URL` http://HOST:PORT, for its goroutines")
	maxConns := fs.Int("max-conns", 0, "started servers' --max-conns `N`")
	idle := fs.Duration("idle-timeout", 0, "started servers' --idle-timeout")
	handshake := fs.Duration("handshake-timeout", 0, "started servers' --handshake-timeout")
	stall := fs.Duration("stall-timeout", 0, "started servers' --stall-timeout")
	write := fs.Duration("write-timeout", 0, "started servers' --write-timeout")
	unfinished := fs.Int64("max-unfinished", 0, "started servers' --max-unfinished `BYTES`")
	unfinishedPerConn := fs.Int64("max-unfinished-per-conn", 0, "started servers' --max-unfinished-per-conn `BYTES`")
	maxClients := fs.Int("max-clients", 0, "started Doorman servers' --max-clients `N`")
	list, code, ok := parseSuite(fs, args, hostile.ParseAttacks)
	if !ok {
		return code
	}
	cfg := hostile.Config{Attacks: list, ServerBin: *serverBin, Progress: stderr}
	limits := hostile.Limits{}
	if *fs.ci {
		cfg.Size, limits = hostile.CI, hostile.CILimits()
	}
	for _, l := range []struct {
		name string
		bad  bool
		set  func()
	}{
		{"max-conns", *maxConns < 0, func() { limits.MaxConns = *maxConns }},
		{"idle-timeout", *idle < 0, func() { limits.IdleTimeout = *idle }},
		{"handshake-timeout", *handshake < 0, func() { limits.HandshakeTimeout = *handshake }},
		{"stall-timeout", *stall < 0, func() { limits.StallTimeout = *stall }},
		{"write-timeout", *write < 0, func() { limits.WriteTimeout = *write }},
		{"max-unfinished", *unfinished < 0, func() { limits.MaxUnfinished = *unfinished }},
		{"max-unfinished-per-conn", *unfinishedPerConn < 0, func() { limits.MaxUnfinishedPerConn = *unfinishedPerConn }},
		{"max-clients", *maxClients < 0, func() { limits.MaxClients = *maxClients }},
	} {
		if l.bad {
			return fs.UsageError("--%s must be >= 0", l.name)
		}
		if fs.IsSet(l.name) {
			l.set()
		}
	}
	cfg.Limits = &limits
	var err error
	if *target != "" || *pid != 0 {
		if cfg.Target, err = hostile.External(*target, *pid, *debugURL); err != nil {
			return fs.UsageError("--target/--pid: %v", err)
		}
	}
	bin := *serverBin
	if bin == "" {
		bin, _ = os.Executable()
	} else if _, err := os.Stat(bin); err != nil {
		return fs.UsageError("--server-bin: %v", err)
	}
	build := hostile.Build(bin)
	fs.progress("sluice-lab hostile: %d attacks, %s size, server %s (%s), %s/%s", len(list), cfg.Size, bin, build, runtime.GOOS, runtime.GOARCH)
	start := time.Now()
	results, err := cfg.Run(ctx, func(r *hostile.Result) { fs.progress("  %s: %.1fs", r.Attack, r.Elapsed.D().Seconds()) })
	return fs.ReportMade(ctx, len(results), err, fs.asJSON,
		func() any {
			rep := hostileReport{Size: cfg.Size, Elapsed: millis.Duration(time.Since(start)), Interrupted: ctx.Err() != nil}
			if cfg.Target != nil {
				rep.Target, rep.TargetPID = &cfg.Target.Addr, &cfg.Target.PID
			} else {
				rep.ServerBin, rep.Build = &bin, &build
			}
			for _, r := range results {
				rep.Attacks = append(rep.Attacks, newHostileAttack(r))
			}
			return rep
		},
		func(w io.Writer) error {
			if cfg.Target != nil {
				fmt.Fprintf(w, "%s size, external server %s (pid %d), %.0fs\n\n", cfg.Size, cfg.Target.Addr, cfg.Target.PID, time.Since(start).Seconds())
			} else {
				fmt.Fprintf(w, "%s size, server %s (%s), %.0fs\n\n", cfg.Size, bin, build, time.Since(start).Seconds())
			}
			return hostile.WriteTable(w, results, *fs.markdown)
		}, "attacks")
}

// hostileReport is `sluice-lab hostile -o json`'s report. ServerBin and
// Build name the binary attacked, Target and TargetPID an external
// --target: the others are null. Interrupted says the run was cut short.
type hostileReport struct {
	Size        hostile.Size    `json:"size"`
	Elapsed     millis.Duration `json:"elapsed_ms"`
	ServerBin   *string         `json:"server_bin"`
	Build       *string         `json:"build"`
	Target      *string         `json:"target"`
	TargetPID   *int            `json:"target_pid"`
	Attacks     []hostileAttack `json:"attacks"`
	Interrupted bool            `json:"interrupted"`
}

// hostileAttack is one attack's result, with null where the harness could
// not measure.
type hostileAttack struct {
	*hostile.Result
	Server hostileServer `json:"server"`
}

// hostileServer is hostile.ServerFigures with null for what is unknown.
type hostileServer struct {
	Flags            []string `json:"flags"`
	Missing          []string `json:"missing"`
	Crashes          []string `json:"crashes"`
	AliveAfter       bool     `json:"alive_after"`
	RSSBeforeBytes   *int64   `json:"rss_before_bytes"`
	RSSPeakBytes     *int64   `json:"rss_peak_bytes"`
	RSSAfterBytes    *int64   `json:"rss_after_bytes"`
	GoroutinesBefore *int     `json:"goroutines_before"`
	GoroutinesPeak   *int     `json:"goroutines_peak"`
	GoroutinesAfter  *int     `json:"goroutines_after"`
	HeapBeforeBytes  *int64   `json:"heap_before_bytes"`
	HeapAfterBytes   *int64   `json:"heap_after_bytes"`
}

func newHostileAttack(r *hostile.Result) hostileAttack {
	s := r.Server
	bytes := func(v int64) *int64 {
		if v <= 0 {
			return nil
		}
		return &v
	}
	count := func(v int) *int {
		if v < 0 {
			return nil
		}
		return &v
	}
	return hostileAttack{Result: r, Server: hostileServer{Flags: s.Flags, Missing: s.Missing, Crashes: s.Crashes, AliveAfter: s.AliveAfter,
		RSSBeforeBytes: bytes(s.RSSBefore), RSSPeakBytes: bytes(s.RSSPeak), RSSAfterBytes: bytes(s.RSSAfter),
		GoroutinesBefore: count(s.GoroutinesBefore), GoroutinesPeak: count(s.GoroutinesPeak), GoroutinesAfter: count(s.GoroutinesAfter),
		HeapBeforeBytes: bytes(s.HeapBefore), HeapAfterBytes: bytes(s.HeapAfter)}}
}
