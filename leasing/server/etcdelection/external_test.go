package etcdelection_test

import (
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/etcdtest"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
)

// TestElectionOnSeparateEtcd: the election works against an etcd started
// on its own, as operators run it (the etcd on the PATH; CI installs
// Debian's etcd-server, 3.4): one master, a client sent to the other
// server is redirected to it, and when it stops the other takes over.
func TestElectionOnSeparateEtcd(t *testing.T) {
	t.Parallel() // each has its own etcd process and servers; most of its time is waiting on TTLs
	et := etcdtest.Start(t)
	t.Log(et.Version)
	ns := []*node{startNode(t, et.Endpoint), startNode(t, et.Endpoint)}
	m := master(t, ns)
	follower := others(ns, m)[0]
	c := newClient(t, follower.addr, "c", 40)
	testwait.Until(t, "the client to get its lease from the master", func() bool { return c.Has() == 40 })
	if _, clients, _ := m.s.Counts(); clients != 1 {
		t.Fatalf("the master has %d clients, want the one redirected to it", clients)
	}
	learnOnWin(t, ns)
	stopped := time.Now()
	m.stop(t)
	if m2 := master(t, []*node{follower}); m2 != follower {
		t.Fatalf("master %s, want %s", m2.addr, follower.addr)
	}
	t.Logf("mastership moved in %v", time.Since(stopped).Round(time.Millisecond))
	testwait.Until(t, "the client to keep its lease from the new master", func() bool {
		_, clients, _ := follower.s.Counts()
		return clients == 1 && c.Has() == 40
	})
}
