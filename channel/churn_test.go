package channel

import (
	"context"
	"errors"
	"flag"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/slowtest"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
)

var churnFor = flag.Duration("churn", 2*time.Second, "how long TestPeerChurn adds and removes peers (the probe ran 60s)")

// Peers added and removed while calls run: every call ends with a result
// (a success, or an error saying why: no peers, unavailable), and once the
// churn ends and the client closes, nothing is left: no connection in its
// guard, no goroutine (goleak, in TestMain).
func TestPeerChurn(t *testing.T) {
	t.Parallel() // it churns for -churn; nothing in it is timed, and it counts no goroutine
	servers := []*testServer{startServer(t), startServer(t), startServer(t)}
	client, err := New("client")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	kv := to(client, "kv") // before the callers: to makes the Client on first use
	ctx, cancel := context.WithTimeout(context.Background(), *churnFor)
	defer cancel()

	var wg sync.WaitGroup
	var mu sync.Mutex
	calls, ok := 0, 0
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				callCtx, done := context.WithTimeout(ctx, 200*time.Millisecond)
				_, err := kv.CallRaw(callCtx, "echo", nil, []byte("x"))
				done()
				mu.Lock()
				calls++
				if err == nil {
					ok++
				}
				mu.Unlock()
				if err != nil && !errors.Is(err, ErrNoPeers) && !errors.Is(err, ErrUnavailable) && callCtx.Err() == nil && ctx.Err() == nil {
					var ce *CallError
					if !errors.As(err, &ce) {
						t.Errorf("a call failed without a CallError: %v", err)
					}
				}
			}
		}()
	}
	// Each server in turn goes in if it is out, out if it is in: from one
	// to three peers, now and then none.
	in := map[string]bool{}
	for i := 0; ctx.Err() == nil; i++ {
		hp := servers[i%len(servers)].ch.HostPort()
		if in[hp] {
			if err := to(client, "kv").RemovePeer(hp); err != nil {
				t.Fatalf("RemovePeer: %v", err)
			}
		} else {
			if err := to(client, "kv").AddPeer(hp); err != nil {
				t.Fatalf("AddPeer: %v", err)
			}
		}
		in[hp] = !in[hp]
		time.Sleep(time.Millisecond) // churn, not synchronisation
	}
	wg.Wait()
	mu.Lock()
	t.Logf("%d calls, %d ok, over %v of churn", calls, ok, *churnFor)
	mu.Unlock()
	if ok == 0 {
		t.Fatalf("no call succeeded during the churn: got %v, want non-zero", ok)
	}
	for _, p := range to(client, "kv").Peers() {
		if err := to(client, "kv").RemovePeer(p.HostPort); err != nil {
			t.Fatalf("RemovePeer: %v", err)
		}
	}
	client.Close()
	testwait.Until(t, "the client's guard to forget every connection", func() bool { return client.peers.g.Conns() == 0 })
}

// A resolver's sets churning while calls run: one server stays in every
// set, the two others come and go every millisecond. No call fails (a
// removed peer's calls in flight finish; calls choose among the peers of
// the moment), and once the set is back to the one server, the goroutines
// come back to what they were before the churn and the heap to what it
// was in its first quarter: nothing accumulates per change. It runs for
// -churn; TestResolverChurnMinute, behind the slow gate, for a minute.
func TestResolverChurn(t *testing.T) { resolverChurn(t, *churnFor) }

func TestResolverChurnMinute(t *testing.T) {
	slowtest.Skip(t, "churns peers for a minute")
	resolverChurn(t, time.Minute)
}

func resolverChurn(t *testing.T, d time.Duration) {
	servers := []*testServer{startServer(t), startServer(t), startServer(t)}
	reg := newMemRegistry(servers[0].ch.HostPort())
	client, _ := resolvedClient(t, reg)
	load := echoLoop(t, client)
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	testwait.Until(t, "calls to flow", func() bool { return load.Calls() > 10 })
	g0 := runtime.NumGoroutine()
	start := time.Now()
	var h0 uint64
	changes := 0
	for i := 0; time.Since(start) < d; i++ {
		set := []string{servers[0].ch.HostPort()}
		for j, s := range servers[1:] {
			if i>>j&1 == 1 {
				set = append(set, s.ch.HostPort())
			}
		}
		reg.set(func([]string) []string { return set }, nil)
		changes++
		if h0 == 0 && time.Since(start) > d/4 {
			h0 = heap()
		}
		time.Sleep(time.Millisecond) // churn, not synchronisation
	}
	reg.set(func([]string) []string { return []string{servers[0].ch.HostPort()} }, nil)
	var g1 int
	testwait.Until(t, "the goroutines of the churn to end", func() bool {
		g1 = runtime.NumGoroutine()
		return g1 <= g0
	})
	h1 := heap()
	t.Logf("%v: %d set changes, %d calls, %d failed; goroutines %d -> %d, heap %d KiB -> %d KiB",
		d, changes, load.Calls(), load.Failed(), g0, g1, h0>>10, h1>>10)
	if n := load.Failed(); n != 0 {
		t.Errorf("%d of %d calls failed during the churn; the first: %v", n, load.Calls(), load.FirstErr())
	}
	if h1 > h0+8<<20 {
		t.Errorf("the heap grew from %d KiB to %d KiB over the churn", h0>>10, h1>>10)
	}
}
