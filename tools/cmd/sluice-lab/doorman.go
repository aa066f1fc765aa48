package main

import (
	"context"
	"fmt"
	"github.com/sluice-rpc/sluice/tools/cmd/internal/cli"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/leasing"
	"github.com/sluice-rpc/sluice/leasing/server"
	"github.com/sluice-rpc/sluice/leasing/server/etcdelection"
)

var doormanHelp = cli.Help{
	Synopsis: `sluice-lab doorman serve|get|load|flood [flags]`,
	About: `A Doorman-compatible lease server and client, speaking the original's gRPC
protocol (service doorman.Capacity), so either side can be swapped for the
original. serve hands out capacity leases for the resources of a YAML
configuration in the original's format; get asks a server for a lease, once
or (--watch) keeping it and printing every change; load measures a server's
GetCapacity throughput; flood measures how a server bears a flood of new
resource ids.`,
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
stderr. --tls-cert and --tls-key serve TLS; --tls-ca also requires client
certificates. --debug-listen serves /metrics, /debug/pprof/ and /status (the
resources, their clients and leases). It runs until interrupted.

The limits (--max-resources, --max-clients, --max-leases) bound the server's
memory whatever clients send: a request over one is refused with
RESOURCE_EXHAUSTED, renewals never are. The connection flags bound
connections as sluice serve's do. With --parent the server is an
intermediate in a server tree, asking the parent node for its clients'
capacity (--config is then optional); with --etcd and --election-key
several servers form one node, one of them master, the others sending
clients to its --advertise address. docs/doorman.md describes each.

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
		// stderr is written from several goroutines: the configuration's
		// reloads, the debug listener, the handshakes that find a TLS
		// file changed.
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

// doormanCommand is `sluice-lab doorman`.
func doormanCommand() cli.Command {
	return cli.NewGroupUntilInterrupted("sluice-lab doorman", doormanHelp, doormanSubs)
}

func doormanServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("sluice-lab doorman serve", doormanServeHelp, stdout, stderr)
	config := fs.String("config", "", "the resource configuration: a YAML `FILE` in the original Doorman's format, or etcd:KEY (a key in the cluster at --etcd holding it)")
	listen := fs.String("listen", "", "`HOST:PORT` to serve gRPC on")
	debugAddr := fs.String("debug-listen", "", cli.DebugListenUsage+"; the status page is /status")
	maxResources := fs.Int("max-resources", server.DefaultMaxResources, "the most resources the server keeps, `N` >= 1")
	maxClients := fs.Int("max-clients", server.DefaultMaxClients, "the most distinct clients holding leases, `N` >= 1")
	maxLeases := fs.Int("max-leases", server.DefaultMaxLeases, "the most leases (client and resource pairs), `N` >= 1")
	conns := addDoormanConnFlags(fs)
	tree := addDoormanTreeFlags(fs)
	parentTLS := cli.AddClientTLSFlags(fs, "parent-", "the parent", "--parent")
	ops := addDoormanOpsFlags(fs)
	if code, ok := fs.ParseArgs(args); !ok {
		return code
	}
	if *listen == "" || (*config == "" && tree.parent == "") {
		return fs.UsageError("--config and --listen are required (--config may be left out with --parent)")
	}
	if err := tree.validate(*listen); err != nil {
		return fs.UsageError("%v", err)
	}
	if err := ops.validate(fs.TLSReloadErrors()); err != nil {
		return fs.UsageError("%v", err)
	}
	if err := conns.validate(); err != nil {
		return fs.UsageError("%v", err)
	}
	parentDial, err := dialOptions(parentTLS, fs.TLSReloadErrors())
	switch {
	case err != nil:
		return fs.UsageError("%v", err)
	case parentDial != nil && tree.parent == "":
		return fs.UsageError("the --parent-tls flags need --parent")
	}
	for _, l := range []struct {
		name string
		v    int
	}{{"max-resources", *maxResources}, {"max-clients", *maxClients}, {"max-leases", *maxLeases}} {
		if l.v < 1 {
			return fs.UsageError("--%s is %d, must be >= 1", l.name, l.v)
		}
	}
	debug, err := cli.NewDebugListener(*debugAddr, stderr)
	if err != nil {
		return fs.UsageError("%v", err)
	}
	defer debug.Close()
	var repo *server.Repository
	if *config != "" {
		if repo, err = ops.loadConfig(ctx, *config, tree.etcd); err != nil {
			return fs.Failure("%v", err)
		}
	}
	defer ops.close()
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		return fs.Failure("%v", err)
	}
	defer lis.Close()           // for a failure below; Stop closes it too
	stdout = cli.Locked(stdout) // mastership changes are printed from the election
	cfg := server.Config{Repository: repo, Scope: debug.Scope(),
		MaxResources: *maxResources, MaxClients: *maxClients, MaxLeases: *maxLeases}
	conns.apply(&cfg)
	cfg.ParentDialOptions = parentDial
	election, err := tree.apply(&cfg, lis.Addr().String(), stdout)
	if err != nil {
		return fs.Failure("%v", err)
	}
	defer election.close()
	srv, err := server.New(cfg)
	if err != nil {
		return fs.Failure("%v", err)
	}
	opts, err := ops.grpcServerOptions(srv, debug.Scope())
	if err != nil {
		return fs.Failure("%v", err)
	}
	if err := debug.Serve("sluice-lab doorman serve", map[string]http.Handler{"/status": srv}, stderr); err != nil {
		return fs.Failure("%v", err)
	}
	stopReloading := ops.start(srv, debug.Scope(), stderr)
	defer stopReloading()
	templates := 0
	if repo != nil {
		templates = len(repo.Resources)
	}
	fmt.Fprintf(stdout, "doorman serving %d templates on %s%s\n", templates, lis.Addr(), tree.describe())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis, opts...) }()
	select {
	case <-ctx.Done():
		srv.Stop()
		err = <-done
	case err = <-done:
		srv.Stop() // the election and the parent link end with it
	}
	if err != nil && ctx.Err() == nil {
		return fs.Failure("%v", err)
	}
	return cli.ExitOK
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
	if err != nil {
		return fs.Failure("%v", err)
	}
	emit := func(rep doormanLease) int {
		if asJSON {
			return fs.WriteJSON(rep)
		}
		rep.print(stdout)
		return cli.ExitOK
	}
	if !*watch {
		if err := client.Refresh(ctx); err != nil {
			return fs.Failure("%v", err)
		}
		capacity, expiry, ok := res.Lease()
		if !ok {
			return fs.Failure("the server sent no lease for %q", *resource)
		}
		return emit(newDoormanLease(client.ID(), res, capacity, expiry, true))
	}
	first := true
	for {
		changed := res.Changed()
		rep := doormanLease{Client: client.ID(), Resource: res.ID(), Wants: res.Wants(), Held: res.Capacity()}
		if capacity, expiry, ok := res.Lease(); ok {
			// The first lease answers a request with no lease in it, as a
			// new client's; a learning server echoes the later ones.
			rep = newDoormanLease(client.ID(), res, capacity, expiry, first)
			first = false
		}
		if code := emit(rep); code != cli.ExitOK {
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

// newDoormanLease returns the report of a lease of capacity until expiry;
// fresh says the request it answers carried no lease (has), as a new
// client's does.
func newDoormanLease(client string, res *leasing.Resource, capacity float64, expiry time.Time, fresh bool) doormanLease {
	exp := expiry.UTC()
	l := doormanLease{Client: client, Resource: res.ID(), Wants: res.Wants(), Capacity: &capacity, Expires: &exp}
	if capacity == 0 && l.Wants > 0 && fresh {
		// The wire has no learning-mode flag (Lease is expiry, refresh
		// interval and capacity; the learning duration travels only to
		// servers lower in a tree). A server in learning mode echoes each
		// client's has and gives a client without one nothing, for the
		// template's learning_mode_duration after it became master: by
		// default the lease length, so it ends by this lease's expiry.
		note := fmt.Sprintf("capacity 0 for wants %g: the server is likely in learning mode, which ends by %s (this lease's expiry) at the latest. "+
			"For its learning_mode_duration after it starts or becomes master (by default the lease length), a Doorman server grants a new client nothing "+
			"while the clients it had reclaim their leases; the protocol has no field for it, so this is inferred from the answer. "+
			"Ask again after that, or keep the lease with --watch. (Otherwise the other clients hold all of the capacity.)",
			l.Wants, exp.Format(time.RFC3339))
		l.LearningModeLikely, l.LearningModeEndsBy, l.Note = true, &exp, &note
	}
	return l
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

// doormanConns is `sluice-lab doorman serve`'s connection flags, named as
// `sluice serve`'s: 0 leaves a setting at the server's default.
type doormanConns struct {
	maxConns, maxCalls          int
	handshake, idle, pingPeriod time.Duration
}

// addDoormanConnFlags registers serve's connection flags on fs.
func addDoormanConnFlags(fs *cli.FlagSet) *doormanConns {
	d := &doormanConns{}
	fs.IntVar(&d.maxConns, "max-conns", 0, "the most connections held, `N` (0: half the descriptor limit, "+strconv.Itoa(server.DefaultMaxConns())+
		" here; at the cap one that never made a call goes first, then the longest idle)")
	fs.DurationVar(&d.idle, "idle-timeout", 0, "close a connection with no call for `D`, gracefully (0: "+server.DefaultMaxConnectionIdle.String()+"; pings do not count)")
	fs.DurationVar(&d.handshake, "handshake-timeout", 0, "a new connection's TLS and HTTP/2 handshakes must finish within `D` (0: "+server.DefaultConnectionTimeout.String()+")")
	fs.IntVar(&d.maxCalls, "max-calls-per-conn", 0, "the most calls a connection has in flight, `N` (0: "+strconv.Itoa(server.DefaultMaxConcurrentStreams)+")")
	fs.DurationVar(&d.pingPeriod, "keepalive-min-time", 0, "cut off a client pinging more often than every `D` (0: "+server.DefaultKeepaliveMinTime.String()+
		"; pings with no call in flight are allowed)")
	return d
}

// validate checks the flags: errors are usage errors naming the flag.
func (d *doormanConns) validate() error {
	for _, f := range []struct {
		name string
		v    int64
	}{{"max-conns", int64(d.maxConns)}, {"max-calls-per-conn", int64(d.maxCalls)}} {
		if f.v < 0 {
			return fmt.Errorf("--%s is %d, must be >= 0 (0: the default)", f.name, f.v)
		}
	}
	if int64(d.maxCalls) > math.MaxUint32 {
		return fmt.Errorf("--max-calls-per-conn is %d, must be <= %d", d.maxCalls, uint32(math.MaxUint32))
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"idle-timeout", d.idle}, {"handshake-timeout", d.handshake}, {"keepalive-min-time", d.pingPeriod}} {
		if f.v < 0 {
			return fmt.Errorf("--%s is %v, must be >= 0 (0: the default)", f.name, f.v)
		}
	}
	return nil
}

// apply sets cfg's connection fields.
func (d *doormanConns) apply(cfg *server.Config) {
	cfg.MaxConns, cfg.MaxConcurrentStreams = d.maxConns, d.maxCalls
	cfg.ConnectionTimeout, cfg.MaxConnectionIdle, cfg.KeepaliveMinTime = d.handshake, d.idle, d.pingPeriod
}

// doormanTree is `sluice-lab doorman serve`'s place in a server tree and its
// node: --parent, --server-id, --etcd, --election-key, --election-ttl and
// --advertise.
type doormanTree struct {
	parent, serverID       string
	etcd, electionKey      string
	electionTTL            time.Duration
	advertise, advertising string
}

// addDoormanTreeFlags registers serve's tree and election flags on fs.
func addDoormanTreeFlags(fs *cli.FlagSet) *doormanTree {
	d := &doormanTree{}
	fs.StringVar(&d.parent, "parent", "", "make this server an intermediate: ask the Doorman node at `HOST:PORT` (any of its servers) for capacity")
	fs.StringVar(&d.serverID, "server-id", "", "the `ID` this server presents to its --parent (default the advertised address, or --election-key for a node of several servers: all the servers of a node must present the same ID)")
	fs.StringVar(&d.etcd, "etcd", "", "etcd's client `ENDPOINTS`, comma-separated HOST:PORT or URLs, for --election-key and --config etcd:KEY")
	fs.StringVar(&d.electionKey, "election-key", "", "campaign for mastership of the node on etcd `KEY` with the other servers using it; needs --etcd")
	fs.DurationVar(&d.electionTTL, "election-ttl", etcdelection.DefaultTTL,
		"the election session's time to live, whole seconds >= 1s: a master cut off from etcd stops serving within it")
	fs.StringVar(&d.advertise, "advertise", "", "the `HOST:PORT` other servers send clients to when this one is master (default --listen)")
	return d
}

// validate checks the flags as a set: errors are usage errors naming the
// flag.
func (d *doormanTree) validate(listen string) error {
	if d.parent != "" {
		if err := hostPort(d.parent); err != nil {
			return fmt.Errorf("--parent %q: %v", d.parent, err)
		}
	}
	if d.advertise != "" {
		if err := hostPort(d.advertise); err != nil {
			return fmt.Errorf("--advertise %q: %v", d.advertise, err)
		}
	}
	if d.electionKey == "" {
		return nil
	}
	if d.etcd == "" {
		return fmt.Errorf("--election-key needs --etcd, the endpoints of the etcd cluster to campaign on")
	}
	for i, ep := range strings.Split(d.etcd, ",") {
		if strings.TrimSpace(ep) == "" {
			return fmt.Errorf("--etcd %q: endpoint %d is empty", d.etcd, i+1)
		}
	}
	if strings.Trim(d.electionKey, "/") == "" {
		return fmt.Errorf("--election-key %q names no key: want a key such as /doorman/root", d.electionKey)
	}
	if d.electionTTL < time.Second || d.electionTTL%time.Second != 0 {
		return fmt.Errorf("--election-ttl is %v, must be a whole number of seconds >= 1s", d.electionTTL)
	}
	if d.advertise == "" {
		if host, _, err := net.SplitHostPort(listen); err == nil {
			if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
				return fmt.Errorf("--listen %q names no host for clients to be sent to: give --advertise HOST:PORT", listen)
			}
		}
	}
	return nil
}

func hostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want HOST:PORT: %v", err)
	}
	if host == "" || port == "" {
		return fmt.Errorf("want HOST:PORT with both")
	}
	return nil
}

