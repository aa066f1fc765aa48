package peerlist

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/busy"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/balancing"
	"github.com/sluice-rpc/sluice/peer"
)

func newList(t testing.TB, ceiling float64, hostPorts ...string) (*List, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	l, err := New(Config{Service: "kv", Busy: busy.Config{Ceiling: ceiling}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	for _, hp := range hostPorts {
		if _, err := l.Add(hp); err != nil {
			t.Fatal(err)
		}
	}
	return l, clk
}

func hp(i int) string { return fmt.Sprintf("127.0.0.1:%d", 4000+i) }

// A Config's busy limiters run on its own clock: a Busy.Clock that is
// another is refused, as is an invalid Busy, each error naming the field;
// the List's own clock on Busy is accepted.
func TestListConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		cfg  Config
		want string
	}{
		{Config{Busy: busy.Config{Clock: clock.NewFake(time.Unix(0, 0))}}, "peerlist: Config.Busy.Clock is *clock.Fake, must be nil or Config.Clock"},
		{Config{Busy: busy.Config{MaxHalvings: -1}}, "peerlist: Config.Busy.MaxHalvings is -1"},
	} {
		if _, err := New(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%+v) = %v, want %q", tt.cfg, err, tt.want)
		}
	}
	l, err := New(Config{})
	if err != nil {
		t.Fatalf("New(Config{}): %v", err)
	}
	p, err := l.Add("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Limiter().Config().Ceiling; got != busy.DefaultCeiling {
		t.Errorf("a zero Config's limiter has ceiling %v, want %v", got, busy.DefaultCeiling)
	}
	clk := clock.NewFake(time.Unix(0, 0))
	if _, err := New(Config{Clock: clk, Busy: busy.Config{Clock: clk}}); err != nil {
		t.Errorf("NewList with the List's clock on Busy too: %v", err)
	}
	if _, err := New(Config{Busy: busy.Config{Clock: clock.Real}}); err != nil {
		t.Errorf("NewList with clock.Real on Busy and no Clock (clock.Real): %v", err)
	}
}

func TestChooseEmptyList(t *testing.T) {
	l, _ := newList(t, 100)
	if _, err := l.Choose(nil); !errors.Is(err, peer.ErrNoPeers) {
		t.Fatalf("err = %v, want ErrNoPeers", err)
	}
}

func TestChoosePrefersFewestPendingThenLatency(t *testing.T) {
	l, clk := newList(t, 1000, hp(0), hp(1), hp(2))
	a, b, c := l.Get(hp(0)), l.Get(hp(1)), l.Get(hp(2))
	a.Begin()
	a.Begin()
	b.Begin()
	c.Begin()
	for i := 0; i < minLatencySamples; i++ { // enough samples for the estimates to count
		b.Begin()
		c.Begin()
		b.End(clk.Now(), 5*time.Millisecond, codes.OK) // b: 0 pending, slow
		c.End(clk.Now(), time.Millisecond, codes.OK)   // c: 0 pending, fast
	}
	for i := 0; i < 20; i++ {
		p, err := l.Choose(nil)
		if err != nil {
			t.Fatal(err)
		}
		if p != c {
			t.Fatalf("chose %s, want the idle fast peer %s", p.HostPort(), c.HostPort())
		}
	}
	// Exclude c: b is next (no pending), not a (two pending).
	if p, _ := l.Choose([]*Peer{c}); p != b {
		t.Fatalf("with c excluded chose %s, want %s", p.HostPort(), b.HostPort())
	}
}

