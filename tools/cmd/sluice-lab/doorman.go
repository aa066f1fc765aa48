package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/sluice-rpc/sluice/leasing"
	"github.com/sluice-rpc/sluice/leasing/server"
	"github.com/sluice-rpc/sluice/tools/cmd/internal/cli"
)

var doormanHelp = cli.Help{
	Synopsis: `sluice-lab doorman serve|get|load|flood [flags]`,
	About: `A Doorman-compatible lease server and client, speaking the original's gRPC
protocol (service doorman.Capacity) and reading its YAML configuration, so
either side can be swapped for the original (docs/doorman.md).`,
	Examples: `sluice-lab doorman serve --config doorman.yaml --listen 127.0.0.1:6000 --debug-listen 127.0.0.1:6001
sluice-lab doorman get --server 127.0.0.1:6000 --resource kv-rps --wants 500 --watch
sluice-lab doorman load --server 127.0.0.1:6000 --clients 10000 --duration 10s
sluice-lab doorman flood --server 127.0.0.1:6000 --ids 1000000 --server-pid 4242`,
}

var doormanServeHelp = cli.Help{
	Synopsis: `sluice-lab doorman serve --config FILE|etcd:KEY --listen HOST:PORT [--debug-listen ADDR] [--tls-cert FILE --tls-key FILE [--tls-ca FILE]] [--parent HOST:PORT] [--etcd ENDPOINTS --election-key KEY] [limits]`,
	About: `Serves Doorman's gRPC protocol on --listen, handing out capacity leases for the
resources of --config (the original Doorman's YAML format), a FILE read again
every --config-poll or etcd:KEY in the etcd cluster at --etcd, watched: a
changed configuration is applied whole if valid, else refused with a line on
stderr. --debug-listen serves /metrics, /debug/pprof/ and /status (the
resources, their clients and leases). It runs until interrupted.

The limits (--max-resources, --max-clients, --max-leases) bound the server's
memory whatever clients send: a request over one is refused with
RESOURCE_EXHAUSTED, renewals never are. With --parent the server is an
intermediate in a server tree (--config is then optional); with --etcd and
--election-key several servers form one node, one of them master, the
others sending clients to its --advertise address. docs/doorman.md
describes each.

Exit status: 0 when interrupted, 1 when the configuration cannot be loaded or
the server fails, 2 on a usage error.`,
	Examples: `sluice-lab doorman serve --config doorman.yaml --listen 127.0.0.1:6000
sluice-lab doorman serve --config doorman.yaml --listen 127.0.0.1:6000 --debug-listen 127.0.0.1:6001
curl -s http://127.0.0.1:6001/status
# a root node of three servers elected on etcd, and an intermediate under it
sluice-lab doorman serve --config root.yaml --listen 10.0.0.1:6000 --etcd 10.0.0.9:2379 --election-key /doorman/root
sluice-lab doorman serve --config root.yaml --listen 10.0.0.2:6000 --etcd 10.0.0.9:2379 --election-key /doorman/root
sluice-lab doorman serve --config root.yaml --listen 10.0.0.3:6000 --etcd 10.0.0.9:2379 --election-key /doorman/root
sluice-lab doorman serve --listen 10.0.1.1:6000 --parent 10.0.0.1:6000 --server-id region-eu
# TLS, and the configuration kept in etcd
sluice-lab doorman serve --config etcd:/doorman/config --etcd 10.0.0.9:2379 --listen 10.0.0.1:6000 --tls-cert server.pem --tls-key server-key.pem`,
}

var doormanGetHelp = cli.Help{
	Synopsis: `sluice-lab doorman get --server HOST:PORT --resource ID --wants N [-o json] [flags]`,
	About: `Asks a Doorman server for a lease of --wants capacity of --resource and prints
what it got (client, resource, wants, capacity and expiry), then releases it on
exit. With --watch it keeps the lease, refreshing it as the server asks, and
prints every change until interrupted. A lease of capacity 0 for wants above
0 gets a note: the server is likely in learning mode, which the protocol
does not say (docs/doorman.md).

` + cli.OutputJSONHelp + ` With --watch, one object a line, one per
change.

Exit status: 0 when a lease was printed (or --watch was interrupted), 1 when
the server could not be reached or sent no lease, 2 on a usage error.`,
	Examples: `sluice-lab doorman get --server 127.0.0.1:6000 --resource kv-rps --wants 500
sluice-lab doorman get --server 127.0.0.1:6000 --resource kv-rps --wants 500 --client-id web-1 --watch
sluice-lab doorman get --server 127.0.0.1:6000 --resource kv-rps --wants 500 -o json | jq .capacity
sluice-lab doorman get --server doorman.internal:6000 --tls-ca ca.pem --resource kv-rps --wants 500`,
}

