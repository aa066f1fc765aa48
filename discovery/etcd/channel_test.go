package etcd_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/discovery/etcd"
	"github.com/sluice-rpc/sluice/internal/testkit/testload"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
)

// fleetServer is a Sluice server of "kv" that registers in etcd.
type fleetServer struct {
	ch    *channel.Channel
	calls atomic.Int64
	first atomic.Int64 // when its first call came, Unix nanoseconds
}

func startFleetServer(t *testing.T, endpoint string) (*fleetServer, time.Time) {
	t.Helper()
	reg, err := etcd.NewRegistrar(etcd.RegistrarConfig{Client: newClient(t, endpoint), Prefix: prefix, TTL: testTTL, Backoff: testBackoff})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := channel.New("kv", channel.WithRegistrar(reg), channel.WithShutdown(channel.ShutdownConfig{Quiet: 50 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	s := &fleetServer{ch: ch}
	if err := ch.RegisterRaw("echo", func(_ context.Context, req *channel.RawRequest) (*channel.RawResponse, error) {
		if s.calls.Add(1) == 1 {
			s.first.Store(time.Now().UnixNano())
		}
		return &channel.RawResponse{Arg3: req.Arg3}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.Close)
	return s, time.Now()
}

// A fleet registered in etcd and a client following it, calling all the
// while with no retry policy: a new server gets calls within a second of
// starting; with etcd killed, the client keeps calling the servers it
// knows and the servers, cut off from etcd, keep serving (no call fails);
// when etcd is back, a server started then is found and called; a server
// that shuts down leaves without a failed call.
func TestFleetThroughEtcdOutage(t *testing.T) {
	et, _ := startEtcd(t)
	a, _ := startFleetServer(t, et.Endpoint)
	r, err := etcd.NewResolver(resolverConfig(newClient(t, et.Endpoint)))
	if err != nil {
		t.Fatal(err)
	}
	ch, err := channel.New("client")
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	client, err := ch.NewClient("kv", channel.WithResolver(r))
	if err != nil {
		t.Fatal(err)
	}
	// Before a's key is read, the prefix is empty: calls fail NO_PEERS
	// (unless they wait for ready), which is not what this test is about.
	testwait.Until(t, "the client to find a", func() bool { return len(client.Peers()) == 1 })

	load := testload.Start(4, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := client.CallRaw(ctx, "echo", nil, []byte("x"))
		return err
	})
	defer load.Stop()
	testwait.Until(t, "calls to a", func() bool { return a.calls.Load() > 10 })

	b, started := startFleetServer(t, et.Endpoint)
	testwait.Until(t, "calls to b", func() bool { return b.calls.Load() > 0 })
	toFirst := time.Unix(0, b.first.Load()).Sub(started)
	t.Logf("b got its first call %v after it started serving", toFirst)
	if toFirst > time.Second {
		t.Errorf("b got its first call %v after it started serving, want within 1s", toFirst)
	}

	et.Kill()
	testwait.Until(t, "the client to see etcd gone", func() bool {
		return ch.Debug().Services[0].Resolver.Status == "FAILING"
	})
	before, beforeA, beforeB := load.Calls(), a.calls.Load(), b.calls.Load()
	testwait.Until(t, "calls to both servers during the outage", func() bool {
		return load.Calls() > before+200 && a.calls.Load() > beforeA+50 && b.calls.Load() > beforeB+50
	})
	if n := len(client.Peers()); n != 2 {
		t.Fatalf("the client has %d peers during the outage, want the 2 it knew", n)
	}

	et.Restart()
	c, _ := startFleetServer(t, et.Endpoint)
	testwait.Until(t, "calls to c, started after etcd came back", func() bool { return c.calls.Load() > 0 })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.ch.Shutdown(ctx); err != nil {
		t.Errorf("a's Shutdown: %v", err)
	}
	testwait.Until(t, "a to leave the client's peers", func() bool { return len(client.Peers()) == 2 })
	before = load.Calls()
	testwait.Until(t, "calls after a left", func() bool { return load.Calls() > before+100 })
	load.Stop()
	t.Logf("%d calls, %d failed", load.Calls(), load.Failed())
	if n := load.Failed(); n != 0 {
		t.Fatalf("%d of %d calls failed; the first: %v", n, load.Calls(), load.FirstErr())
	}
}
