package channel

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/tchconn"
	"github.com/sluice-rpc/sluice/internal/tframe"
	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/raw"
)

// rateUtilisation is an honest server's utilisation for a server of
// capacity calls a second: its requests a second since it was last asked,
// over capacity.
type rateUtilisation struct {
	s        *testServer
	capacity float64
	calls    atomic.Int64 // times asked

	mu   sync.Mutex
	last int64
	at   time.Time
}

func (r *rateUtilisation) get() float64 {
	r.calls.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	now, n := time.Now(), r.s.received.Load()
	el := now.Sub(r.at).Seconds()
	u := float64(n-r.last) / el / r.capacity
	r.last, r.at = n, now
	return u
}

// reportingServer starts a test server that reports its utilisation as a
// server of capacity calls a second would (0: it reports no load at all,
// a liar).
func reportingServer(t *testing.T, capacity float64) (*testServer, *rateUtilisation) {
	r := &rateUtilisation{capacity: capacity, at: time.Now()}
	fn := r.get
	if capacity == 0 {
		fn = func() float64 { r.calls.Add(1); return 0 }
	}
	s := startServer(t, WithUtilisation(fn))
	r.s = s
	return s, r
}

// echo makes one echo call through kv, under a deadline of its own: a
// loop of calls sharing one deadline would time the loop, and fail on a
// loaded machine.
func echo(kv *Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := kv.CallRaw(ctx, "echo", nil, []byte("x"))
	return err
}

// plainEchoCall is echo through a plain tchannel-go channel to hostPort.
func plainEchoCall(plain *tchannel.Channel, hostPort string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, got, _, err := raw.Call(ctx, plain, hostPort, "kv", "echo", nil, []byte("x"))
	return got, err
}

// callUntil makes echo calls through client until cond holds, at most max
// calls, and fails the test if it never does.
func callUntil(t *testing.T, client *Channel, max int, what string, cond func() bool) {
	t.Helper()
	for range max {
		if cond() {
			return
		}
		if err := echo(to(client, "kv")); err != nil {
			t.Fatal(err)
		}
	}
	if !cond() {
		t.Fatalf("after %d calls, still not %s", max, what)
	}
}

// A Sluice client's peer takes its Sluice server's load reports: the
// server's utilisation and rate give the peer a capacity estimate.
func TestLoadReportsReachSluiceClient(t *testing.T) {
	srv, util := reportingServer(t, 1000)
	client, err := New("client")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	if err := to(client, "kv").AddPeer(srv.ch.HostPort()); err != nil {
		t.Fatal(err)
	}
	p := func() bool { _, ok := to(client, "kv").list.Get(srv.ch.HostPort()).Capacity(); return ok }
	callUntil(t, client, 100_000, "a load report at the client's peer", p)
	if util.calls.Load() == 0 {
		t.Error("the server's utilisation was never asked for, yet the client has a report")
	}
	c, _ := to(client, "kv").list.Get(srv.ch.HostPort()).Capacity()
	// The server reports utilisation = rate / 1000: its capacity is 1000
	// calls a second, whatever its rate, within rounding (thousandths of
	// utilisation at a low rate) and the windows' mismatch.
	if c < 500 || c > 2000 {
		t.Errorf("capacity estimate %.0f calls/s, want about 1000 (the server's rate over its utilisation)", c)
	}
}

// A server that reports no load at all (utilisation 0, forever) draws at
// most MaxLoadFactor times the median peer's weight: with two honest
// servers of equal capacity, at most 4 / (4 + 1 + 1) of the calls; and
// the reports do move shares (it draws more than half).
func TestLoadReportsLyingServerBounded(t *testing.T) {
	liar, _ := reportingServer(t, 0)
	a, _ := reportingServer(t, 1000)
	b, _ := reportingServer(t, 1000)
	client, err := New("client")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	servers := []*testServer{liar, a, b}
	for _, s := range servers {
		if err := to(client, "kv").AddPeer(s.ch.HostPort()); err != nil {
			t.Fatal(err)
		}
	}
	waitAllReady(t, client, servers)
	l := to(client, "kv").list
	all := func() bool {
		for _, s := range servers {
			if _, ok := l.Get(s.ch.HostPort()).Capacity(); !ok {
				return false
			}
		}
		return true
	}
	callUntil(t, client, 100_000, "a load report from every server", all)
	before := liar.received.Load() + a.received.Load() + b.received.Load()
	liarBefore := liar.received.Load()
	const n = 3000
	for range n {
		if err := echo(to(client, "kv")); err != nil {
			t.Fatal(err)
		}
	}
	total := liar.received.Load() + a.received.Load() + b.received.Load() - before
	share := float64(liar.received.Load()-liarBefore) / float64(total)
	// Sequential calls: nothing pending, the lottery splits by weight.
	// Binomial sd over 3000 calls is 0.9 points.
	if share > 4.0/6+0.04 {
		t.Errorf("the lying server drew %.1f%% of the calls, over the bound of 4/6 (66.7%%)", 100*share)
	}
	if share < 0.55 {
		t.Errorf("the lying server drew %.1f%% of the calls: its reports did not move its share (want about 66.7%%)", 100*share)
	}
	if f := l.Get(liar.ch.HostPort()).LoadFactor(); f > 4 {
		t.Errorf("the liar's load factor is %v, above MaxLoadFactor", f)
	}
}

// echoRaw is a plain tchannel-go server's echo.
type echoRaw struct{ n *atomic.Int64 }

