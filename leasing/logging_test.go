package leasing

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/slogtest"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/testkit/testnet"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
)

// A client whose server goes away logs one Warn line when refreshes
// start failing, however many fail, and one Info line when they work
// again.
func TestClientLogsRefreshFailuresOncePerChange(t *testing.T) {
	const failed, again = "WARN leasing: refreshing leases failed", "INFO leasing: refreshing leases works again"
	clk := clock.NewFake(testEpoch)
	cfg := liveConfig(100, int64p(0), nil)
	s1 := newTestServer(t, cfg, clk)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	done := make(chan struct{})
	go func() { defer close(done); s1.Serve(lis) }()
	var log slogtest.Lines
	c, err := NewClient(ClientConfig{Addr: addr, ID: "a", Clock: clk, ManualRefresh: true, RPCTimeout: 2 * time.Second, Logger: slog.New(&log)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mustResource(t, c, "r", ResourceConfig{Wants: 10})
	tick := func() {
		t.Helper()
		clk.Add(time.Minute) // past the refresh interval and any backoff
		_, _ = c.Tick(context.Background())
	}
	tick()
	s1.Stop()
	testwait.Recv(t, done, "Serve to return")
	for range 5 {
		tick()
	}
	if log.Count(failed) != 1 || log.Count("server="+addr) != 1 {
		t.Fatalf("5 failed refreshes logged:\n%s\nwant one Warn line naming the server", log.String())
	}
	startServer(t, newTestServer(t, cfg, clk), addr)
	tick()
	if log.Count(again) != 1 || log.Count("failures=5") != 1 {
		t.Fatalf("after the server came back:\n%s\nwant one Info line counting 5 failures", log.String())
	}
}

// With no Logger, a failing refresh is logged on slog.Default() at Warn.
func TestClientLogsOnSlogDefault(t *testing.T) {
	var log slogtest.Lines
	prev := slog.Default()
	slog.SetDefault(slog.New(&log))
	defer slog.SetDefault(prev)
	clk := clock.NewFake(testEpoch)
	c := newTestClient(t, testnet.AcceptClose(t).Addr(), "a", clk) // every refresh fails
	mustResource(t, c, "r", ResourceConfig{Wants: 10})
	if _, err := c.Tick(context.Background()); err == nil {
		t.Fatal("a refresh with no server succeeded")
	}
	if log.Count("WARN leasing: refreshing leases failed") != 1 {
		t.Fatalf("slog.Default() got:\n%s\nwant one Warn line", log.String())
	}
}
