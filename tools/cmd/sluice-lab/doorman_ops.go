package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/uber-go/tally/v4"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/sluice-rpc/sluice/leasing/server"
	"github.com/sluice-rpc/sluice/leasing/server/etcdconfig"
	"github.com/sluice-rpc/sluice/leasing/server/etcdelection"
	"github.com/sluice-rpc/sluice/tlsfiles"
	"github.com/sluice-rpc/sluice/tools/cmd/internal/cli"
	"github.com/sluice-rpc/sluice/tools/internal/grpctls"
)

// serveFlags are `sluice-lab doorman serve`'s flags but --config, --listen
// and --debug-listen: limits, connections (named as `sluice serve`'s, 0:
// the server's default), tree and election, TLS and reloading.
type serveFlags struct {
	cfg                     server.Config // as the flags set it; validate and apply set the rest
	etcd, electionKey       string
	electionTTL, configPoll time.Duration
	tls                     cli.ServerTLSFlags
	parentTLS               *cli.ClientTLSFlags
	tlsFiles                *tlsfiles.Reloader // set by validate, nil without TLS

	// Where loadConfig found the configuration, and its content then.
	file       string // --config FILE
	data       []byte
	etcdClient *clientv3.Client // --config etcd:KEY
	etcdKey    string
	etcdRev    int64
}

func addServeFlags(fs *cli.FlagSet) *serveFlags {
	s := &serveFlags{}
	c := &s.cfg
	fs.IntVar(&c.MaxResources, "max-resources", server.DefaultMaxResources, "the most resources the server keeps, `N` >= 1")
	fs.IntVar(&c.MaxClients, "max-clients", server.DefaultMaxClients, "the most distinct clients holding leases, `N` >= 1")
	fs.IntVar(&c.MaxLeases, "max-leases", server.DefaultMaxLeases, "the most leases (client and resource pairs), `N` >= 1")
	fs.IntVar(&c.MaxConns, "max-conns", 0, "the most connections held, `N` (0: half the descriptor limit, "+strconv.Itoa(server.DefaultMaxConns())+
		" here; at the cap one that never made a call goes first, then the longest idle)")
	fs.DurationVar(&c.MaxConnectionIdle, "idle-timeout", 0, "close a connection with no call for `D`, gracefully (0: "+server.DefaultMaxConnectionIdle.String()+"; pings do not count)")
	fs.DurationVar(&c.ConnectionTimeout, "handshake-timeout", 0, "a new connection's TLS and HTTP/2 handshakes must finish within `D` (0: "+server.DefaultConnectionTimeout.String()+")")
	fs.IntVar(&c.MaxConcurrentStreams, "max-calls-per-conn", 0, "the most calls a connection has in flight, `N` (0: "+strconv.Itoa(server.DefaultMaxConcurrentStreams)+")")
	fs.DurationVar(&c.KeepaliveMinTime, "keepalive-min-time", 0, "cut off a client pinging more often than every `D` (0: "+server.DefaultKeepaliveMinTime.String()+
		"; pings with no call in flight are allowed)")
	fs.StringVar(&c.Parent, "parent", "", "make this server an intermediate: ask the Doorman node at `HOST:PORT` (any of its servers) for capacity")
	fs.StringVar(&c.ID, "server-id", "", "the `ID` this server presents to its --parent (default the advertised address, or --election-key for a node of several servers: all the servers of a node must present the same ID)")
	fs.StringVar(&s.etcd, "etcd", "", "etcd's client `ENDPOINTS`, comma-separated HOST:PORT or URLs, for --election-key and --config etcd:KEY")
	fs.StringVar(&s.electionKey, "election-key", "", "campaign for mastership of the node on etcd `KEY` with the other servers using it; needs --etcd")
	fs.DurationVar(&s.electionTTL, "election-ttl", etcdelection.DefaultTTL,
		"the election session's time to live, whole seconds >= 1s: a master cut off from etcd stops serving within it")
	fs.StringVar(&c.Address, "advertise", "", "the `HOST:PORT` other servers send clients to when this one is master (default --listen)")
	s.tls.Register(fs, "gRPC")
	fs.DurationVar(&s.configPoll, "config-poll", server.DefaultPollInterval,
		"how often --config FILE is read for changes (a changed, valid configuration is applied; an invalid one is logged and refused); an etcd:KEY is watched instead; 0 turns reloading off, from a file or from etcd")
	s.parentTLS = cli.AddClientTLSFlags(fs, "parent-", "the parent", "--parent")
	return s
}

