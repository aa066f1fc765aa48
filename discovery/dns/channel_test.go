package dns_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/discovery/dns"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
)

// kvServer is a Sluice server of "kv" on 127.0.0.1 counting its calls.
type kvServer struct {
	ch    *channel.Channel
	calls atomic.Int64
	port  string
}

func startKV(t *testing.T) *kvServer {
	t.Helper()
	ch, err := channel.New("kv")
	if err != nil {
		t.Fatal(err)
	}
	s := &kvServer{ch: ch}
	if err := ch.RegisterRaw("echo", func(_ context.Context, req *channel.RawRequest) (*channel.RawResponse, error) {
		s.calls.Add(1)
		return &channel.RawResponse{Arg3: req.Arg3}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.Close)
	_, s.port, _ = net.SplitHostPort(ch.HostPort())
	return s
}

// A Channel following SRV records: a new instance gets calls from the next
// re-resolution, not before; and when a peer fails, the Channel looks up
// at once (past the minimum interval) rather than at the next period.
func TestChannelFollowsDNS(t *testing.T) {
	srv := startServer(t)
	const name = "_kv._tcp.fleet.test."
	a, b, c := startKV(t), startKV(t), startKV(t)
	srv.set(t, "host.fleet.test.", "A 127.0.0.1")
	srv.set(t, name, "SRV 0 1 "+a.port+" host.fleet.test.")
	fc := clock.NewFake(time.Unix(0, 0))
	const period, minInterval = time.Minute, 5 * time.Second
	r, err := dns.New(dns.Config{Target: "dns://" + srv.addr + "/" + name, Period: period, MinInterval: minInterval, Clock: fc})
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
	call := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if _, err := client.CallRaw(ctx, "echo", nil, []byte("x")); err != nil {
			t.Fatalf("call: %v", err)
		}
	}
	call()
	if a.calls.Load() != 1 {
		t.Fatalf("a got %d calls, want 1", a.calls.Load())
	}

	// b registers: nothing changes until the period ends.
	srv.set(t, name, "SRV 0 1 "+a.port+" host.fleet.test.", "SRV 0 1 "+b.port+" host.fleet.test.")
	queries := srv.count(mdns.TypeSRV, name)
	for range 20 {
		call()
	}
	if n := b.calls.Load(); n != 0 || srv.count(mdns.TypeSRV, name) != queries {
		t.Fatalf("before the period ended: b got %d calls, %d lookups", n, srv.count(mdns.TypeSRV, name)-queries)
	}
	testwait.Timers(t, fc, 1)
	fc.Add(period)
	testwait.Until(t, "b to get calls after the period", func() bool {
		call()
		return b.calls.Load() > 0
	})

	// a dies and c takes its place in DNS: the failed connection makes the
	// Channel look up at once, with no period passing.
	fc.Add(minInterval) // the last lookup is MinInterval old
	srv.set(t, name, "SRV 0 1 "+b.port+" host.fleet.test.", "SRV 0 1 "+c.port+" host.fleet.test.")
	queries = srv.count(mdns.TypeSRV, name)
	a.ch.Close()
	srv.waitQueries(t, mdns.TypeSRV, name, queries+1)
	testwait.Until(t, "c to get calls after a failed", func() bool {
		call()
		return c.calls.Load() > 0
	})
	var hps []string
	for _, p := range client.Peers() {
		hps = append(hps, p.HostPort)
	}
	if fmt.Sprint(hps) != fmt.Sprint([]string{b.ch.HostPort(), c.ch.HostPort()}) && fmt.Sprint(hps) != fmt.Sprint([]string{c.ch.HostPort(), b.ch.HostPort()}) {
		t.Fatalf("peers %v, want b and c", hps)
	}
	if res := ch.Debug().Services[0].Resolver; res.Status != "OK" || res.Peers != 2 {
		t.Fatalf("resolver state %+v", res)
	}
}
