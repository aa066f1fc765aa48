package etcdelection_test

import (
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/etcdtest"
	"github.com/sluice-rpc/sluice/internal/testkit/servetest"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/leasing/server"
)

// startIntermediate starts a server of an intermediate node: a child of
// parent, campaigning on key, presenting id to the parent.
func startIntermediate(t *testing.T, endpoint, key, parent, id string) *node {
	t.Helper()
	return startElected(t, endpoint, key, testTTL, server.Config{Parent: parent, ID: id, ParentRPCTimeout: time.Second})
}

// TestIntermediateNodeFailover: the two servers of an elected intermediate
// node present the root one server_id, so that when the intermediate's
// master stops, the new master's first request is a renewal of the same
// lease: its client is back to what it wants long before the old lease
// could expire, and the root counts one child throughout.
func TestIntermediateNodeFailover(t *testing.T) {
	t.Parallel() // each has its own etcd process and servers; most of its time is waiting on TTLs
	et := etcdtest.Start(t)
	rootRepo := func(learning int64) *server.Repository {
		return &server.Repository{Resources: []server.Template{{IdentifierGlob: "r", Capacity: capacity,
			Algorithm: server.Algorithm{Kind: server.FairShare, LeaseLength: 60, RefreshInterval: 2, LearningModeDuration: &learning}}}}
	}
	// Started afresh, the root and the intermediate node have no leases out
	// to learn: no learning mode, which would only hold back the first
	// grants (see startRepo).
	root, err := server.New(server.Config{Repository: rootRepo(0)})
	if err != nil {
		t.Fatal(err)
	}
	rootAddr := servetest.Start(t, root, "")
	const key = "/doorman/mid"
	ns := []*node{startIntermediate(t, et.Endpoint, key, rootAddr, key), startIntermediate(t, et.Endpoint, key, rootAddr, key)}
	m := master(t, ns)
	follower := others(ns, m)[0]
	c := newClient(t, follower.addr, "leaf", 60)
	testwait.Until(t, "the leaf to get 60 through the intermediate node", func() bool { return c.Has() == 60 })

	// A short learning mode, passed down to the intermediates: a new
	// intermediate master hands its clients what they claim for 1 s. (The
	// root, out of learning mode, does not enter it again.)
	if err := root.SetRepository(rootRepo(1)); err != nil {
		t.Fatal(err)
	}
	m.stop(t)
	if m2 := master(t, []*node{follower}); m2 != follower {
		t.Fatalf("master %s, want %s", m2.addr, follower.addr)
	}
	failedOver := time.Now()
	// The old lease would last 60 s at the root; the same server_id makes
	// the new master's request its renewal.
	testwait.Until(t, "the leaf to hold 60 again from the new master", func() bool {
		_, ok := parentLease(follower.s, "r")
		return ok && c.Has() == 60
	})
	t.Logf("the leaf held 60 again %v after the failover", time.Since(failedOver).Round(time.Millisecond))
	if took := time.Since(failedOver); took > 10*time.Second {
		t.Fatalf("the leaf took %v to get its 60 back, more than 10 s of the root's 60 s lease", took)
	}
	if _, clients, _ := root.Counts(); clients != 1 {
		t.Fatalf("the root counts %d children, want the one intermediate node", clients)
	}
}