// validate checks the flags as a set and reads the TLS files, before
// anything starts: errors are usage errors naming the flag (and the file)
// that is wrong. A changed TLS file that does not load later is told to
// onReloadError (nil: nobody).
func (s *serveFlags) validate(listen string, onReloadError func(error)) error {
	c := &s.cfg
	for _, a := range []struct{ name, addr string }{{"parent", c.Parent}, {"advertise", c.Address}} {
		if a.addr == "" {
			continue
		}
		if host, port, err := net.SplitHostPort(a.addr); err != nil {
			return fmt.Errorf("--%s %q: want HOST:PORT: %v", a.name, a.addr, err)
		} else if host == "" || port == "" {
			return fmt.Errorf("--%s %q: want HOST:PORT with both", a.name, a.addr)
		}
	}
	if err := s.validateElection(listen); err != nil {
		return err
	}
	if s.configPoll < 0 {
		return fmt.Errorf("--config-poll is %v, must be >= 0 (0 turns reloading off)", s.configPoll)
	}
	var err error
	if s.tlsFiles, err = s.tls.Reloader(onReloadError); err != nil {
		return err
	}
	const orDefault = ">= 0 (0: the default)"
	for _, f := range []struct {
		name string
		v    any
		bad  bool
		want string
	}{
		{"max-conns", c.MaxConns, c.MaxConns < 0, orDefault},
		{"max-calls-per-conn", c.MaxConcurrentStreams, c.MaxConcurrentStreams < 0, orDefault},
		{"max-calls-per-conn", c.MaxConcurrentStreams, int64(c.MaxConcurrentStreams) > math.MaxUint32, fmt.Sprintf("<= %d", uint32(math.MaxUint32))},
		{"idle-timeout", c.MaxConnectionIdle, c.MaxConnectionIdle < 0, orDefault},
		{"handshake-timeout", c.ConnectionTimeout, c.ConnectionTimeout < 0, orDefault},
		{"keepalive-min-time", c.KeepaliveMinTime, c.KeepaliveMinTime < 0, orDefault},
	} {
		if f.bad {
			return fmt.Errorf("--%s is %v, must be %s", f.name, f.v, f.want)
		}
	}
	if c.ParentDialOptions, err = dialOptions(s.parentTLS, onReloadError); err != nil {
		return err
	} else if c.ParentDialOptions != nil && c.Parent == "" {
		return fmt.Errorf("the --parent-tls flags need --parent")
	}
	for _, l := range []struct {
		name string
		v    int
	}{{"max-resources", c.MaxResources}, {"max-clients", c.MaxClients}, {"max-leases", c.MaxLeases}} {
		if l.v < 1 {
			return fmt.Errorf("--%s is %d, must be >= 1", l.name, l.v)
		}
	}
	return nil
}

// validateElection checks --etcd, --election-ttl and --advertise when
// there is an --election-key.
func (s *serveFlags) validateElection(listen string) error {
	if s.electionKey == "" {
		return nil
	}
	if s.etcd == "" {
		return fmt.Errorf("--election-key needs --etcd, the endpoints of the etcd cluster to campaign on")
	}
	for i, ep := range strings.Split(s.etcd, ",") {
		if strings.TrimSpace(ep) == "" {
			return fmt.Errorf("--etcd %q: endpoint %d is empty", s.etcd, i+1)
		}
	}
	if strings.Trim(s.electionKey, "/") == "" {
		return fmt.Errorf("--election-key %q names no key: want a key such as /doorman/root", s.electionKey)
	}
	if s.electionTTL < time.Second || s.electionTTL%time.Second != 0 {
		return fmt.Errorf("--election-ttl is %v, must be a whole number of seconds >= 1s", s.electionTTL)
	}
	if host, _, err := net.SplitHostPort(listen); s.cfg.Address == "" && err == nil {
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			return fmt.Errorf("--listen %q names no host for clients to be sent to: give --advertise HOST:PORT", listen)
		}
	}
	return nil
}

// apply completes cfg for a server listening on listening: the address
// it advertises, its id, its logger (on out) and its election, returned
// (nil without --election-key) to be closed after the server stops.
func (s *serveFlags) apply(listening string, out io.Writer) (*etcdelection.Election, error) {
	cfg := &s.cfg
	if cfg.Address == "" {
		cfg.Address = listening
	}
	if cfg.ID == "" && cfg.Parent != "" && s.electionKey != "" {
		// The servers of one node must show the parent one id: with one
		// id each, the parent would count the old master's lease until it
		// expired and give the new master nothing meanwhile.
		cfg.ID = s.electionKey
	}
	// Info: the parent failing and back, mastership changes, refusals.
	cfg.Logger = cli.LineLogger(out, slog.LevelInfo)
	if s.electionKey == "" {
		return nil, nil
	}
	cfg.Logger = cfg.Logger.With("election", s.electionKey)
	el, err := etcdelection.New(etcdelection.Config{Endpoints: splitEndpoints(s.etcd), Key: s.electionKey, TTL: s.electionTTL})
	if err != nil {
		return nil, err
	}
	cfg.Election = el
	return el, nil
}

