package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sluice-rpc/sluice/channel"
)

var serveHelp = Help{
	Synopsis: `sluice serve [--listen HOST:PORT] [--service NAME] [--tls-cert FILE --tls-key FILE [--tls-ca FILE] [--tls-mode only|mixed]] [--register etcd://HOST:PORT/PREFIX] [--debug-listen ADDR] [limits flags]`,
	About: `A Sluice TChannel server to try call and bench on (and to test a client's
error handling against): service --service on --listen, with three methods
that take raw and JSON calls alike:

  echo   answers with the request's arg2 (a JSON call's headers) and arg3 (its body)
  fail   answers an application error, {"type":"error","message":"..."}
  busy   answers BUSY, the system error a Sluice client throttles on

It prints "serving SERVICE on HOST:PORT" on stdout once it listens, and runs
until SIGINT or SIGTERM. With --debug-listen it serves its metrics
(server_calls, server_call_latency, server_call_errors, ..., by method and
caller) at /metrics and the runtime's profiles at /debug/pprof/; with
--tchannel-metrics, tchannel-go's inbound_calls_* beside them.

` + serverTLSHelp + `

With --register (sluice-lab's, which links etcd's client) it registers
its address in etcd under PREFIX, under a lease of --register-ttl, so that
clients following etcd://.../PREFIX find it. On SIGINT or SIGTERM it leaves
without failing calls (channel.Channel.Shutdown): it deregisters, tells its
Sluice clients it is leaving, serves on while they learn of it (at most
--shutdown-grace, ended early once they have gone and no plain TChannel
request has come for --shutdown-quiet), declines new requests, waits up to
--shutdown-timeout for those in flight, and exits. A second signal exits at
once.

` + targetsHelp + `

` + peerLimitsHelp + `

Exit status: 0 when interrupted, 1 when it cannot listen, 2 on a usage error.`,
	Examples: `sluice serve --listen 127.0.0.1:4040
sluice call -p 127.0.0.1:4040 -s echo -m echo -r '{"a":1}'    # {"a":1}, exit 0
sluice call -p 127.0.0.1:4040 -s echo -m fail                 # the error body, exit 1
sluice bench -p 127.0.0.1:4040 -s echo -m echo --rps 1000 -d 10s
sluice serve --listen 127.0.0.1:4040 --tls-cert s.pem --tls-key s-key.pem --tls-ca ca.pem --tls-mode mixed   # mutual TLS, plaintext still served
sluice serve --listen 127.0.0.1:4040 --max-conns 10000 --idle-timeout 1m   # tighter limits on peers
sluice-lab serve --listen 127.0.0.1:0 --register etcd://127.0.0.1:2379/services/echo   # a fleet member
sluice-lab bench -P etcd://127.0.0.1:2379/services/echo -s echo -m echo --rps 500 -d 1m  # follows the fleet`,
}

// serveFailBody is the application error the fail method answers.
const serveFailBody = `{"type":"error","message":"sluice serve: fail always fails"}`