func (h echoRaw) Handle(ctx context.Context, args *raw.Args) (*raw.Res, error) {
	h.n.Add(1)
	return &raw.Res{Arg3: args.Arg3}, nil
}

func (echoRaw) OnError(context.Context, error) {}

// A plain tchannel-go server sends no reports: beside reporting Sluice
// servers its peer stays neutral (load factor 1, as every peer is
// without reports), so it is balanced by today's rules, while the
// reporting servers' factors follow their capacities (3 to 1).
func TestLoadReportsPlainServerBalancedAsToday(t *testing.T) {
	small, _ := reportingServer(t, 1000)
	big, _ := reportingServer(t, 3000)
	plain, err := tchannel.NewChannel("kv", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plain.Close)
	var plainN atomic.Int64
	plain.Register(raw.Wrap(echoRaw{&plainN}), "echo")
	if err := plain.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	client, err := New("client")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	l := to(client, "kv").list
	for _, hp := range []string{small.ch.HostPort(), big.ch.HostPort(), plain.PeerInfo().HostPort} {
		if err := to(client, "kv").AddPeer(hp); err != nil {
			t.Fatal(err)
		}
	}
	waitAllReady(t, client, []*testServer{small, big})
	reported := func(s *testServer) bool { _, ok := l.Get(s.ch.HostPort()).Capacity(); return ok }
	callUntil(t, client, 100_000, "load reports from both Sluice servers", func() bool { return reported(small) && reported(big) })
	// A few more reports, for the estimates to settle.
	for range 3 {
		at := time.Now()
		callUntil(t, client, 100_000, "another report interval", func() bool { return time.Since(at) > loadInterval })
	}
	pp := l.Get(plain.PeerInfo().HostPort)
	if _, ok := pp.Capacity(); ok || pp.LoadFactor() != 1 {
		t.Fatalf("the plain server's peer has a capacity estimate, or factor %v; want none and 1", pp.LoadFactor())
	}
	if plainN.Load() == 0 {
		t.Error("the plain server took no calls")
	}
	fs, fb := l.Get(small.ch.HostPort()).LoadFactor(), l.Get(big.ch.HostPort()).LoadFactor()
	if r := fb / fs; r < 2 || r > 4.5 {
		t.Errorf("load factors %.2f (capacity 1000) and %.2f (3000): ratio %.2f, want about 3", fs, fb, r)
	}
}

// A plain tchannel-go client calling a Sluice server that reports load
// works as today: its connection carries no signal frame (tchannel-go
// would close it on an unknown frame type), and the server is never even
// asked for its utilisation for it; a Sluice client's connection to the
// same server gets reports.
func TestLoadReportsNotSentToPlainClient(t *testing.T) {
	srv, util := reportingServer(t, 1000)
	plain, err := tchannel.NewChannel("plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plain.Close)
	start := time.Now()
	calls := 0
	// Longer than loadInterval, and many times loadEvery answers: a report
	// would be due on a signalled connection.
	for time.Since(start) < 3*loadInterval || calls < 200 {
		got, err := plainEchoCall(plain, srv.ch.HostPort())
		if err != nil {
			t.Fatalf("plain call %d: %v", calls, err)
		}
		if string(got) != "x" {
			t.Fatalf("plain call %d answered %q, want x", calls, got)
		}
		calls++
	}
	if n := util.calls.Load(); n != 0 {
		t.Errorf("the server made %d load reports for a plain client's connection, want none", n)
	}
	client, err := New("client")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	if err := to(client, "kv").AddPeer(srv.ch.HostPort()); err != nil {
		t.Fatal(err)
	}
	callUntil(t, client, 100_000, "a load report at the Sluice client", func() bool {
		_, ok := to(client, "kv").list.Get(srv.ch.HostPort()).Capacity()
		return ok
	})
	// The plain client goes on as before.
	if _, err := plainEchoCall(plain, srv.ch.HostPort()); err != nil {
		t.Fatalf("plain call after the Sluice client's reports: %v", err)
	}
}

// reportedQPS returns the rate in the server's load report made now,
// after at least loadInterval of calls made by call.
func reportedQPS(t *testing.T, s *testServer, call func() error) int64 {
	t.Helper()
	start := time.Now()
	for time.Since(start) <= loadInterval {
		if err := call(); err != nil {
			t.Fatal(err)
		}
	}
	_, f := s.ch.loads.report()
	var l tchconn.Load
	tframe.SignalPairs(f[tframe.HeaderSize:], func(k, v []byte) { tchconn.ReadLoadPair(&l, k, v) })
	return l.QPS
}

// A load report's rate counts the calls served, not those answered Busy:
// a server shedding must not look like one that serves more.
func TestLoadReportsRateLeavesOutBusy(t *testing.T) {
	srv, _ := reportingServer(t, 1000)
	plain, err := tchannel.NewChannel("plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plain.Close)
	call := func() error {
		_, err := plainEchoCall(plain, srv.ch.HostPort())
		return err
	}
	srv.busy.Store(true)
	busy := func() error {
		if err := call(); tchannel.GetSystemErrorCode(err) != tchannel.ErrCodeBusy {
			return fmt.Errorf("a call to the busy server: %v, want Busy", err)
		}
		return nil
	}
	if q := reportedQPS(t, srv, busy); q != 0 {
		t.Errorf("a server answering every call Busy reported %d calls a second, want 0", q)
	}
	srv.busy.Store(false)
	if q := reportedQPS(t, srv, call); q <= 0 {
		t.Errorf("a server serving every call reported %d calls a second, want more than 0", q)
	}
}
