package channel

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/balancing"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/peer"
	"github.com/sluice-rpc/sluice/serviceconfig"
)

// Calls with a shard key reach the key's home, on real servers; when the
// home leaves, they reach the next peer on the ring, the same for every
// call; a server's Inbound sees the key.
func TestShardKeyRoutesToHome(t *testing.T) {
	var servers []*testServer
	for range 4 {
		servers = append(servers, startServer(t))
	}
	client, _, _ := startClient(t, servers...)
	byHost := map[string]*testServer{}
	for _, s := range servers {
		byHost[s.ch.HostPort()] = s
	}
	homeOf := func(key string) string {
		t.Helper()
		h, err := to(client, "kv").ShardHome(key)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	for _, key := range []string{"user-1", "user-2", "user-3", "user-4", "user-5"} {
		callsTo(t, client, key, homeOf(key), byHost)
	}
	// JSON calls route by the key too.
	for i := 0; i < 10; i++ {
		var res echoRes
		if err := to(client, "kv").CallJSON(ctxTimeout(t), "get", &echoReq{Key: "k"}, &res, WithShardKey("user-2")); err != nil {
			t.Fatal(err)
		}
		if want := homeOf("user-2"); res.Server != want {
			t.Fatalf("a JSON call with key user-2 reached %s, want its home %s", res.Server, want)
		}
	}
	// The home of user-1 leaves: its calls all go to one other peer.
	home := homeOf("user-1")
	if err := to(client, "kv").RemovePeer(home); err != nil {
		t.Fatal(err)
	}
	next := homeOf("user-1")
	if next == home {
		t.Fatal("ShardHome still names the removed peer")
	}
	callsTo(t, client, "user-1", next, byHost)
}

// callsTo makes 20 calls with key and checks that every one reached want.
func callsTo(t *testing.T, client *Channel, key, want string, servers map[string]*testServer) {
	t.Helper()
	before := map[string]int64{}
	for hp, s := range servers {
		before[hp] = s.received.Load()
	}
	for i := 0; i < 20; i++ {
		if _, err := to(client, "kv").CallRaw(ctxTimeout(t), "echo", nil, []byte("x"), WithShardKey(key)); err != nil {
			t.Fatal(err)
		}
	}
	for hp, s := range servers {
		got, wantN := s.received.Load()-before[hp], int64(0)
		if hp == want {
			wantN = 20
		}
		if got != wantN {
			t.Fatalf("key %s: %s got %d of 20 calls, want %d (the home is %s)", key, hp, got, wantN, want)
		}
	}
}

// A server that answers UNEXPECTED to every call is ejected after five,
// shows as ejected in Debug, and gets no further calls; with ejection
// disabled by the service config it keeps getting its share.
func TestEjectionOnRealServers(t *testing.T) {
	for _, disabled := range []bool{false, true} {
		t.Run(fmt.Sprint("disabled=", disabled), func(t *testing.T) {
			var servers []*testServer
			for range 4 {
				servers = append(servers, startServer(t))
			}
			bad := servers[0]
			bad.broken.Store(true)
			var opts []Option
			if disabled {
				cfg, err := serviceconfig.Parse([]byte(`{"balancing": [{"services": ["kv"], "outlierEjection": {"disabled": true}}]}`))
				if err != nil {
					t.Fatal(err)
				}
				opts = append(opts, WithServiceConfig(cfg))
			}
			client, err := New("client", opts...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(client.Close)
			for _, s := range servers {
				if err := to(client, "kv").AddPeer(s.ch.HostPort()); err != nil {
					t.Fatal(err)
				}
			}
			// Ejections are ignored while fewer than half the peers are
			// Ready and not ejected (the panic threshold): the calls start
			// once every peer is connected, as they would in a running
			// service, not while some still are.
			waitAllReady(t, client, servers)
			ctx := ctxTimeout(t)
			failed := 0
			for i := 0; i < 400; i++ {
				_, err := to(client, "kv").CallRaw(ctx, "echo", nil, []byte("x"))
				var ce *CallError
				switch {
				case err == nil:
				case errors.As(err, &ce) && ce.Code == codes.Unexpected:
					failed++
				default:
					t.Fatal(err)
				}
			}
			got := bad.received.Load()
			if !disabled {
				if got != 5 || failed != 5 {
					t.Fatalf("the broken server got %d calls (%d failed), want 5: ejected after 5 in a row", got, failed)
				}
				var ejected bool
				for _, s := range client.Debug().Services {
					for _, p := range s.Peers {
						if p.HostPort == bad.ch.HostPort() {
							ejected = p.EjectedUntil != nil && p.Ejections == 1
						}
					}
				}
				if !ejected {
					t.Fatal("Debug does not show the broken server ejected")
				}
				return
			}
			if got < 50 {
				t.Fatalf("with ejection disabled the broken server got %d of 400 calls, want its share (~100)", got)
			}
		})
	}
}

// A failure the ready peers share ejects none of them, and a peer that is
// no longer ready does not count as working for its answers before: here
// one server answered OK and then went away, and the three left answer
// UNEXPECTED to every call.
func TestSharedFailureOnRealServersEjectsNone(t *testing.T) {
	var servers []*testServer
	for range 4 {
		servers = append(servers, startServer(t))
	}
	gone, rest := servers[0], servers[1:]
	// A run of 20 errors: by then each of the three has answered at least
	// once, so the verdict rests on all of them.
	cfg := mustConfig(t, `{"balancing": [{"services": ["kv"], "outlierEjection": {"consecutiveErrors": 20}}]}`)
	client, err := New("client", WithServiceConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	kv := to(client, "kv")
	for _, s := range servers {
		if err := kv.AddPeer(s.ch.HostPort()); err != nil {
			t.Fatal(err)
		}
	}
	waitAllReady(t, client, servers)
	key := ""
	for i := 0; key == ""; i++ {
		if home, err := kv.ShardHome(fmt.Sprint("k", i)); err != nil {
			t.Fatal(err)
		} else if home == gone.ch.HostPort() {
			key = fmt.Sprint("k", i)
		}
	}
	if _, err := kv.CallRaw(ctxTimeout(t), "echo", nil, []byte("x"), WithShardKey(key)); err != nil {
		t.Fatal(err)
	}
	gone.ch.Close()
	testwait.Until(t, "the client to see the closed server's peer not ready", func() bool {
		for _, c := range kv.Peers() {
			if c.HostPort == gone.ch.HostPort() {
				return c.State != peer.Ready
			}
		}
		return true
	})
	for _, s := range rest {
		s.broken.Store(true)
	}
	ctx := ctxTimeout(t)
	for i := range 150 {
		_, err := kv.CallRaw(ctx, "echo", nil, []byte("x"))
		var ce *CallError
		if !errors.As(err, &ce) || ce.Code != codes.Unexpected {
			t.Fatalf("call %d: %v; want UNEXPECTED from a broken server", i, err)
		}
	}
	for _, c := range kv.Peers() {
		if c.Ejections != 0 {
			t.Errorf("%s ejected %d times for a failure every ready peer shares", c.HostPort, c.Ejections)
		}
	}
}

// SetPeers' weights share calls in proportion, with real servers.
func TestSetPeersWeights(t *testing.T) {
	light, heavy := startServer(t), startServer(t)
	// The client's clock stands still, so every call takes no time by it:
	// no latency estimate can mark a peer slow (a loaded machine's pause
	// makes one look 5x slower than the other, and it is then only
	// probed), and the shares are the weights' alone.
	client, err := New("client", WithClock(clock.NewFake(time.Unix(1_700_000_000, 0))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	if err := to(client, "kv").SetPeers([]peer.Member{{HostPort: light.ch.HostPort(), Weight: 1}, {HostPort: heavy.ch.HostPort(), Weight: 3}}); err != nil {
		t.Fatal(err)
	}
	// The shares are the weights' among Ready peers: calls made while one
	// peer still connects all go to the other.
	waitAllReady(t, client, []*testServer{light, heavy})
	const n = 800
	for i := 0; i < n; i++ {
		if _, err := to(client, "kv").CallRaw(ctxTimeout(t), "echo", nil, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if share := float64(heavy.received.Load()) / n; math.Abs(share-0.75) > 0.06 {
		t.Fatalf("the weight-3 server got %.3f of calls, want 0.75 +- 0.06; the peers: %+v", share, to(client, "kv").Peers())
	}
	if err := to(client, "kv").SetPeers([]peer.Member{{HostPort: "127.0.0.1:1", Weight: -1}}); err == nil {
		t.Fatal("SetPeers took a negative weight")
	}
}

// A hedged call with a shard key sends its hedge to the next peer on the
// ring after the key's home, which here hangs; neither leaves its peer
// counting a call once both have ended.
func TestShardKeyHedgeGoesToNextOnRing(t *testing.T) {
	var servers []*testServer
	var names []string
	for range 4 {
		s := startServer(t)
		servers = append(servers, s)
		names = append(names, s.ch.HostPort())
	}
	cfg, err := serviceconfig.Parse([]byte(`{"methodConfig":[{"name":[{"service":"kv"}],"hedgingPolicy":{"maxAttempts":2,"hedgingDelay":"0.02s","nonFatalStatusCodes":["BUSY"]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	client, err := New("client", WithServiceConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	for _, n := range names {
		if err := to(client, "kv").AddPeer(n); err != nil {
			t.Fatal(err)
		}
	}
	ring, err := balancing.NewRing(names, nil)
	if err != nil {
		t.Fatal(err)
	}
	const key = "user-7"
	var order []string
	ring.Walk(balancing.KeyHash(key), func(i int) bool { order = append(order, names[i]); return len(order) < 2 })
	if home, _ := to(client, "kv").ShardHome(key); home != order[0] {
		t.Fatalf("ShardHome = %s, the ring built alone says %s", home, order[0])
	}
	// The home hangs on "block"; the others answer it at once (their
	// release is closed).
	for _, s := range servers {
		if s.ch.HostPort() != order[0] {
			s.unblock()
		}
	}
	var info CallInfo
	if _, err := to(client, "kv").CallRaw(ctxTimeout(t), "echo", nil, []byte("block"), WithShardKey(key), ReportCallInfo(&info)); err != nil {
		t.Fatal(err)
	}
	if info.Peer != order[1] || len(info.Peers) != 2 || info.Peers[0] != order[0] {
		t.Fatalf("CallInfo %+v: want the first attempt on the home %s and the winning hedge on the next on the ring, %s", info, order[0], order[1])
	}
	// Both attempts claimed their peers; the cancelled one gives its claim
	// back when it ends, after the call has returned.
	testwait.Until(t, "every peer's pending calls back to 0", func() bool {
		for _, p := range to(client, "kv").Peers() {
			if p.Pending != 0 {
				return false
			}
		}
		return true
	})
}
