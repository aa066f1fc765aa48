package deploy

import (
	"fmt"
	"time"

	"github.com/sluice-rpc/sluice/discovery"
	"github.com/sluice-rpc/sluice/discovery/etcd"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// newEtcdClient returns a client of the etcd at the client URL endpoint.
func newEtcdClient(endpoint string) (*clientv3.Client, error) {
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd client of %s: %w", endpoint, err)
	}
	return c, nil
}

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