// doormanElection is the running election, closed after the server stops.
type doormanElection struct{ el *etcdelection.Election }

func (e doormanElection) close() {
	if e.el != nil {
		e.el.Close()
	}
}

// apply sets cfg's tree and election fields; listening is the address the
// server listens on. Mastership changes, and the parent link failing and
// recovering, are printed on out.
func (d *doormanTree) apply(cfg *server.Config, listening string, out io.Writer) (doormanElection, error) {
	d.advertising = d.advertise
	if d.advertising == "" {
		d.advertising = listening
	}
	cfg.Address = d.advertising
	cfg.Parent, cfg.ID = d.parent, d.serverID
	if cfg.ID == "" && d.parent != "" && d.electionKey != "" {
		// The servers of one node must show the parent one id: with one
		// id each, the parent would count the old master's lease until it
		// expired and give the new master nothing meanwhile.
		cfg.ID = d.electionKey
	}
	// The server's lines at Info and above: the parent failing and
	// answering again, mastership changes, failed elections, refused
	// requests.
	logger := cli.LineLogger(out, slog.LevelInfo)
	cfg.Logger = logger
	if d.electionKey == "" {
		return doormanElection{}, nil
	}
	cfg.Logger = logger.With("election", d.electionKey)
	el, err := etcdelection.New(etcdelection.Config{Endpoints: splitEndpoints(d.etcd), Key: d.electionKey, TTL: d.electionTTL})
	if err != nil {
		return doormanElection{}, err
	}
	cfg.Election = el
	return doormanElection{el}, nil
}

// describe is what serve adds to its first line.
func (d *doormanTree) describe() string {
	var s string
	if d.parent != "" {
		s += " (intermediate under " + d.parent + ")"
	}
	if d.electionKey != "" {
		s += fmt.Sprintf(" (campaigning on %s as %s, session TTL %v)", d.electionKey, d.advertising, d.electionTTL)
	}
	return s
}
