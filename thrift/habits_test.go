package thrift

import (
	"maps"
	"testing"
	"time"

	"github.com/uber/tchannel-go"
	tthrift "github.com/uber/tchannel-go/thrift"
)

// tchannel-go's habits on a generated client over NewClient: the shard
// key, routing delegate and headers of a ContextBuilder's context
// (tthrift.Wrap, as tchannel-go's thrift code takes it) reach the
// handler, and the shard key routes the call to the key's home, as
// channel.WithShardKey does, and as a plain tchannel-go client sends them.
func TestContextBuilderThriftHabits(t *testing.T) {
	var servers []*kvServer
	for range 3 {
		s, _ := startServer(t)
		servers = append(servers, s)
	}
	cl, _, kv := startClient(t, servers...)
	if err := cl.Connect(ctxTimeout(t, nil)); err != nil {
		t.Fatal(err)
	}
	home, err := cl.ShardHome("user-42")
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := tchannel.NewContextBuilder(2*time.Second).SetShardKey("user-42").SetRoutingDelegate("kv-router").
		AddHeader("who", "me").Build()
	t.Cleanup(cancel)
	ctx := tthrift.Wrap(cctx)
	for i := 0; i < 12; i++ {
		if _, err := kv.HealthCheck(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range servers {
		hs, tr := s.seen()
		want := 0
		if s.hostPort == home {
			want = 12
		}
		if len(hs) != want {
			t.Errorf("server %s received %d calls, want %d (the home of user-42 is %s)", s.hostPort, len(hs), want, home)
			continue
		}
		for i := range hs {
			if !maps.Equal(hs[i], map[string]string{"who": "me"}) || tr[i].ShardKey != "user-42" || tr[i].RoutingDelegate != "kv-router" {
				t.Errorf("server %s, call %d: headers %v, transport %+v; want who=me, shard key user-42, routing delegate kv-router", s.hostPort, i, hs[i], tr[i])
			}
		}
	}
	if got := ctx.ResponseHeaders(); got["seen"] != "me" || got["server"] != home {
		t.Errorf("ctx.ResponseHeaders() = %v, want seen=me from %s", got, home)
	}

	// A plain tchannel-go server sees what tchannel-go's own client sends
	// with the same context.
	plain := startPlainServer(t)
	_, _, kv2 := startClient(t, plain)
	if _, err := kv2.HealthCheck(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := startPlainClient(t, plain.hostPort).HealthCheck(ctx); err != nil {
		t.Fatal(err)
	}
	hs, tr := plain.seen()
	if len(tr) != 2 || !maps.Equal(hs[0], hs[1]) || tr[0].ShardKey != tr[1].ShardKey || tr[0].RoutingDelegate != tr[1].RoutingDelegate {
		t.Errorf("the plain server saw %v %+v; want the Sluice call's headers and transport as tchannel-go's", hs, tr)
	}
}
