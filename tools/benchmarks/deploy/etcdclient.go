package deploy

import (
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdDialTimeout bounds an etcd client's first connection.
const etcdDialTimeout = 5 * time.Second

// newEtcdClient returns a client of the etcd at the client URL endpoint.
func newEtcdClient(endpoint string) (*clientv3.Client, error) {
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: etcdDialTimeout, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd client of %s: %w", endpoint, err)
	}
	return c, nil
}