// A peer whose latency stands far above the others' gets no calls but a
// probe every balancing.ProbeInterval, and takes its share again once a probe shows it
// recovered, even when the others' estimates have gone stale meanwhile.
func TestSlowPeerIsProbed(t *testing.T) {
	l, clk := newList(t, 1e6, hp(0), hp(1))
	slow, fast := l.Get(hp(0)), l.Get(hp(1))
	for i := 0; i < minLatencySamples; i++ {
		slow.Begin()
		fast.Begin()
		slow.End(clk.Now(), 50*time.Millisecond, codes.OK)
		fast.End(clk.Now(), time.Millisecond, codes.OK)
	}
	count := func(n int) (probes int, last *Peer) {
		for i := 0; i < n; i++ {
			p, err := l.Choose(nil)
			if err != nil {
				t.Fatal(err)
			}
			if p == slow {
				probes++
				last = p
			}
		}
		return probes, last
	}
	if got, _ := count(200); got != 0 {
		t.Fatalf("a fresh 50x latency difference: the slow peer got %d of 200 calls, want 0", got)
	}
	if !slow.Counts().Slow {
		t.Fatal("Counts().Slow is false for the 50x peer")
	}
	clk.Add(latencyTTL + time.Millisecond) // every estimate stale
	if got, _ := count(200); got != 0 {
		t.Fatalf("after the estimates went stale, before a probe is due, the slow peer got %d of 200, want 0", got)
	}
	clk.Add(time.Duration(balancing.ProbeInterval))
	got, probe := count(200)
	if got != 1 {
		t.Fatalf("with its probe due, the slow peer got %d of 200 calls, want 1", got)
	}
	// Still slow: no more until the next probe.
	probe.Begin()
	probe.End(clk.Now(), 60*time.Millisecond, codes.OK)
	if got, _ := count(200); got != 0 || !slow.Counts().Slow {
		t.Fatalf("after a slow probe the peer got %d of 200 (slow: %v), want 0 (true)", got, slow.Counts().Slow)
	}
	// Recovered: the next probe is fast, and the peer ties again.
	clk.Add(time.Duration(balancing.ProbeInterval))
	if got, probe = count(200); got != 1 {
		t.Fatalf("with its second probe due, the slow peer got %d of 200, want 1", got)
	}
	probe.Begin()
	probe.End(clk.Now(), time.Millisecond, codes.OK)
	if got, _ := count(200); got < 50 || slow.Counts().Slow {
		t.Fatalf("after a fast probe the recovered peer got %d of 200 (slow: %v), want >= 50 (false)", got, slow.Counts().Slow)
	}
}

// One slow call does not make a peer look slow.
func TestOneSampleDoesNotSteerChoice(t *testing.T) {
	l, clk := newList(t, 1e6, hp(0), hp(1))
	slow, fast := l.Get(hp(0)), l.Get(hp(1))
	slow.Begin()
	slow.End(clk.Now(), 50*time.Millisecond, codes.OK)
	for i := 0; i < minLatencySamples; i++ {
		fast.Begin()
		fast.End(clk.Now(), time.Millisecond, codes.OK)
	}
	seen := 0
	for i := 0; i < 200; i++ {
		if p, _ := l.Choose(nil); p == slow {
			seen++
		}
	}
	if seen < 50 {
		t.Fatalf("a peer with one slow sample got %d of 200", seen)
	}
}

func TestChooseSpreadsTiesAcrossPeers(t *testing.T) {
	l, _ := newList(t, 1e6, hp(0), hp(1), hp(2))
	seen := map[string]int{}
	for i := 0; i < 300; i++ {
		p, err := l.Choose(nil)
		if err != nil {
			t.Fatal(err)
		}
		seen[p.HostPort()]++
	}
	for _, p := range l.Peers() {
		if seen[p.HostPort()] < 50 {
			t.Fatalf("ties not spread: %v", seen)
		}
	}
}

func TestChooseSkipsThrottledPeer(t *testing.T) {
	l, _ := newList(t, 1, hp(0), hp(1)) // each peer allows 1 request per second
	first, err := l.Choose(nil)
	if err != nil {
		t.Fatal(err)
	}
	// The best peer is now out of quota for this second: the same request
	// goes to the other even though nothing excludes the first.
	second, err := l.Choose(nil)
	if err != nil {
		t.Fatal(err)
	}
	if second == first {
		t.Fatalf("chose the refusing peer %s twice", first.HostPort())
	}
	if _, err := l.Choose(nil); !errors.Is(err, peer.ErrThrottled) {
		t.Fatalf("err = %v, want ErrThrottled once every peer refuses", err)
	}
	total := first.Counts().Throttled + second.Counts().Throttled
	if total < 2 {
		t.Fatalf("refusals counted %d, want at least one per peer", total)
	}
}

func TestChooseReusesExcludedPeerOnlyWhenNoOtherAllows(t *testing.T) {
	l, _ := newList(t, 1, hp(0), hp(1))
	a, b := l.Get(hp(0)), l.Get(hp(1))
	// b has spent its one request; a is excluded but still allows.
	if !b.Limiter().Allow() {
		t.Fatal("setup: b refused its first request")
	}
	p, err := l.Choose([]*Peer{a})
	if err != nil {
		t.Fatal(err)
	}
	if p != a {
		t.Fatalf("chose %s, want the excluded but allowing %s", p.HostPort(), a.HostPort())
	}
}

