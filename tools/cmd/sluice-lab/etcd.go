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
	eps, prefix, err := etcd.ParseTarget(target)
	if err != nil {
		return nil, func() {}, err
	}
	c, err := etcdClient(eps, f)
	if err != nil {
		return nil, func() {}, err
	}
	r, err := etcd.NewResolver(etcd.ResolverConfig{Client: c, Prefix: prefix})
	if err != nil {
		c.Close()
		return nil, func() {}, err
	}
	return r, func() { c.Close() }, nil
}

func (etcdTargets) Registrar(target string, ttl time.Duration, f *cli.EtcdFlags) (discovery.Registrar, func(), error) {
	eps, prefix, err := etcd.ParseTarget(target)
	if err != nil {
		return nil, nil, err
	}
	c, err := etcdClient(eps, f)
	if err != nil {
		return nil, nil, err
	}
	r, err := etcd.NewRegistrar(etcd.RegistrarConfig{Client: c, Prefix: prefix, TTL: ttl})
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return r, func() { c.Close() }, nil
}

// etcdClient connects to the etcd endpoints with the flags' TLS and
// credentials. etcd's client connects lazily: a cluster that is down is
// found by the first request, not here. Its reconnects wait at most 2 s
// (gRPC's default backoff grows to 120 s), so that an etcd back from an
// outage is followed again at once.
func etcdClient(endpoints []string, f *cli.EtcdFlags) (*clientv3.Client, error) {
	cfg := clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           grpcbackoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		})}}
	tc, err := f.TLSConfig()
	if err != nil {
		return nil, fmt.Errorf("etcd %s: %v", strings.Join(endpoints, ","), err)
	}
	cfg.TLS = tc
	cfg.Username, cfg.Password = f.Credentials()
	c, err := clientv3.New(cfg)
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
