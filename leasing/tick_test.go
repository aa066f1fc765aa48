package leasing

import (
	"context"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/backoff"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/leasing/server"
)

// Tick, with ManualRefresh, does what the refresh loop does when it wakes
// and says when to call it next: a refresh when one is due, nothing
// before.
func TestTickRefreshesWhenDue(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	s := newTestServer(t, testConfig(server.FairShare, 10), clk) // 15 s refresh
	addr := startServer(t, s, "")
	c := newTestClient(t, addr, "a", clk)
	r := mustResource(t, c, "r", ResourceConfig{Wants: 4, Mode: Pessimistic})
	ctx := context.Background()

	next, err := c.Tick(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Capacity(); got != 4 {
		t.Fatalf("capacity after the first Tick %v, want 4", got)
	}
	if want := clk.Now().Add(15 * time.Second); !next.Equal(want) {
		t.Fatalf("next Tick at %v, want the refresh interval later, %v", next.Sub(testEpoch), want.Sub(testEpoch))
	}
	clk.Add(5 * time.Second)
	if again, err := c.Tick(ctx); err != nil || !again.Equal(next) {
		t.Fatalf("an early Tick: %v, %v; want nothing sent and the same time", again.Sub(testEpoch), err)
	}
}

// After a failed refresh, Tick sends nothing until the backoff ends.
func TestTickBacksOffAfterAFailure(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close() // nothing listens: every refresh fails at once
	clk := clock.NewFake(testEpoch)
	c, err := NewClient(ClientConfig{Addr: addr, ID: "b", Clock: clk, ManualRefresh: true, RPCTimeout: 2 * time.Second,
		Backoff: backoff.Exponential{Initial: 2 * time.Second, Max: time.Minute, Multiplier: 2, Jitter: backoff.EqualJitter}, Rand: rand.New(rand.NewPCG(1, 2)).Float64})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mustResource(t, c, "r", ResourceConfig{Wants: 1})
	ctx := context.Background()
	next, err := c.Tick(ctx)
	if err == nil {
		t.Fatal("a refresh to a closed port succeeded")
	}
	// Equal jitter: the wait is drawn from the upper half of 2 s.
	if wait := next.Sub(clk.Now()); wait < time.Second || wait > 2*time.Second {
		t.Fatalf("next Tick %v after a failure, want within the backoff [1s, 2s]", wait)
	}
	clk.Add(next.Sub(clk.Now()) / 2)
	if again, err := c.Tick(ctx); err != nil || !again.Equal(next) {
		t.Fatalf("a Tick during the backoff: %v, %v; want nothing sent and the backoff's end", again.Sub(testEpoch), err)
	}
	clk.Add(next.Sub(clk.Now()))
	if _, err := c.Tick(ctx); err == nil {
		t.Fatal("the Tick at the backoff's end sent nothing or succeeded")
	}
}