func TestChooseRecoversAfterWindow(t *testing.T) {
	l, clk := newList(t, 1, hp(0))
	if _, err := l.Choose(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Choose(nil); !errors.Is(err, peer.ErrThrottled) {
		t.Fatalf("err = %v, want ErrThrottled", err)
	}
	clk.Add(time.Second)
	if _, err := l.Choose(nil); err != nil {
		t.Fatalf("a new window must allow again: %v", err)
	}
}

func TestEndRecordsBusyOnTheLimiter(t *testing.T) {
	l, clk := newList(t, busy.DefaultCeiling, hp(0))
	p := l.Get(hp(0))
	for i := 0; i < 3000; i++ {
		p.Begin()
		p.End(clk.Now(), time.Millisecond, codes.Busy)
	}
	clk.Add(time.Second)
	c := p.Counts()
	if c.Busy != 3000 || c.Sent != 3000 || c.Pending != 0 {
		t.Fatalf("counts = %+v", c)
	}
	if int(c.Limit) != 38 {
		t.Fatalf("limit after 3000 busy = %v, want 38", c.Limit)
	}
}

func TestLargeListUsesTwoChoicesAndHonoursExclusion(t *testing.T) {
	var hps []string
	for i := 0; i < 20; i++ {
		hps = append(hps, hp(i))
	}
	l, _ := newList(t, 1e6, hps...)
	exclude := l.Peers()[:19]
	for i := 0; i < 100; i++ {
		p, err := l.Choose(exclude)
		if err != nil {
			t.Fatal(err)
		}
		if p != l.Peers()[19] {
			t.Fatalf("chose excluded %s while %s was free", p.HostPort(), l.Peers()[19].HostPort())
		}
	}
	// Busy peers (many pending) are chosen less often than idle ones.
	for _, p := range l.Peers()[:10] {
		for j := 0; j < 5; j++ {
			p.Begin()
		}
	}
	loaded := 0
	for i := 0; i < 1000; i++ {
		p, _ := l.Choose(nil)
		if p.Pending() > 0 {
			loaded++
		}
	}
	if loaded > 350 { // p2c picks a loaded peer only when both draws are loaded: ~25%
		t.Fatalf("loaded peers chosen %d/1000 times", loaded)
	}
}

func TestAddRemoveWhileChoosing(t *testing.T) {
	l, _ := newList(t, 1e6, hp(0))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			p, err := l.Choose(nil)
			if err == nil {
				p.Begin()
				p.End(time.Time{}, time.Microsecond, codes.OK)
			}
		}
	}()
	for i := 1; i < 200; i++ {
		if _, err := l.Add(hp(i)); err != nil {
			t.Error(err)
		}
		if i%2 == 0 {
			if err := l.Remove(hp(i - 1)); err != nil {
				t.Error(err)
			}
		}
	}
	close(stop)
	wg.Wait()
	if err := l.Remove("127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "not a peer") {
		t.Fatalf("removing an unknown peer: %v", err)
	}
	if p, _ := l.Add(hp(199)); p != l.Get(hp(199)) {
		t.Fatal("adding a present peer must return the existing one")
	}
}

func BenchmarkChoose3(b *testing.B) {
	l, _ := newList(b, 1e9, hp(0), hp(1), hp(2))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := l.Choose(nil); err != nil {
			b.Fatal(err)
		}
	}
}

