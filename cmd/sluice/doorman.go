package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sluice-rpc/sluice/leasing"
	"github.com/sluice-rpc/sluice/leasing/server"
)

var doormanHelp = helpText{
	synopsis: `sluice doorman serve|get|load|flood [flags]`,
	about: `A Doorman-compatible lease server and client, speaking the original's gRPC
protocol (service doorman.Capacity), so either side can be swapped for the
original. serve hands out capacity leases for the resources of a YAML
configuration in the original's format; get asks a server for a lease, once
or (--watch) keeping it and printing every change; load measures a server's
GetCapacity throughput; flood measures how a server bears a flood of new
resource ids.`,
	examples: `sluice doorman serve --config doorman.yaml --listen 127.0.0.1:6000 --debug-listen 127.0.0.1:6001
sluice doorman get --server 127.0.0.1:6000 --resource kv-rps --wants 500 --watch
sluice doorman load --server 127.0.0.1:6000 --clients 10000 --duration 10s
sluice doorman flood --server 127.0.0.1:6000 --ids 1000000 --server-pid 4242`,
}

var doormanServeHelp = helpText{
	synopsis: `sluice doorman serve --config FILE --listen HOST:PORT [--debug-listen ADDR] [limits]`,
	about: `Serves Doorman's gRPC protocol on --listen, handing out capacity leases for the
resources of --config (the original Doorman's YAML format: resource templates
with a capacity and an algorithm, NO_ALGORITHM, STATIC, PROPORTIONAL_SHARE or
FAIR_SHARE). It answers every request, however soon after the last. With
--debug-listen, the same listener serves the server's metrics at /metrics, the
runtime's profiles at /debug/pprof/ and a status page listing the resources,
their clients and their leases at /status. It runs until interrupted.

The limits bound the server's memory whatever clients send: a request that
would hold more resources, distinct clients or leases (client and resource
pairs) than they allow is refused with gRPC code RESOURCE_EXHAUSTED and a
message naming the limit; renewals of existing leases never are.

Exit status: 0 when interrupted, 1 when the configuration cannot be loaded or
the server fails, 2 on a usage error.`,
	examples: `sluice doorman serve --config doorman.yaml --listen 127.0.0.1:6000
sluice doorman serve --config doorman.yaml --listen 127.0.0.1:6000 --debug-listen 127.0.0.1:6001
curl -s http://127.0.0.1:6001/status`,
}

var doormanGetHelp = helpText{
	synopsis: `sluice doorman get --server HOST:PORT --resource ID --wants N [flags]`,
	about: `Asks a Doorman server for a lease of --wants capacity of --resource and prints
what it got (client, resource, wants, capacity and expiry), then releases it on
exit. With --watch it keeps the lease, refreshing it as the server asks, and
prints every change until interrupted.

Exit status: 0 when a lease was printed (or --watch was interrupted), 1 when
the server could not be reached or sent no lease, 2 on a usage error.`,
	examples: `sluice doorman get --server 127.0.0.1:6000 --resource kv-rps --wants 500
sluice doorman get --server 127.0.0.1:6000 --resource kv-rps --wants 500 --client-id web-1 --watch`,
}

// doormanCmd runs `sluice doorman ...`; serve and get --watch run until
// interrupted.
func doormanCmd(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return doormanRun(ctx, args, stdout, stderr)
}

// doormanRun is doormanCmd with the context that ends serve and watch.
func doormanRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	g := group{name: "sluice doorman", help: doormanHelp, subs: []command{
		{"serve", "a Doorman lease server", func(args []string, stdout, stderr io.Writer) int {
			return doormanServe(ctx, args, stdout, stderr)
		}},
		{"get", "ask a Doorman server for a lease, once or --watch", func(args []string, stdout, stderr io.Writer) int {
			return doormanGet(ctx, args, stdout, stderr)
		}},
		{"load", "measure a Doorman server's GetCapacity throughput", func(args []string, stdout, stderr io.Writer) int {
			return doormanLoad(ctx, args, stdout, stderr)
		}},
		{"flood", "flood a Doorman server with new resource ids, timing a side client", func(args []string, stdout, stderr io.Writer) int {
			return doormanFlood(ctx, args, stdout, stderr)
		}},
	}}
	return g.run(args, stdout, stderr)
}

func doormanServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("sluice doorman serve", doormanServeHelp, stdout, stderr)
	config := fs.String("config", "", "the resource configuration, a YAML `FILE` in the original Doorman's format")
	listen := fs.String("listen", "", "`HOST:PORT` to serve gRPC on")
	debugAddr := fs.String("debug-listen", "", debugListenUsage+"; the status page is /status")
	maxResources := fs.Int("max-resources", server.DefaultMaxResources, "the most resources the server keeps, `N` >= 1")
	maxClients := fs.Int("max-clients", server.DefaultMaxClients, "the most distinct clients holding leases, `N` >= 1")
	maxLeases := fs.Int("max-leases", server.DefaultMaxLeases, "the most leases (client and resource pairs), `N` >= 1")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	if *config == "" || *listen == "" {
		return fs.usageError("--config and --listen are required")
	}
	for _, l := range []struct {
		name string
		v    int
	}{{"max-resources", *maxResources}, {"max-clients", *maxClients}, {"max-leases", *maxLeases}} {
		if l.v < 1 {
			return fs.usageError("--%s is %d, must be >= 1", l.name, l.v)
		}
	}
	debug, err := newDebugListener(*debugAddr, stderr)
	if err != nil {
		return fs.usageError("%v", err)
	}
	defer debug.close()
	repo, err := server.LoadRepository(*config)
	if err != nil {
		return fs.failure("%v", err)
	}
	srv, err := server.New(server.Config{Repository: repo, Scope: debug.scope(),
		MaxResources: *maxResources, MaxClients: *maxClients, MaxLeases: *maxLeases})
	if err != nil {
		return fs.failure("%v", err)
	}
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		return fs.failure("%v", err)
	}
	if err := debug.serve("sluice doorman serve", map[string]http.Handler{"/status": srv}, stderr); err != nil {
		lis.Close()
		return fs.failure("%v", err)
	}
	fmt.Fprintf(stdout, "doorman serving %d templates on %s\n", len(repo.Resources), lis.Addr())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	select {
	case <-ctx.Done():
		srv.Stop()
		err = <-done
	case err = <-done:
	}
	if err != nil && ctx.Err() == nil {
		return fs.failure("%v", err)
	}
	return exitOK
}

func doormanGet(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("sluice doorman get", doormanGetHelp, stdout, stderr)
	serverAddr := fs.String("server", "", "`HOST:PORT` of a Doorman server")
	resource := fs.String("resource", "", "the resource's `ID`")
	wants := fs.Float64("wants", -1, "the capacity wanted, `N` >= 0")
	clientID := fs.String("client-id", "", "the client's `ID` (default HOSTNAME:PID)")
	priority := fs.Int64("priority", 0, "the priority sent to the server")
	watch := fs.Bool("watch", false, "keep the lease, refreshing it, and print every change until interrupted")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	if *serverAddr == "" || *resource == "" || *wants < 0 {
		return fs.usageError("--server, --resource and --wants (>= 0) are required")
	}
	client, err := leasing.NewClient(leasing.ClientConfig{Addr: *serverAddr, ID: *clientID, ManualRefresh: !*watch})
	if err != nil {
		return fs.failure("%v", err)
	}
	defer client.Close()
	res, err := client.Resource(*resource, leasing.ResourceConfig{Wants: *wants, Priority: *priority, Mode: leasing.Pessimistic})
	if err != nil {
		return fs.failure("%v", err)
	}
	if !*watch {
		if err := client.Refresh(ctx); err != nil {
			return fs.failure("%v", err)
		}
		capacity, expiry, ok := res.Lease()
		if !ok {
			return fs.failure("the server sent no lease for %q", *resource)
		}
		printLease(stdout, client.ID(), res, capacity, expiry)
		return exitOK
	}
	for {
		changed := res.Changed()
		if capacity, expiry, ok := res.Lease(); ok {
			printLease(stdout, client.ID(), res, capacity, expiry)
		} else {
			fmt.Fprintf(stdout, "client=%s resource=%s wants=%g no lease (capacity %g)\n", client.ID(), res.ID(), res.Wants(), res.Capacity())
		}
		select {
		case <-ctx.Done():
			return exitOK
		case <-changed:
		}
	}
}

func printLease(w io.Writer, client string, res *leasing.Resource, capacity float64, expiry time.Time) {
	fmt.Fprintf(w, "client=%s resource=%s wants=%g capacity=%g expires=%s\n", client, res.ID(), res.Wants(), capacity,
		expiry.UTC().Format(time.RFC3339))
}
