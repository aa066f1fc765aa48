// Package etcdembed runs an etcd server embedded in the test process, on
// 127.0.0.1, for the tools' tests that need one (sluice doorman serve with
// an etcd election or configuration). It lives in the tools module so that
// the library's module does not require etcd's server: the library's own
// etcd tests start the etcd binary (internal/testkit/etcdtest).
package etcdembed

import (
	"net/url"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/etcdtest"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Etcd is a single-member etcd cluster running in the test process.
type Etcd struct {
	// Endpoint is the client URL, http://127.0.0.1:PORT.
	Endpoint string

	e *embed.Etcd
}

// Start starts an etcd member whose data lives in t.TempDir and stops it
// when t ends. It fails t if etcd is not ready within 20 s.
func Start(t testing.TB) *Etcd {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Dir = t.TempDir()
	// Quiet: a member stopping logs its listeners' closing as errors.
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.UnsafeNoFsync = true
	client, peer := etcdtest.FreeURL(t), etcdtest.FreeURL(t)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("etcdembed: start embedded etcd: %v", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(20 * time.Second):
		e.Close()
		t.Fatal("etcdembed: embedded etcd not ready within 20s")
	}
	et := &Etcd{Endpoint: client.String(), e: e}
	t.Cleanup(et.Stop)
	return et
}

// Stop stops the member; later calls do nothing.
func (et *Etcd) Stop() {
	if et.e != nil {
		et.e.Close()
		et.e = nil
	}
}
