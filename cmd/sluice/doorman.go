package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sluice-rpc/sluice/leasing"
)

const doormanUsage = `usage:
  sluice doorman serve --config FILE --listen HOST:PORT [--status HOST:PORT]
  sluice doorman get --server HOST:PORT --resource R --wants N [--client-id ID] [--priority P] [--watch]
`

// doormanCmd runs `sluice doorman ...` with args (after "doorman") and
// returns the exit code: 0 on success, 1 on failure, 2 on bad usage. It
// runs until interrupted for serve and get --watch.
func doormanCmd(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return doormanRun(ctx, args, stdout, stderr)
}

// doormanRun is doormanCmd with the context that ends serve and watch.
func doormanRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, doormanUsage)
		return 2
	}
	switch args[0] {
	case "serve":
		return doormanServe(ctx, args[1:], stdout, stderr)
	case "get":
		return doormanGet(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, doormanUsage)
		return 0
	}
	fmt.Fprintf(stderr, "sluice doorman: unknown command %q\n%s", args[0], doormanUsage)
	return 2
}

func doormanFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("sluice doorman "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

func doormanServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := doormanFlags("serve", stderr)
	config := fs.String("config", "", "YAML resource configuration (the original Doorman's format)")
	listen := fs.String("listen", "", "HOST:PORT to serve gRPC on")
	statusAddr := fs.String("status", "", "HOST:PORT to serve the status page on (optional)")
	if !parseFlags(fs, args) {
		return 2
	}
	if *config == "" || *listen == "" {
		fmt.Fprintf(stderr, "sluice doorman serve: --config and --listen are required\n%s", doormanUsage)
		return 2
	}
	cfg, err := leasing.LoadConfig(*config)
	if err != nil {
		fmt.Fprintf(stderr, "sluice doorman serve: %v\n", err)
		return 1
	}
	server, err := leasing.NewServer(leasing.ServerConfig{Config: cfg})
	if err != nil {
		fmt.Fprintf(stderr, "sluice doorman serve: %v\n", err)
		return 1
	}
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "sluice doorman serve: %v\n", err)
		return 1
	}
	var status *http.Server
	if *statusAddr != "" {
		slis, err := net.Listen("tcp", *statusAddr)
		if err != nil {
			lis.Close()
			fmt.Fprintf(stderr, "sluice doorman serve: status page: %v\n", err)
			return 1
		}
		status = &http.Server{Handler: server, ReadHeaderTimeout: 10 * time.Second}
		go status.Serve(slis)
		fmt.Fprintf(stdout, "status page on http://%s/\n", slis.Addr())
	}
	fmt.Fprintf(stdout, "doorman serving %d templates on %s\n", len(cfg.Resources), lis.Addr())
	done := make(chan error, 1)
	go func() { done <- server.Serve(lis) }()
	select {
	case <-ctx.Done():
		server.Stop()
		err = <-done
	case err = <-done:
	}
	if status != nil {
		status.Close()
	}
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(stderr, "sluice doorman serve: %v\n", err)
		return 1
	}
	return 0
}

func doormanGet(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := doormanFlags("get", stderr)
	server := fs.String("server", "", "HOST:PORT of a Doorman server")
	resource := fs.String("resource", "", "resource identifier")
	wants := fs.Float64("wants", -1, "capacity wanted")
	clientID := fs.String("client-id", "", "client identifier (default HOSTNAME:PID)")
	priority := fs.Int64("priority", 0, "priority sent to the server")
	watch := fs.Bool("watch", false, "keep the lease, refreshing it, and print every change until interrupted")
	if !parseFlags(fs, args) {
		return 2
	}
	if *server == "" || *resource == "" || *wants < 0 {
		fmt.Fprintf(stderr, "sluice doorman get: --server, --resource and --wants (>= 0) are required\n%s", doormanUsage)
		return 2
	}
	client, err := leasing.NewClient(leasing.ClientConfig{Addr: *server, ID: *clientID, ManualRefresh: !*watch})
	if err != nil {
		fmt.Fprintf(stderr, "sluice doorman get: %v\n", err)
		return 1
	}
	defer client.Close()
	res, err := client.Resource(*resource, leasing.ResourceConfig{Wants: *wants, Priority: *priority, Mode: leasing.Pessimistic})
	if err != nil {
		fmt.Fprintf(stderr, "sluice doorman get: %v\n", err)
		return 1
	}
	if !*watch {
		if err := client.Refresh(ctx); err != nil {
			fmt.Fprintf(stderr, "sluice doorman get: %v\n", err)
			return 1
		}
		capacity, expiry, ok := res.Lease()
		if !ok {
			fmt.Fprintf(stderr, "sluice doorman get: the server sent no lease for %q (asked too recently?)\n", *resource)
			return 1
		}
		printLease(stdout, client.ID(), res, capacity, expiry)
		return 0
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
			return 0
		case <-changed:
		}
	}
}

func printLease(w io.Writer, client string, res *leasing.Resource, capacity float64, expiry time.Time) {
	fmt.Fprintf(w, "client=%s resource=%s wants=%g capacity=%g expires=%s\n", client, res.ID(), res.Wants(), capacity,
		expiry.UTC().Format(time.RFC3339))
}
