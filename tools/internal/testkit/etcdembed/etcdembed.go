// Package etcdembed runs an etcd server embedded in the test process, on
// 127.0.0.1, for the tools' tests that need one (sluice doorman serve with
// an etcd election or configuration, the rolling-deploy benchmark). It
// lives in the tools module so that the library's module does not require
// etcd's server: the library's own etcd tests start the etcd binary
// (internal/testkit/etcdtest). The member is internal/etcdserver's.
package etcdembed

import (
	"testing"

	"github.com/sluice-rpc/sluice/tools/internal/etcdserver"
)

// Etcd is a single-member etcd cluster running in the test process.
type Etcd struct {
	// Endpoint is the client URL, http://127.0.0.1:PORT.
	Endpoint string

	s *etcdserver.Server
}

// Start starts an etcd member whose data lives in t.TempDir and stops it
// when t ends. It fails t if etcd is not ready within 20 s.
func Start(t testing.TB) *Etcd {
	t.Helper()
	s, err := etcdserver.StartEmbedded(t.TempDir())
	if err != nil {
		t.Fatalf("etcdembed: %v", err)
	}
	et := &Etcd{Endpoint: s.Endpoint, s: s}
	t.Cleanup(et.Stop)
	return et
}

// Stop stops the member; later calls do nothing.
func (et *Etcd) Stop() { et.s.Close() }
