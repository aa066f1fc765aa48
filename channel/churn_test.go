package channel

import (
	"context"
	"errors"
	"flag"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
)

var churnFor = flag.Duration("churn", 2*time.Second, "how long TestPeerChurn adds and removes peers (the probe ran 60s)")

// Peers added and removed while calls run: every call ends with a result
// (a success, or an error saying why: no peers, unavailable), and once the
// churn ends and the client closes, nothing is left: no connection in its
// guard, no goroutine (goleak, in TestMain).
func TestPeerChurn(t *testing.T) {
	servers := []*testServer{startServer(t), startServer(t), startServer(t)}
	client, err := New("client")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
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
				_, err := client.CallRaw(callCtx, "kv", "echo", nil, []byte("x"))
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
			if err := client.RemovePeer("kv", hp); err != nil {
				t.Fatalf("RemovePeer: %v", err)
			}
		} else {
			if err := client.AddPeer("kv", hp); err != nil {
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
	for _, p := range client.Peers("kv") {
		if err := client.RemovePeer("kv", p.HostPort); err != nil {
			t.Fatalf("RemovePeer: %v", err)
		}
	}
	client.Close()
	testwait.Until(t, "the client's guard to forget every connection", func() bool { return client.peers.g.Conns() == 0 })
}
