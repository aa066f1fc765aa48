package main

import (
	"context"
	"fmt"
	"github.com/sluice-rpc/sluice/tools/cmd/internal/cli"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/uber-go/tally/v4"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/sluice-rpc/sluice/leasing/server"
	"github.com/sluice-rpc/sluice/leasing/server/etcdconfig"
	"github.com/sluice-rpc/sluice/tlsfiles"
	"github.com/sluice-rpc/sluice/tools/internal/grpctls"
)

// etcdConfigPrefix marks a --config kept in etcd: --config etcd:KEY, as
// the original's -config=etcd:KEY.
const etcdConfigPrefix = "etcd:"

// doormanOps is `sluice-lab doorman serve`'s operations: TLS on the gRPC
// listener, the metrics interceptor, and the configuration reloaded from
// its file or etcd key while the server runs.
type doormanOps struct {
	tls        cli.ServerTLSFlags
	configPoll time.Duration

	// Set by validate: --tls-cert's files, nil without TLS.
	tlsFiles *tlsfiles.Reloader

	// Set by loadConfig.
	file    string           // --config FILE
	data    []byte           // the configuration's content at start
	etcd    *clientv3.Client // --config etcd:KEY
	etcdKey string
	etcdRev int64
}

// addDoormanOpsFlags registers serve's TLS and reloading flags on fs.
func addDoormanOpsFlags(fs *cli.FlagSet) *doormanOps {
	o := &doormanOps{}
	o.tls.Register(fs, "gRPC")
	fs.DurationVar(&o.configPoll, "config-poll", server.DefaultPollInterval,
		"how often --config FILE is read for changes (a changed, valid configuration is applied; an invalid one is logged and refused); an etcd:KEY is watched instead; 0 turns reloading off, from a file or from etcd")
	return o
}

// validate checks the flags as a set and reads the TLS files, before
// anything starts: errors are usage errors, naming the flag (and the file)
// that is wrong. A changed TLS file that does not load later is told to
// onReloadError (nil: nobody).
func (o *doormanOps) validate(onReloadError func(error)) error {
	if o.configPoll < 0 {
		return fmt.Errorf("--config-poll is %v, must be >= 0 (0 turns reloading off)", o.configPoll)
	}
	r, err := o.tls.Reloader(onReloadError)
	if err != nil {
		return err
	}
	o.tlsFiles = r
	return nil
}

// loadConfig loads --config: a FILE, or etcd:KEY read from the etcd
// cluster at endpoints (comma-separated host:port or URLs). It remembers
// where the configuration came from, so that start can watch it.
func (o *doormanOps) loadConfig(ctx context.Context, config, endpoints string) (*server.Repository, error) {
	key, inEtcd := strings.CutPrefix(config, etcdConfigPrefix)
	if !inEtcd {
		data, err := server.ReadConfig(config)
		if err != nil {
			return nil, err
		}
		repo, err := server.ParseRepository(data)
		if err != nil {
			return nil, fmt.Errorf("%w (in %s)", err, config)
		}
		o.file, o.data = config, data
		return repo, nil
	}
	if key == "" {
		return nil, fmt.Errorf("--config %q names no etcd key: want etcd:KEY", config)
	}
	eps := splitEndpoints(endpoints)
	if len(eps) == 0 {
		return nil, fmt.Errorf("--config %s needs the etcd cluster's endpoints (--etcd HOST:PORT,...)", config)
	}
	c, err := etcdClient(eps, &cli.EtcdFlags{})
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	data, rev, err := etcdconfig.Read(lctx, c, key)
	if err != nil {
		c.Close()
		return nil, err
	}
	repo, err := server.ParseRepository(data)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("%w (in etcd key %q)", err, key)
	}
	o.etcd, o.etcdKey, o.etcdRev, o.data = c, key, rev, data
	return repo, nil
}

// grpcServerOptions returns the options of the gRPC server srv is to be
// registered on: TLS credentials from the files validate read, and the
// interceptor recording srv's RPCs on scope.
func (o *doormanOps) grpcServerOptions(srv *server.Server, scope tally.Scope) ([]grpc.ServerOption, error) {
	opts := []grpc.ServerOption{grpc.ChainUnaryInterceptor(server.NewMetrics(srv, scope).UnaryInterceptor())}
	if o.tlsFiles == nil {
		return opts, nil
	}
	creds, err := grpctls.ServerCredentials(o.tlsFiles)
	if err != nil {
		return nil, err
	}
	opts = append(opts, grpc.Creds(creds))
	return opts, nil
}

// start reloads the configuration into srv while it runs: --config FILE
// every --config-poll, --config etcd:KEY on every change. Each new
// configuration applied or refused is logged on stderr and counted on
// scope. stop ends the watcher and returns once it has.
func (o *doormanOps) start(srv *server.Server, scope tally.Scope, stderr io.Writer) (stop func()) {
	r := server.NewReloader(srv, server.ReloadConfig{Scope: scope, Logger: cli.LineLogger(stderr, slog.LevelInfo)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	r.Loaded(o.data)
	switch {
	case o.configPoll == 0:
		close(done)
	case o.etcd != nil:
		go func() {
			defer close(done)
			_ = etcdconfig.Watch(ctx, o.etcd, o.etcdKey, o.etcdRev, r) // returns nil when ctx ends
		}()
	case o.file != "":
		go func() {
			defer close(done)
			_ = server.WatchFile(ctx, o.file, o.configPoll, r) // arguments checked by validate
		}()
	default:
		close(done)
	}
	return func() {
		cancel()
		<-done
	}
}

// close releases the etcd client, after start's watcher has stopped.
func (o *doormanOps) close() {
	if o.etcd != nil {
		o.etcd.Close()
		o.etcd = nil
	}
}

// addDoormanClientTLSFlags registers a Doorman client's TLS flags on fs
// (`sluice-lab doorman get`, load, flood): --tls, --tls-ca, --tls-cert,
// --tls-key and --tls-server-name, the capability of the original
// client's -ca_file.
func addDoormanClientTLSFlags(fs *cli.FlagSet) *cli.ClientTLSFlags {
	return cli.AddClientTLSFlags(fs, "", "the server", "--server")
}

// dialOptions returns the options to dial a Doorman server with
// (leasing.ClientConfig.DialOptions): nil for plaintext when no TLS flag
// is given. An error names the flag, and the file, that is wrong. A
// changed file that does not load later is told to onReloadError (nil:
// nobody).
func dialOptions(c *cli.ClientTLSFlags, onReloadError func(error)) ([]grpc.DialOption, error) {
	r, serverName, err := c.Reloader(onReloadError)
	if r == nil || err != nil {
		return nil, err
	}
	return []grpc.DialOption{grpc.WithTransportCredentials(grpctls.ClientCredentials(r, serverName))}, nil
}
