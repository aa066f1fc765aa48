package deploy

import (
	"github.com/sluice-rpc/sluice/discovery"
	"github.com/sluice-rpc/sluice/discovery/etcd"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// newEtcdRegistrar returns a registrar under prefix in the etcd at
// endpoint, and the function that closes its client.
func newEtcdRegistrar(endpoint, prefix string) (discovery.Registrar, func(), error) {
	c, err := newEtcdClient(endpoint)
	if err != nil {
		return nil, nil, err
	}
	r, err := etcd.NewRegistrar(etcd.RegistrarConfig{Client: c, Prefix: prefix})
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return r, func() { c.Close() }, nil
}

// newEtcdResolver returns a resolver of the servers under prefix, read
// through c.
func newEtcdResolver(c *clientv3.Client, prefix string) (discovery.Resolver, error) {
	return etcd.NewResolver(etcd.ResolverConfig{Client: c, Prefix: prefix})
}