func TestLargeListAllThrottledFailsAndCountsEachPeerOnce(t *testing.T) {
	var hps []string
	for i := 0; i < 30; i++ {
		hps = append(hps, hp(i))
	}
	l, _ := newList(t, 1, hps...)
	for i := 0; i < 30; i++ { // each peer allows one request this second
		if _, err := l.Choose(nil); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	before := map[string]uint64{}
	for _, p := range l.Peers() {
		before[p.HostPort()] = p.Counts().Throttled
	}
	if _, err := l.Choose(nil); !errors.Is(err, peer.ErrThrottled) {
		t.Fatalf("err = %v, want ErrThrottled", err)
	}
	for _, p := range l.Peers() {
		if d := p.Counts().Throttled - before[p.HostPort()]; d != 1 {
			t.Fatalf("%s refused the one request %d times", p.HostPort(), d)
		}
	}
}

func BenchmarkChoose20(b *testing.B) {
	var hps []string
	for i := 0; i < 20; i++ {
		hps = append(hps, hp(i))
	}
	l, _ := newList(b, 1e9, hps...)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := l.Choose(nil); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPushbackRestsThePeer: a Busy answer with a pushback hint rests the
// peer for the hinted time, leaving its busy limit alone, and the other
// peer takes the requests meanwhile.
func TestPushbackRestsThePeer(t *testing.T) {
	l, clk := newList(t, busy.DefaultCeiling, hp(0), hp(1))
	a, b := l.Get(hp(0)), l.Get(hp(1))
	for i := 0; i < 3000; i++ {
		a.Begin()
		a.EndPushedBack(clk.Now(), time.Millisecond, 20*time.Millisecond)
	}
	for i := 0; i < 10; i++ {
		p, err := l.Choose(nil)
		if err != nil || p != b {
			t.Fatalf("choice %d while %s rests: %v, %v; want %s", i, a.HostPort(), p, err, b.HostPort())
		}
	}
	if _, err := l.Choose([]*Peer{b}); err != nil {
		t.Fatalf("excluding the other peer: %v", err) // b is reused: a rests
	}
	l.Remove(hp(1))
	if _, err := l.Choose(nil); !errors.Is(err, peer.ErrThrottled) {
		t.Fatalf("with only the resting peer: err = %v, want ErrThrottled", err)
	}
	clk.Add(20 * time.Millisecond)
	if p, err := l.Choose(nil); err != nil || p != a {
		t.Fatalf("after the pushback: %v, %v; want %s", p, err, a.HostPort())
	}
	clk.Add(time.Second)
	if c := a.Counts(); c.Busy != 3000 || c.Limit != busy.DefaultCeiling {
		t.Fatalf("counts = %+v; want 3000 busy and the limit untouched", c)
	}
}

// TestPushbackHoldsThePendingLevel: a peer pushed back with calls still
// pending keeps taking calls, but no more at once than it had pending when
// the server refused; a further refusal lowers that level, and the hint's
// end lifts it.
func TestPushbackHoldsThePendingLevel(t *testing.T) {
	l, clk := newList(t, busy.DefaultCeiling, hp(0))
	a := l.Get(hp(0))
	for range 5 {
		a.Begin()
	}
	a.EndPushedBack(clk.Now(), time.Millisecond, 20*time.Millisecond) // 4 pending: the level
	if _, err := l.Choose(nil); !errors.Is(err, peer.ErrThrottled) {
		t.Fatalf("at the level (4 pending): err = %v, want ErrThrottled", err)
	}
	a.End(clk.Now(), time.Millisecond, codes.OK) // 3 pending: room for one
	p, err := l.Choose(nil)
	if err != nil || p != a {
		t.Fatalf("below the level: %v, %v; want %s", p, err, a.HostPort())
	}
	a.Begin()
	if _, err := l.Choose(nil); !errors.Is(err, peer.ErrThrottled) {
		t.Fatalf("back at the level: err = %v, want ErrThrottled", err)
	}
	clk.Add(10 * time.Millisecond)
	a.EndPushedBack(clk.Now(), time.Millisecond, 20*time.Millisecond) // level 3
	a.End(clk.Now(), time.Millisecond, codes.OK)                      // 2 pending
	if _, err := l.Choose(nil); err != nil {
		t.Fatalf("below the lowered level: %v", err)
	}
	a.Begin()
	if _, err := l.Choose(nil); !errors.Is(err, peer.ErrThrottled) {
		t.Fatalf("at the lowered level (3 pending): err = %v, want ErrThrottled", err)
	}
	clk.Add(20 * time.Millisecond)
	for i := range 10 {
		if _, err := l.Choose(nil); err != nil {
			t.Fatalf("choice %d after the hint: %v", i, err)
		}
		a.Begin()
	}
}

// TestPushbackWithThrottlingDisabled: with busy throttling disabled,
// neither halving nor pushback keeps a peer from being chosen.
func TestPushbackWithThrottlingDisabled(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	l, err := New(Config{Service: "kv", Busy: busy.Config{Disabled: true}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := l.Add(hp(0))
	for i := 0; i < 100; i++ {
		a.Begin()
		a.EndPushedBack(clk.Now(), time.Millisecond, time.Second)
		a.Begin()
		a.End(clk.Now(), time.Millisecond, codes.Busy)
	}
	clk.Add(time.Second)
	for i := 0; i < 1000; i++ {
		if _, err := l.Choose(nil); err != nil {
			t.Fatalf("choice %d: %v", i, err)
		}
	}
}

// TestPushbackRestIsBounded: a peer rests at most one busy window, however
// long the hint.
func TestPushbackRestIsBounded(t *testing.T) {
	l, clk := newList(t, busy.DefaultCeiling, hp(0))
	a := l.Get(hp(0))
	a.Begin()
	a.EndPushedBack(clk.Now(), time.Millisecond, time.Hour)
	clk.Add(busy.DefaultWindow - time.Millisecond)
	if _, err := l.Choose(nil); !errors.Is(err, peer.ErrThrottled) {
		t.Fatalf("within the window: err = %v, want ErrThrottled", err)
	}
	clk.Add(time.Millisecond)
	if _, err := l.Choose(nil); err != nil {
		t.Fatalf("after one window: %v", err)
	}
}

// Add refuses an address peer.ValidateHostPort refuses, naming it.
func TestAddValidatesTheHostPort(t *testing.T) {
	l, _ := newList(t, 1)
	if _, err := l.Add("nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("Add with a bad address: %v", err)
	}
}