// doormanSubs are `sluice-lab doorman`'s subcommands, which run until
// ctx ends (serve and get --watch until then, load and flood at most).
func doormanSubs(ctx context.Context) []cli.Command {
	bind := func(run func(context.Context, []string, io.Writer, io.Writer) int) func([]string, io.Writer, io.Writer) int {
		// stderr is written from several goroutines: reloads, the debug
		// listener, handshakes finding a TLS file changed.
		return func(args []string, stdout, stderr io.Writer) int {
			return run(ctx, args, stdout, cli.Locked(stderr))
		}
	}
	return []cli.Command{
		cli.Leaf("serve", "a Doorman lease server", bind(doormanServe)),
		cli.Leaf("get", "ask a Doorman server for a lease, once or --watch", bind(doormanGet)),
		cli.Leaf("load", "measure a Doorman server's GetCapacity throughput", bind(doormanLoad)),
		cli.Leaf("flood", "flood a Doorman server with new resource ids, timing a side client", bind(doormanFlood)),
	}
}

func doormanServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("sluice-lab doorman serve", doormanServeHelp, stdout, stderr)
	config := fs.String("config", "", "the resource configuration: a YAML `FILE` in the original Doorman's format, or etcd:KEY (a key in the cluster at --etcd holding it)")
	listen := fs.String("listen", "", "`HOST:PORT` to serve gRPC on")
	debugAddr := fs.String("debug-listen", "", cli.DebugListenUsage+"; the status page is /status")
	sf := addServeFlags(fs)
	if code, ok := fs.ParseArgs(args); !ok {
		return code
	}
	if *listen == "" || (*config == "" && sf.cfg.Parent == "") {
		return fs.UsageError("--config and --listen are required (--config may be left out with --parent)")
	}
	if err := sf.validate(*listen, fs.TLSReloadErrors()); err != nil {
		return fs.UsageError("%v", err)
	}
	debug, err := cli.NewDebugListener(*debugAddr, stderr)
	if err != nil {
		return fs.UsageError("%v", err)
	}
	defer debug.Close()
	defer sf.close()
	if err := sf.serve(ctx, *config, *listen, debug, cli.Locked(stdout), stderr); err != nil {
		return fs.Failure("%v", err)
	}
	return cli.ExitOK
}

// serve loads config and serves on listen until ctx ends or the server
// fails. Mastership changes are printed on stdout, from the election.
func (s *serveFlags) serve(ctx context.Context, config, listen string, debug *cli.DebugListener, stdout, stderr io.Writer) error {
	repo, err := s.loadConfig(ctx, config, s.etcd)
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	defer lis.Close() // for a failure below; Stop closes it too
	s.cfg.Repository, s.cfg.Scope = repo, debug.Scope()
	election, err := s.apply(lis.Addr().String(), stdout)
	if err != nil {
		return err
	}
	if election != nil {
		defer election.Close()
	}
	srv, err := server.New(s.cfg)
	if err != nil {
		return err
	}
	opts, err := s.grpcServerOptions()
	if err == nil {
		err = debug.Serve("sluice-lab doorman serve", map[string]http.Handler{"/status": srv})
	}
	if err != nil {
		return err
	}
	defer s.start(srv, debug.Scope(), stderr)()
	templates := 0
	if repo != nil {
		templates = len(repo.Resources)
	}
	fmt.Fprintf(stdout, "doorman serving %d templates on %s%s\n", templates, lis.Addr(), s.describe())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis, opts...) }()
	select {
	case <-ctx.Done():
		srv.Stop()
		<-done
		return nil
	case err = <-done:
		srv.Stop() // the election and the parent link end with it
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
}

