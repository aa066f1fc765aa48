package main

import (
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"

	"github.com/sluice-rpc/sluice/discovery"
	"github.com/sluice-rpc/sluice/discovery/etcd"
	"github.com/sluice-rpc/sluice/tools/cmd/internal/cli"
)

// etcdTargets opens etcd:// targets for call, bench and serve (cli.Etcd):
// etcd's client, and gRPC under it, are why they are sluice-lab's.
type etcdTargets struct{}

func (etcdTargets) Resolver(target string, f *cli.EtcdFlags) (discovery.Resolver, func(), error) {
	return openEtcd(target, f, func(c *clientv3.Client, prefix string) (discovery.Resolver, error) {
		return etcd.NewResolver(etcd.ResolverConfig{Client: c, Prefix: prefix})
	})
}

func (etcdTargets) Registrar(target string, ttl time.Duration, f *cli.EtcdFlags) (discovery.Registrar, func(), error) {
	return openEtcd(target, f, func(c *clientv3.Client, prefix string) (discovery.Registrar, error) {
		return etcd.NewRegistrar(etcd.RegistrarConfig{Client: c, Prefix: prefix, TTL: ttl})
	})
}

// openEtcd connects to target's endpoints and makes what uses the client
// under target's prefix; it returns that and what closes the client.
func openEtcd[T any](target string, f *cli.EtcdFlags, use func(*clientv3.Client, string) (T, error)) (T, func(), error) {
	var none T
	eps, prefix, err := etcd.ParseTarget(target)
	if err != nil {
		return none, func() {}, err
	}
	c, err := etcdClient(eps, f)
	if err != nil {
		return none, func() {}, err
	}
	v, err := use(c, prefix)
	if err != nil {
		c.Close()
		return none, func() {}, err // not v: a nil *etcd.Resolver in an interface is not nil
	}
	return v, func() { c.Close() }, nil
}

// etcdClient connects to the etcd endpoints with the flags' TLS and
// credentials. etcd's client connects lazily: a cluster that is down is
// found by the first request, not here. Its reconnects wait at most 2 s
// (gRPC's default backoff grows to 120 s), so that an etcd back from an
// outage is followed again at once.
func etcdClient(endpoints []string, f *cli.EtcdFlags) (_ *clientv3.Client, err error) {
	cfg := clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           grpcbackoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		})}}
	var c *clientv3.Client
	cfg.TLS, err = f.TLSConfig()
	if err == nil {
		cfg.Username, cfg.Password = f.Credentials()
		c, err = clientv3.New(cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("etcd %s: %v", strings.Join(endpoints, ","), err)
	}
	return c, nil
}

// splitEndpoints reads a comma-separated list of etcd endpoints.
func splitEndpoints(list string) []string {
	var eps []string
	for _, ep := range strings.Split(list, ",") {
		if ep = strings.TrimSpace(ep); ep != "" {
			eps = append(eps, ep)
		}
	}
	return eps
}