// ServeContext runs `serve` (args without the command's name) until ctx
// ends, with lab's etcd for --register.
func ServeContext(ctx context.Context, args []string, lab *Lab, stdout, stderr io.Writer) int {
	fs := NewFlagSet("sluice serve", serveHelp, stdout, stderr)
	listen := fs.String("listen", "127.0.0.1:0", "`HOST:PORT` to serve TChannel on (port 0: a free port)")
	service := fs.String("service", "echo", "the `SERVICE` name the server answers to")
	fs.alias("s", "service")
	debugAddr := fs.String("debug-listen", "", DebugListenUsage)
	tchMetrics := fs.Bool("tchannel-metrics", false, "with --debug-listen, also report tchannel-go's metric names (inbound.calls.recvd, ...; channel.WithTChannelMetrics)")
	register := fs.String("register", "", "register the server's address in etcd under PREFIX: an etcd://HOST:PORT[,HOST:PORT...]/PREFIX `TARGET`")
	registerTTL := fs.Duration("register-ttl", DefaultRegisterTTL, "the time to live of the registration's etcd lease, whole seconds: how long etcd keeps the address of a server that died")
	etcdFlags := addEtcdFlags(fs, lab)
	grace := fs.Duration("shutdown-grace", channel.DefaultShutdownGrace, "on SIGINT/SIGTERM, serve on at most this long after deregistering, while clients learn of it (negative: not at all)")
	quiet := fs.Duration("shutdown-quiet", channel.DefaultShutdownQuiet, "end the grace once no plain TChannel client's request has come for this long (Sluice clients are told, and need no quiet)")
	shutdownTimeout := fs.Duration("shutdown-timeout", 30*time.Second, "the longest a shutdown takes, grace and requests in flight included")
	limits := peerLimitFlags(fs)
	var tlsFlags ServerTLSFlags
	tlsFlags.Register(fs, "TChannel")
	tlsMode := fs.String("tls-mode", "only", "with --tls-cert: `MODE` only (refuse plaintext clients) or mixed (serve TLS and plaintext on the one port, for a rollout)")
	if code, ok := fs.ParseArgs(args); !ok {
		return code
	}
	switch {
	case *service == "":
		return fs.UsageError("-s/--service is empty")
	case *quiet < 0:
		return fs.UsageError("--shutdown-quiet is %v, must be >= 0", *quiet)
	case *shutdownTimeout <= 0:
		return fs.UsageError("--shutdown-timeout is %v, must be > 0", *shutdownTimeout)
	case *register == "" && fs.IsSet("register-ttl"):
		return fs.UsageError("--register-ttl needs --register")
	case *tchMetrics && *debugAddr == "":
		return fs.UsageError("--tchannel-metrics needs --debug-listen, where the metrics are served")
	}
	logger := configWarnings(stderr)
	opts := []channel.Option{channel.WithShutdown(channel.ShutdownConfig{Grace: max(*grace, 0), NoGrace: *grace < 0, Quiet: *quiet})}
	tlsOpts, err := serveTLS(&tlsFlags, *tlsMode, fs.IsSet("tls-mode"), logger)
	if err != nil {
		return fs.UsageError("%v", err)
	}
	opts = append(opts, tlsOpts...)
	if *tchMetrics {
		opts = append(opts, channel.WithTChannelMetrics())
	}
	if *register != "" {
		if etcdFlags.etcd == nil {
			return fs.UsageError("--register: %v", etcdFlags.errNoEtcd())
		}
		reg, closeReg, err := etcdFlags.etcd.Registrar(*register, *registerTTL, etcdFlags)
		if err != nil {
			return fs.UsageError("--register: %v", err)
		}
		defer closeReg()
		opts = append(opts, channel.WithRegistrar(reg))
	}
	debug, err := NewDebugListener(*debugAddr, stderr)
	if err != nil {
		return fs.UsageError("%v", err)
	}
	defer debug.Close()
	ch, err := channel.New(*service, append(opts, channel.WithScope(debug.Scope()), channel.WithPeerLimits(*limits),
		channel.WithLogger(logger))...)
	if err != nil {
		return fs.UsageError("%v", err)
	}
	defer ch.Close()
	// Raw handlers take JSON calls too: echoing arg2 and arg3 answers a
	// JSON call with its own headers and body.
	for m, h := range map[string]channel.RawHandler{
		"echo": func(_ context.Context, req *channel.RawRequest) (*channel.RawResponse, error) {
			return &channel.RawResponse{Arg2: req.Arg2, Arg3: req.Arg3}, nil
		},
		"fail": func(_ context.Context, req *channel.RawRequest) (*channel.RawResponse, error) {
			return &channel.RawResponse{AppError: true, Arg2: req.Arg2, Arg3: []byte(serveFailBody)}, nil
		},
		"busy": func(context.Context, *channel.RawRequest) (*channel.RawResponse, error) {
			return nil, channel.Busy("sluice serve: busy always answers BUSY")
		},
	} {
		if err := ch.RegisterRaw(m, h); err != nil {
			return fs.Failure("%v", err)
		}
	}
	if err := ch.ListenAndServe(*listen); err != nil {
		return fs.Failure("%v", err)
	}
	if err := debug.Serve("sluice serve", nil); err != nil {
		return fs.Failure("%v", err)
	}
	fmt.Fprintf(stdout, "serving %s on %s\n", *service, ch.HostPort())
	<-ctx.Done()
	// A second signal exits at once: signals go back to their default
	// action while the shutdown runs.
	signal.Reset(os.Interrupt, syscall.SIGTERM)
	fmt.Fprintf(stderr, "sluice serve: shutting down (deregister, grace up to %v, drain; at most %v)\n", *grace, *shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), *shutdownTimeout)
	defer cancel()
	if err := ch.Shutdown(sctx); err != nil {
		fmt.Fprintf(stderr, "sluice serve: %v\n", err)
	}
	return ExitOK
}

// serveTLS returns the Channel options of serve's TLS flags, none for
// plaintext; its errors are usage errors. A changed file that does not
// load is logged through logger.
func serveTLS(f *ServerTLSFlags, mode string, modeSet bool, logger *slog.Logger) ([]channel.Option, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	m, ok := map[string]channel.TLSMode{"only": channel.TLSOnly, "mixed": channel.TLSMixed}[mode]
	if !ok {
		return nil, fmt.Errorf("--tls-mode is %q, must be only or mixed", mode)
	}
	if !f.enabled() {
		if modeSet {
			return nil, errors.New("--tls-mode says what a TLS port does with plaintext clients: give --tls-cert and --tls-key too")
		}
		return nil, nil
	}
	r, err := f.Reloader(func(err error) {
		logger.Warn("sluice: a changed TLS file did not load", "error", err)
	})
	if err != nil {
		return nil, err
	}
	cfg, err := r.ServerConfig()
	if err != nil {
		return nil, err
	}
	return []channel.Option{channel.WithServerTLS(channel.ServerTLS{Config: cfg, Mode: m})}, nil
}