func doormanGet(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("sluice-lab doorman get", doormanGetHelp, stdout, stderr)
	serverAddr := fs.String("server", "", "`HOST:PORT` of a Doorman server")
	resource := fs.String("resource", "", "the resource's `ID`")
	wants := fs.Float64("wants", -1, "the capacity wanted, `N` >= 0")
	clientID := fs.String("client-id", "", "the client's `ID` (default HOSTNAME:PID)")
	priority := fs.Int64("priority", 0, "the priority sent to the server")
	watch := fs.Bool("watch", false, "keep the lease, refreshing it, and print every change until interrupted")
	tlsFlags := addDoormanClientTLSFlags(fs)
	asJSON, code, ok := cli.AddOutputFlag(fs, false).Parse(args)
	if !ok {
		return code
	}
	if *serverAddr == "" || *resource == "" || *wants < 0 {
		return fs.UsageError("--server, --resource and --wants (>= 0) are required")
	}
	dialOpts, err := dialOptions(tlsFlags, fs.TLSReloadErrors())
	if err != nil {
		return fs.UsageError("%v", err)
	}
	client, err := leasing.NewClient(leasing.ClientConfig{Addr: *serverAddr, ID: *clientID, ManualRefresh: !*watch, DialOptions: dialOpts})
	if err != nil {
		return fs.Failure("%v", err)
	}
	defer client.Close()
	res, err := client.Resource(*resource, leasing.ResourceConfig{Wants: *wants, Priority: *priority, Mode: leasing.Pessimistic})
	if err == nil && !*watch {
		err = client.Refresh(ctx)
	}
	if err != nil {
		return fs.Failure("%v", err)
	}
	first := true
	for {
		changed := res.Changed()
		rep := doormanLease{Client: client.ID(), Resource: res.ID(), Wants: res.Wants(), Held: res.Capacity()}
		switch capacity, expiry, ok := res.Lease(); {
		case ok:
			// The first lease answers a request with no lease in it, as a
			// new client's; a learning server echoes the later ones.
			rep.setLease(capacity, expiry, first)
			first = false
		case !*watch:
			return fs.Failure("the server sent no lease for %q", *resource)
		}
		code := cli.ExitOK
		if asJSON {
			code = fs.WriteJSON(rep)
		} else {
			rep.print(stdout)
		}
		if code != cli.ExitOK || !*watch {
			return code
		}
		select {
		case <-ctx.Done():
			return cli.ExitOK
		case <-changed:
		}
	}
}

// doormanLease is what `sluice-lab doorman get` prints: a lease, or none.
type doormanLease struct {
	Client   string  `json:"client_id"`
	Resource string  `json:"resource"`
	Wants    float64 `json:"wants"`
	// Capacity and Expires are the lease's, null without one; Held is
	// what the client may use without one (--watch, after its lease
	// ended: 0, pessimistic).
	Capacity *float64   `json:"capacity"`
	Expires  *time.Time `json:"expires"`
	Held     float64    `json:"-"`
	// LearningModeLikely says the lease is what a server in learning mode
	// grants a new client: capacity 0 for wants above 0. LearningModeEndsBy
	// is then the latest end of learning mode with the default duration
	// (the lease length): the lease's expiry. Note says it in words.
	LearningModeLikely bool       `json:"learning_mode_likely"`
	LearningModeEndsBy *time.Time `json:"learning_mode_ends_by"`
	Note               *string    `json:"note"`
}

// setLease records a lease of capacity until expiry; fresh says the
// request it answers carried no lease (has), as a new client's does.
func (l *doormanLease) setLease(capacity float64, expiry time.Time, fresh bool) {
	exp := expiry.UTC()
	l.Capacity, l.Expires = &capacity, &exp
	if capacity == 0 && l.Wants > 0 && fresh {
		// The wire has no learning-mode flag: the note infers it.
		note := fmt.Sprintf("capacity 0 for wants %g: the server is likely in learning mode, which ends by %s (this lease's expiry) at the latest. "+
			"For its learning_mode_duration after it starts or becomes master (by default the lease length), a Doorman server grants a new client nothing "+
			"while the clients it had reclaim their leases; the protocol has no field for it, so this is inferred from the answer. "+
			"Ask again after that, or keep the lease with --watch. (Otherwise the other clients hold all of the capacity.)",
			l.Wants, exp.Format(time.RFC3339))
		l.LearningModeLikely, l.LearningModeEndsBy, l.Note = true, &exp, &note
	}
}

// print writes the lease for people: one line, and the note's line if
// there is one.
func (l doormanLease) print(w io.Writer) {
	if l.Capacity == nil {
		fmt.Fprintf(w, "client=%s resource=%s wants=%g no lease (capacity %g)\n", l.Client, l.Resource, l.Wants, l.Held)
		return
	}
	fmt.Fprintf(w, "client=%s resource=%s wants=%g capacity=%g expires=%s\n", l.Client, l.Resource, l.Wants, *l.Capacity,
		l.Expires.Format(time.RFC3339))
	if l.Note != nil {
		fmt.Fprintf(w, "note: %s\n", *l.Note)
	}
}