// describe is what serve adds to its first line, after apply.
func (s *serveFlags) describe() string {
	var d string
	if s.cfg.Parent != "" {
		d += " (intermediate under " + s.cfg.Parent + ")"
	}
	if s.electionKey != "" {
		d += fmt.Sprintf(" (campaigning on %s as %s, session TTL %v)", s.electionKey, s.cfg.Address, s.electionTTL)
	}
	return d
}

// loadConfig loads --config: a FILE, or etcd:KEY read from the etcd
// cluster at endpoints (comma-separated host:port or URLs), or nothing
// for "". It remembers where the configuration came from, so that start
// can watch it, and the etcd client, for close (also after an error).
func (s *serveFlags) loadConfig(ctx context.Context, config, endpoints string) (*server.Repository, error) {
	if config == "" {
		return nil, nil
	}
	key, inEtcd := strings.CutPrefix(config, "etcd:") // as the original's -config=etcd:KEY
	eps, where := splitEndpoints(endpoints), config
	var err error
	switch {
	case !inEtcd:
		s.file = config
		s.data, err = server.ReadConfig(config)
	case key == "":
		return nil, fmt.Errorf("--config %q names no etcd key: want etcd:KEY", config)
	case len(eps) == 0:
		return nil, fmt.Errorf("--config %s needs the etcd cluster's endpoints (--etcd HOST:PORT,...)", config)
	default:
		if s.etcdClient, err = etcdClient(eps, &cli.EtcdFlags{}); err != nil {
			return nil, err
		}
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		s.etcdKey, where = key, fmt.Sprintf("etcd key %q", key)
		s.data, s.etcdRev, err = etcdconfig.Read(lctx, s.etcdClient, key)
	}
	if err != nil {
		return nil, err
	}
	repo, err := server.ParseRepository(s.data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, where)
	}
	return repo, nil
}

// grpcServerOptions returns the server's TLS credentials, if any, from
// the files validate read.
func (s *serveFlags) grpcServerOptions() ([]grpc.ServerOption, error) {
	if s.tlsFiles == nil {
		return nil, nil
	}
	creds, err := grpctls.ServerCredentials(s.tlsFiles)
	return []grpc.ServerOption{grpc.Creds(creds)}, err
}

// start reloads the configuration into srv while it runs (--config FILE
// every --config-poll, etcd:KEY on every change), logged on stderr and
// counted on scope; stop ends the watcher and waits for it.
func (s *serveFlags) start(srv *server.Server, scope tally.Scope, stderr io.Writer) (stop func()) {
	r := server.NewReloader(srv, server.ReloadConfig{Scope: scope, Logger: cli.LineLogger(stderr, slog.LevelInfo)})
	r.Loaded(s.data)
	watch := func(context.Context) error { return nil }
	switch {
	case s.configPoll == 0:
	case s.etcdClient != nil:
		watch = func(ctx context.Context) error { return etcdconfig.Watch(ctx, s.etcdClient, s.etcdKey, s.etcdRev, r) }
	case s.file != "":
		watch = func(ctx context.Context) error { return server.WatchFile(ctx, s.file, s.configPoll, r) }
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = watch(ctx) // nil when ctx ends; WatchFile's arguments checked by validate
	}()
	return func() {
		cancel()
		<-done
	}
}

// close releases loadConfig's etcd client, after start's watcher has
// stopped.
func (s *serveFlags) close() {
	if s.etcdClient != nil {
		s.etcdClient.Close()
	}
}

// addDoormanClientTLSFlags registers get's, load's and flood's TLS flags
// (the original client's -ca_file).
func addDoormanClientTLSFlags(fs *cli.FlagSet) *cli.ClientTLSFlags {
	return cli.AddClientTLSFlags(fs, "", "the server", "--server")
}

// dialOptions returns the options to dial a Doorman server with, nil
// without TLS flags; a changed file that does not load later is told to
// onReloadError.
func dialOptions(c *cli.ClientTLSFlags, onReloadError func(error)) ([]grpc.DialOption, error) {
	r, serverName, err := c.Reloader(onReloadError)
	if r == nil || err != nil {
		return nil, err
	}
	return []grpc.DialOption{grpc.WithTransportCredentials(grpctls.ClientCredentials(r, serverName))}, nil
}
