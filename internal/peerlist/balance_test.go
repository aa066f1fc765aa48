package peerlist

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/balance"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/balancing"
	"github.com/sluice-rpc/sluice/peer"
)

// newBalancedList is newList with a balancing config, its peers set with
// weights.
func newBalancedList(t testing.TB, bal balance.Config, weights ...float64) (*List, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	l, err := New(Config{Service: "kv", Clock: clk, Balance: bal})
	if err != nil {
		t.Fatal(err)
	}
	var ms []peer.Member
	for i, w := range weights {
		ms = append(ms, peer.Member{HostPort: hp(i), Weight: w})
	}
	if err := l.Set(ms); err != nil {
		t.Fatal(err)
	}
	return l, clk
}

// shares chooses n times, each attempt ending at once, and returns each
// peer's share of the choices.
func shares(t *testing.T, l *List, n int) map[string]float64 {
	t.Helper()
	got := map[string]float64{}
	for i := 0; i < n; i++ {
		p, err := l.Choose(nil)
		if err != nil {
			t.Fatal(err)
		}
		got[p.HostPort()] += 1 / float64(n)
	}
	return got
}

// Weights split calls in proportion under light load (nothing pending),
// on a short list (lottery) and on a long one (weighted draw of two).
func TestWeightsSplitCalls(t *testing.T) {
	for _, weights := range [][]float64{{1, 2, 4}, {1, 2, 4, 1, 2, 4, 1, 2, 4, 1}} {
		t.Run(fmt.Sprint(len(weights)), func(t *testing.T) {
			l, _ := newBalancedList(t, balance.Config{}, weights...)
			total := 0.0
			for _, w := range weights {
				total += w
			}
			got := shares(t, l, 20000)
			for i, w := range weights {
				if want := w / total; math.Abs(got[hp(i)]-want) > 0.02 {
					t.Errorf("peer %d of weight %v got %.3f of calls, want %.3f +- 0.02", i, w, got[hp(i)], want)
				}
			}
		})
	}
}

// With unequal weights, pending calls still count, per unit of weight:
// weights 1 and 4 are 0.4 and 1.6 of their mean; a peer's rate is w / (1 +
// pending / w), 0.4 for the idle light one and 1.6 / (1 + 7 / 1.6) for the
// heavy one with 7 pending: the light one gets 57% of the calls.
func TestWeightsCountPending(t *testing.T) {
	l, _ := newBalancedList(t, balance.Config{}, 1, 4)
	heavy := l.Get(hp(1))
	for i := 0; i < 7; i++ {
		heavy.Begin()
	}
	got := shares(t, l, 20000)
	light, loaded := 0.4, 1.6/(1+7/1.6)
	if want := light / (light + loaded); math.Abs(got[hp(0)]-want) > 0.02 {
		t.Errorf("the idle weight-1 peer got %.3f of calls against a weight-4 peer with 7 pending, want %.3f", got[hp(0)], want)
	}
}

// Slow start: a peer added while the list serves ramps from 10% of its
// weight to all of it over the window, linearly at aggression 1; peers
// added together do not ramp.
func TestSlowStartRamps(t *testing.T) {
	l, clk := newBalancedList(t, balance.Config{}, 1, 1)
	for _, p := range l.Peers() {
		if c := p.Counts(); c.Effective != 1 {
			t.Fatalf("%s, added with the first peers, has effective weight %v, want 1", c.HostPort, c.Effective)
		}
	}
	clk.Add(time.Minute)
	if err := l.Set([]peer.Member{{HostPort: hp(0)}, {HostPort: hp(1)}, {HostPort: hp(2)}}); err != nil {
		t.Fatal(err)
	}
	fresh := l.Get(hp(2))
	for _, tt := range []struct {
		at         time.Duration
		factor     float64
		shareOfNew float64 // factor / (2 + factor)
	}{
		{0, 0.1, 0.1 / 2.1},
		{5 * time.Second, 0.5, 0.5 / 2.5},
		{9 * time.Second, 0.9, 0.9 / 2.9},
		{10 * time.Second, 1, 1.0 / 3},
	} {
		clk.Add(time.Unix(1_700_000_000, 0).Add(time.Minute + tt.at).Sub(clk.Now()))
		if c := fresh.Counts(); math.Abs(c.Effective-tt.factor) > 1e-9 {
			t.Errorf("at %v the new peer's effective weight is %v, want %v", tt.at, c.Effective, tt.factor)
		}
		if got := shares(t, l, 20000)[hp(2)]; math.Abs(got-tt.shareOfNew) > 0.02 {
			t.Errorf("at %v the new peer got %.3f of calls, want %.3f", tt.at, got, tt.shareOfNew)
		}
	}
}

// Ejection: five UNEXPECTED or NETWORK answers in a row eject a peer for
// the base time; an answer of another kind breaks the run; a peer ejected
// again soon after it returns stays out twice as long; BUSY and timeouts
// do not count.
func TestEjection(t *testing.T) {
	l, clk := newBalancedList(t, balance.Config{Ejection: balance.Ejection{MaxPercent: 50}}, 1, 1)
	bad, good := l.Get(hp(0)), l.Get(hp(1))
	fail := func(p *Peer, n int, code codes.Code) {
		for i := 0; i < n; i++ {
			p.Begin()
			p.End(clk.Now(), time.Millisecond, code)
		}
	}
	fail(bad, 4, codes.Unexpected)
	fail(bad, 1, codes.OK)
	fail(bad, 4, codes.Network)
	fail(bad, 3, codes.Busy)
	fail(bad, 3, codes.Timeout)
	if ej, _ := bad.Ejected(clk.Now()); ej {
		t.Fatal("ejected after runs of 4 broken by an OK and by BUSY answers")
	}
	fail(bad, 5, codes.Unexpected)
	ej, until := bad.Ejected(clk.Now())
	if !ej || until.Sub(clk.Now()) != balance.DefaultBaseEjectionTime {
		t.Fatalf("after 5 UNEXPECTED: ejected %v until %v from now, want true, %v", ej, until.Sub(clk.Now()), balance.DefaultBaseEjectionTime)
	}
	for i := 0; i < 100; i++ {
		if p, _ := l.Choose(nil); p != good {
			t.Fatal("chose the ejected peer")
		}
	}
	clk.Add(until.Sub(clk.Now()))
	if ej, _ := bad.Ejected(clk.Now()); ej {
		t.Fatal("still ejected when its time is up")
	}
	fail(bad, 5, codes.Network) // at once: the second ejection is twice as long
	if _, until := bad.Ejected(clk.Now()); until.Sub(clk.Now()) != 2*balance.DefaultBaseEjectionTime {
		t.Fatalf("second ejection lasts %v, want %v", until.Sub(clk.Now()), 2*balance.DefaultBaseEjectionTime)
	}
	if c := bad.Counts(); c.Ejections != 2 || c.Ejected.IsZero() {
		t.Fatalf("Counts: %d ejections, ejected until %v; want 2 and a time", c.Ejections, c.Ejected)
	}
}

// At most MaxPercent of the peers (at least one) are ejected at once, and
// below the panic threshold of available peers ejections are ignored.
func TestEjectionCapAndPanic(t *testing.T) {
	l, clk := newBalancedList(t, balance.Config{}, 1, 1, 1, 1) // 10% of 4: one
	peers := l.Peers()
	for _, p := range peers[:3] {
		for i := 0; i < 5; i++ {
			p.Begin()
			p.End(clk.Now(), time.Millisecond, codes.Unexpected)
		}
	}
	ejected := 0
	for _, p := range peers {
		if ej, _ := p.Ejected(clk.Now()); ej {
			ejected++
		}
	}
	if ejected != 1 {
		t.Fatalf("%d of 4 peers ejected, want 1 (10%%, at least one)", ejected)
	}
	// 3 of 4 available: above 50%, the ejected one is left out.
	seen := map[*Peer]bool{}
	for i := 0; i < 400; i++ {
		p, _ := l.Choose(nil)
		seen[p] = true
	}
	if len(seen) != 3 || seen[peers[0]] {
		t.Fatalf("chose %d peers (the ejected one: %v), want the 3 others", len(seen), seen[peers[0]])
	}
	// Half of a list of 2 ejected is at the threshold; with 3 peers of 4
	// ejected by a cap of 75% only 1 of 4 is available, below 50%: every
	// peer is chosen again.
	l2, clk2 := newBalancedList(t, balance.Config{Ejection: balance.Ejection{MaxPercent: 75}}, 1, 1, 1, 1)
	for _, p := range l2.Peers()[:3] {
		for i := 0; i < 5; i++ {
			p.Begin()
			p.End(clk2.Now(), time.Millisecond, codes.Unexpected)
		}
	}
	seen = map[*Peer]bool{}
	for i := 0; i < 400; i++ {
		p, _ := l2.Choose(nil)
		seen[p] = true
	}
	if len(seen) != 4 {
		t.Fatalf("in panic (1 of 4 available) chose %d peers, want all 4", len(seen))
	}
}

// A shard key goes to its home; past the bounded load it spills to the
// next peer on the ring, as do the call's further attempts; a home that is
// connecting is waited for.
func TestChooseKey(t *testing.T) {
	l, _ := newBalancedList(t, balance.Config{}, 1, 1, 1, 1)
	const key = "user-42"
	home := l.Home(key)
	for i := 0; i < 20; i++ {
		p, err := l.ChooseKeyAt(key, nil, time.Now())
		if err != nil || p != home {
			t.Fatalf("ChooseKeyAt = %v, %v; want the home %s", p, err, home.HostPort())
		}
	}
	// Spill: with m calls in flight on the home alone, its capacity is
	// ceil(1.25 (m+1) / 4); at m = 2 that is 1, and the home has 2.
	home.Begin()
	home.Begin()
	next, err := l.ChooseKeyAt(key, nil, time.Now())
	if err != nil || next == home {
		t.Fatalf("over its bounded load the home was still chosen (%v)", err)
	}
	if again, _ := l.ChooseKeyAt(key, nil, time.Now()); again != next {
		t.Fatalf("the spill went to %s, then %s: want the same next peer on the ring", next.HostPort(), again.HostPort())
	}
	home.End(time.Now(), time.Millisecond, codes.OK)
	home.End(time.Now(), time.Millisecond, codes.OK)
	// A retry excludes the home: the next peer on the ring, then the one
	// after it.
	second, _ := l.ChooseKeyAt(key, []*Peer{home}, time.Now())
	third, _ := l.ChooseKeyAt(key, []*Peer{home, second}, time.Now())
	if second != next || third == home || third == second {
		t.Fatalf("retries went to %s then %s; want the ring's next distinct peers after %s (%s first)", second.HostPort(), third.HostPort(), home.HostPort(), next.HostPort())
	}
}

// Keys spread over the peers, and when 1 of 10 peers leaves only its keys
// move.
func TestKeysMoveOnlyFromTheLeavingPeer(t *testing.T) {
	l, _ := newBalancedList(t, balance.Config{}, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)
	const n = 20000
	before := make([]string, n)
	for i := range before {
		before[i] = l.Home(fmt.Sprint("key-", i)).HostPort()
	}
	var ms []peer.Member
	for i := 1; i < 10; i++ {
		ms = append(ms, peer.Member{HostPort: hp(i)})
	}
	if err := l.Set(ms); err != nil {
		t.Fatal(err)
	}
	moved := 0
	for i := range before {
		if after := l.Home(fmt.Sprint("key-", i)).HostPort(); after != before[i] {
			moved++
			if before[i] != hp(0) {
				t.Fatalf("key-%d moved from %s, which stayed, to %s", i, before[i], after)
			}
		}
	}
	if share := float64(moved) / n; share > 0.12 {
		t.Fatalf("%.1f%% of keys moved when 1 of 10 peers left, want <= 12%%", 100*share)
	}
}

func BenchmarkChooseWeighted(b *testing.B) {
	l, _ := newBalancedList(b, balance.Config{}, 1, 2, 4)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.ChooseAt(nil, now); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkChooseKey(b *testing.B) {
	l, _ := newBalancedList(b, balance.Config{}, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.ChooseKeyAt("user-42", nil, now); err != nil {
			b.Fatal(err)
		}
	}
}

// A peer whose every attempt is cut off by a winning hedge after 50 ms is
// still seen to be slow: an attempt cut off late raises the estimate.
func TestCancelledAttemptsRaiseTheEstimate(t *testing.T) {
	l, clk := newBalancedList(t, balance.Config{}, 1, 1)
	slow, fast := l.Get(hp(0)), l.Get(hp(1))
	for i := 0; i < minLatencySamples; i++ {
		slow.Begin()
		fast.Begin()
		slow.End(clk.Now(), 50*time.Millisecond, codes.Cancelled)
		fast.End(clk.Now(), time.Millisecond, codes.OK)
	}
	if p, _ := l.Choose(nil); p != fast || !slow.Counts().Slow {
		t.Fatalf("after 4 attempts cut off at 50 ms against 1 ms answers, slow: %v", slow.Counts().Slow)
	}
	// One cut off early lowers nothing.
	before := slow.Latency()
	slow.Begin()
	slow.End(clk.Now(), time.Microsecond, codes.Cancelled)
	if slow.Latency() != before {
		t.Fatalf("an attempt cancelled after 1µs moved the estimate from %v to %v", before, slow.Latency())
	}
}

// An early cut-off above the later ones does not stop the estimate: until
// it rests on enough samples, a cut-off below it is a sample too, and the
// peer is judged slow after as many attempts as without the outlier.
func TestAnEarlyOutlierDoesNotHideASlowPeer(t *testing.T) {
	l, clk := newBalancedList(t, balance.Config{}, 1, 1)
	slow, fast := l.Get(hp(0)), l.Get(hp(1))
	for i := 0; i < minLatencySamples; i++ {
		cut := 50 * time.Millisecond
		if i == 0 {
			cut = 58 * time.Millisecond // a scheduling delay
		}
		slow.Begin()
		fast.Begin()
		slow.End(clk.Now(), cut, codes.Cancelled)
		fast.End(clk.Now(), time.Millisecond, codes.OK)
	}
	if p, _ := l.Choose(nil); p != fast || !slow.Counts().Slow {
		t.Fatalf("after attempts cut off at 58 ms, then 50 ms, against 1 ms answers: slow %v, estimate %v", slow.Counts().Slow, slow.Latency())
	}
}

// The first samples weigh alike: one slow first call (a connection's
// first, under load or the race detector) among quick ones does not get a
// peer judged slow once the estimate counts. A peer answering 20 ms, then
// 1 ms three times, next to one answering 1 ms, is at their mean, 5.75 ms,
// within 5 ms of the other's, and not slow (an EWMA seeded with the 20 ms
// would stand at 13.7 ms). Past latencyWeight samples, each weighs 1/8.
func TestFirstSamplesWeighAlike(t *testing.T) {
	l, clk := newBalancedList(t, balance.Config{}, 1, 1)
	p, fast := l.Get(hp(0)), l.Get(hp(1))
	for i := range minLatencySamples {
		took := time.Millisecond
		if i == 0 {
			took = 20 * time.Millisecond
		}
		p.Begin()
		fast.Begin()
		p.End(clk.Now(), took, codes.OK)
		fast.End(clk.Now(), time.Millisecond, codes.OK)
	}
	if got := p.Latency(); got < 5750*time.Microsecond-10 || got > 5750*time.Microsecond+10 {
		t.Fatalf("after 20, 1, 1, 1 ms: estimate %v, want their mean, 5.75ms (to the rounding of 3 integer divisions)", got)
	}
	l.Choose(nil) // judges both
	if p.Counts().Slow {
		t.Fatal("a peer whose first call took 20 ms, then 1 ms, is judged slow")
	}
	for p.samples.Load() < latencyWeight {
		p.Begin()
		p.End(clk.Now(), time.Millisecond, codes.OK)
	}
	before := p.Latency()
	p.Begin()
	p.End(clk.Now(), 9*time.Millisecond+before, codes.OK)
	if want := before + (9*time.Millisecond)/8; p.Latency() != want {
		t.Errorf("a sample 9 ms above an estimate of %v past %d samples: estimate %v, want %v (weight 1/8)", before, latencyWeight, p.Latency(), want)
	}
}

// A cut-off below an estimate still short of its samples lowers nothing:
// a hedge cancelled 1 ms after it was sent says only that it took 1 ms at
// least. A 60 ms peer among 10 ms ones, with one answer and three such
// cancellations, is judged slow (lowered by them, its estimate fell to
// 40.6 ms, under 5x the others').
func TestEarlyCancellationsLowerNothing(t *testing.T) {
	l, clk := newBalancedList(t, balance.Config{}, 1, 1)
	slow, fast := l.Get(hp(0)), l.Get(hp(1))
	for i := 0; i < minLatencySamples; i++ {
		code, took := codes.Cancelled, time.Millisecond
		if i == 0 {
			code, took = codes.OK, 60*time.Millisecond
		}
		slow.Begin()
		fast.Begin()
		slow.End(clk.Now(), took, code)
		fast.End(clk.Now(), 10*time.Millisecond, codes.OK)
	}
	if p, _ := l.Choose(nil); p != fast || !slow.Counts().Slow {
		t.Fatalf("a 60 ms answer and three 1 ms cancellations against 10 ms answers: slow %v, estimate %v", slow.Counts().Slow, slow.Latency())
	}
}

// Weighted shares track capacity at every load: servers of 1, 2 and 4
// workers of a fixed service time, weighted 1, 2 and 4, under Poisson
// arrivals at 10% to 95% of their total capacity, simulated on the
// list's own choice (the clock is the simulation's). Each server's share
// of the calls stays within 3 points of its weight's share, on a short
// list and on a long one (the same servers four times over).
func TestWeightsTrackCapacityUnderLoad(t *testing.T) {
	for _, copies := range []int{1, 4} {
		for _, load := range []float64{0.1, 0.5, 0.8, 0.95} {
			var weights []float64
			for range copies {
				weights = append(weights, 1, 2, 4)
			}
			l, _ := newBalancedList(t, balance.Config{}, weights...)
			got := simulateWorkers(t, l, weights, load, 60000)
			for k, want := range []float64{1.0 / 7, 2.0 / 7, 4.0 / 7} {
				if math.Abs(got[k]-want) > 0.03 {
					t.Errorf("%d peers at %.0f%% load: the weight-%v servers got %.3f of the calls, want %.3f +- 0.03", len(weights), 100*load, []float64{1, 2, 4}[k], got[k], want)
				}
			}
		}
	}
}

// simulateWorkers offers n calls at load x the capacity of servers with
// weights[i] workers of 5 ms each, chosen by l, and returns the shares of
// the calls the servers of weight 1, 2 and 4 took.
func simulateWorkers(t *testing.T, l *List, weights []float64, load float64, n int) [3]float64 {
	t.Helper()
	const service = 5 * time.Millisecond
	type server struct {
		busy  int
		queue []time.Time // arrivals waiting
		done  []time.Time // completion times of calls in service
	}
	peers := l.Peers()
	servers := make([]server, len(peers))
	index := map[*Peer]int{}
	total := 0.0
	for i, p := range peers {
		index[p] = i
		total += weights[i]
	}
	rng := rand.New(rand.NewPCG(1, 2))
	rate := load * total / service.Seconds() // calls per second
	now := time.Unix(1_700_000_000, 0)
	var shares [3]float64
	// complete finishes every call done by now, in time order per server
	// (the order across servers does not matter to the counts).
	complete := func(now time.Time) {
		for i := range servers {
			s := &servers[i]
			for len(s.done) > 0 && !s.done[0].After(now) {
				at := s.done[0]
				s.done = s.done[1:]
				peers[i].End(at, service, codes.OK)
				if len(s.queue) > 0 {
					s.queue = s.queue[1:]
					s.done = append(s.done, at.Add(service))
				} else {
					s.busy--
				}
			}
		}
	}
	for range n {
		now = now.Add(time.Duration(rng.ExpFloat64() / rate * float64(time.Second)))
		complete(now)
		p, err := l.ChooseAt(nil, now)
		if err != nil {
			t.Fatal(err)
		}
		p.Begin()
		i := index[p]
		s := &servers[i]
		if s.busy < int(weights[i]) {
			s.busy++
			s.done = append(s.done, now.Add(service))
		} else {
			s.queue = append(s.queue, now)
		}
		shares[map[float64]int{1: 0, 2: 1, 4: 2}[weights[i]]] += 1 / float64(n)
	}
	return shares
}

// A new peer still cold (answering over twice as slowly as the others)
// gets only a probe every balancing.ProbeInterval during its slow-start window; once it
// answers near the others' latency it takes its ramp's share.
func TestColdPeerWaitsForWarmth(t *testing.T) {
	l, clk := newBalancedList(t, balance.Config{}, 1, 1)
	clk.Add(time.Minute)
	if err := l.Set([]peer.Member{{HostPort: hp(0)}, {HostPort: hp(1)}, {HostPort: hp(2)}}); err != nil {
		t.Fatal(err)
	}
	cold := l.Get(hp(2))
	answer := func(p *Peer, d time.Duration) {
		p.Begin()
		p.End(clk.Now(), d, codes.OK)
	}
	for i := 0; i < minLatencySamples; i++ {
		answer(l.Get(hp(0)), 5*time.Millisecond)
		answer(l.Get(hp(1)), 5*time.Millisecond)
		answer(cold, 15*time.Millisecond) // 3x: cold, though not 5x slow
	}
	clk.Add(3 * time.Second) // factor 0.3; the estimates a second stale at most
	for _, p := range l.Peers()[:2] {
		answer(p, 5*time.Millisecond)
		for i := 1; i < minLatencySamples; i++ {
			answer(p, 5*time.Millisecond)
		}
	}
	answer(cold, 15*time.Millisecond)
	for i := 1; i < minLatencySamples; i++ {
		answer(cold, 15*time.Millisecond)
	}
	got := shares(t, l, 2000)[hp(2)]
	if got*2000 > 1 {
		t.Fatalf("the cold new peer got %.0f of 2000 calls, want at most its one probe", got*2000)
	}
	// Warm: its next answers are as fast as the others'.
	clk.Add(2 * time.Second) // factor 0.5
	for _, p := range l.Peers() {
		for i := 0; i < minLatencySamples; i++ {
			answer(p, 5*time.Millisecond)
		}
	}
	if got, want := shares(t, l, 20000)[hp(2)], 0.5/2.5; math.Abs(got-want) > 0.03 {
		t.Fatalf("the warm new peer at factor 0.5 got %.3f of the calls, want %.3f", got, want)
	}
}

// A slow peer's recovery is seen under sparse traffic: its probe is judged
// whatever its age by the time of the next choice.
func TestSlowPeerRecoversUnderSparseTraffic(t *testing.T) {
	l, clk := newBalancedList(t, balance.Config{}, 1, 1)
	slow, fast := l.Get(hp(0)), l.Get(hp(1))
	for i := 0; i < minLatencySamples; i++ {
		for _, a := range []struct {
			p *Peer
			d time.Duration
		}{{slow, 50 * time.Millisecond}, {fast, time.Millisecond}} {
			a.p.Begin()
			a.p.End(clk.Now(), a.d, codes.OK)
		}
	}
	if p, _ := l.Choose(nil); p != fast || !slow.Counts().Slow {
		t.Fatal("the 50x peer is not marked slow")
	}
	clk.Add(time.Duration(balancing.ProbeInterval))
	var probe *Peer
	for probe == nil {
		if p, _ := l.Choose(nil); p == slow {
			probe = p
		}
	}
	probe.Begin()
	probe.End(clk.Now(), time.Millisecond, codes.OK) // recovered
	clk.Add(1500 * time.Millisecond)                 // the next call comes 1.5 s later
	l.Choose(nil)
	if slow.Counts().Slow {
		t.Fatal("a recovered peer whose fast probe is 1.5 s old is still marked slow")
	}
}

// A shard key's choice asks each peer's limiter at most once, however
// many passes it makes.
func TestChooseKeyCountsEachRefusalOnce(t *testing.T) {
	l, clk := newBalancedList(t, balance.Config{}, 1, 1, 1, 1)
	for _, p := range l.Peers() {
		p.Begin()
		p.EndPushedBack(clk.Now(), time.Millisecond, time.Second) // resting at 0 pending
	}
	if _, err := l.ChooseKeyAt("user-1", nil, clk.Now()); err != peer.ErrThrottled {
		t.Fatalf("ChooseKeyAt = %v, want ErrThrottled", err)
	}
	for _, p := range l.Peers() {
		if c := p.Counts(); c.Throttled != 1 {
			t.Errorf("%s: Throttled = %d after one choice, want 1", c.HostPort, c.Throttled)
		}
	}
}

// A Set that changes nothing keeps the list's members, and with them the
// shard keys' ring.
func TestUnchangedSetKeepsTheRing(t *testing.T) {
	l, _ := newBalancedList(t, balance.Config{}, 1, 2, 3)
	before := l.peers.Load()
	home := l.Home("user-1")
	if err := l.Set([]peer.Member{{HostPort: hp(2), Weight: 3}, {HostPort: hp(0)}, {HostPort: hp(1), Weight: 2}}); err != nil {
		t.Fatal(err)
	}
	if l.peers.Load() != before || before.ring.Load() == nil || l.Home("user-1") != home {
		t.Fatal("a Set of the same peers and weights replaced the members (and dropped the ring)")
	}
	if err := l.Set([]peer.Member{{HostPort: hp(0)}, {HostPort: hp(1), Weight: 2}, {HostPort: hp(2), Weight: 4}}); err != nil {
		t.Fatal(err)
	}
	if l.peers.Load() == before {
		t.Fatal("a Set with a new weight kept the old members")
	}
}

// Once the cap refused an ejection, the next one is possible as soon as
// the first ejection filling the cap ends.
func TestEjectionCapFreesWhenAnEjectionEnds(t *testing.T) {
	l, clk := newBalancedList(t, balance.Config{}, 1, 1, 1, 1) // one may be ejected
	a, b := l.Peers()[0], l.Peers()[1]
	fail := func(p *Peer, n int) {
		for range n {
			p.Begin()
			p.End(clk.Now(), time.Millisecond, codes.Unexpected)
		}
	}
	fail(a, 5)
	fail(b, 5)
	if ej, _ := b.Ejected(clk.Now()); ej {
		t.Fatal("b ejected beyond the cap")
	}
	_, until := a.Ejected(clk.Now())
	clk.Add(until.Sub(clk.Now()))
	fail(b, 1) // its run goes on: the next error ejects it
	if ej, _ := b.Ejected(clk.Now()); !ej {
		t.Fatal("b not ejected once a's ejection ended")
	}
}

// A failure every peer shares ejects none of them: ejecting one would
// only move its calls onto peers that fail the same way. Once another
// peer answers as a working server does, each failing peer's next error
// ejects it.
//
// A peer that has not answered yet says nothing either way: a fourth peer
// that was never called does not make the three failing ones outliers.
func TestSharedFailureEjectsNone(t *testing.T) {
	l, clk := newBalancedList(t, balance.Config{Ejection: balance.Ejection{MaxPercent: 100}}, 1, 1, 1, 1)
	answer := func(p *Peer, n int, code codes.Code) {
		for range n {
			p.Begin()
			p.End(clk.Now(), time.Millisecond, code)
		}
	}
	peers := l.Peers()[:3] // the fourth is never called
	for range 4 {          // each peer's run passes the threshold in turn
		for _, p := range peers {
			answer(p, 2, codes.Unexpected)
		}
	}
	for i, p := range peers {
		if ej, _ := p.Ejected(clk.Now()); ej {
			t.Fatalf("peer %d ejected for a failure all 3 peers that answered share", i)
		}
	}
	answer(peers[2], 1, codes.OK)
	answer(peers[0], 1, codes.Unexpected)
	if ej, _ := peers[0].Ejected(clk.Now()); !ej {
		t.Fatal("peer 0 not ejected once peer 2 answered OK")
	}
	answer(peers[1], 1, codes.Network) // its run, of 9, goes on
	if ej, _ := peers[1].Ejected(clk.Now()); !ej {
		t.Fatal("peer 1 not ejected once peer 2 answered OK")
	}
}

// A pass over a long list's figures publishes them only if nothing
// replaced those it began from (figuresAt's compare-and-swap), so every
// ejection must replace them with a new, expired marker, also when none
// were worked out yet or the last ejection's marker is held: else a pass
// that began before the ejection could publish figures that miss it, for
// figuresTTL. (TestLongListSeesEjectionAtOnce sees the ejection from the
// next choice, but cannot interleave a pass with it.)
func TestEjectionReplacesTheFiguresHeld(t *testing.T) {
	weights := make([]float64, 20)
	for i := range weights {
		weights[i] = 1
	}
	l, clk := newBalancedList(t, balance.Config{Ejection: balance.Ejection{MaxPercent: 100}}, weights...)
	clk.Add(time.Minute)
	m := l.peers.Load()
	for i, p := range l.Peers()[:3] {
		held := m.figures.Load() // none yet, then the last ejection's marker
		for range 5 {
			p.Begin()
			p.End(clk.Now(), time.Millisecond, codes.Unexpected)
		}
		f := m.figures.Load()
		if f == held || f == nil || clk.Now().UnixNano() < f.until {
			t.Fatalf("ejection %d left the figures held %p as %p (expired: %v)", i+1, held, f, f != nil && clk.Now().UnixNano() >= f.until)
		}
	}
}

// On a long list (figures cached for figuresTTL) an ejection is seen by
// the next choice, not figuresTTL later, and below the panic threshold
// the ejected peers are chosen again.
func TestLongListSeesEjectionAtOnce(t *testing.T) {
	weights := make([]float64, 20) // over scanAll: the power of two choices
	for i := range weights {
		weights[i] = 1
	}
	l, clk := newBalancedList(t, balance.Config{Ejection: balance.Ejection{MaxPercent: 100}}, weights...)
	clk.Add(time.Minute) // past slow start
	peers := l.Peers()
	eject := func(p *Peer) {
		for range 5 {
			p.Begin()
			p.End(clk.Now(), time.Millisecond, codes.Unexpected)
		}
		if ej, _ := p.Ejected(clk.Now()); !ej {
			t.Fatalf("%s not ejected after 5 UNEXPECTED", p.HostPort())
		}
	}
	chosen := func(n int) map[*Peer]int {
		got := map[*Peer]int{}
		for range n {
			p, err := l.Choose(nil)
			if err != nil {
				t.Fatal(err)
			}
			got[p]++
			p.End(clk.Now(), time.Millisecond, codes.OK)
		}
		return got
	}
	chosen(1) // the figures are now held, no peer ejected
	eject(peers[0])
	if n := chosen(2000)[peers[0]]; n != 0 {
		t.Fatalf("the ejected peer got %d of 2000 choices made at once after its ejection", n)
	}
	for _, p := range peers[1:10] { // 10 of 20 ejected: half available, no panic yet
		eject(p)
	}
	got := chosen(2000)
	for _, p := range peers[:10] {
		if got[p] != 0 {
			t.Fatalf("%s, ejected, got %d of 2000 choices with half the peers available", p.HostPort(), got[p])
		}
	}
	eject(peers[10]) // 9 of 20 available: below the 50% panic threshold
	got = chosen(2000)
	if n := got[peers[0]] + got[peers[5]] + got[peers[10]]; n == 0 {
		t.Fatal("in panic (9 of 20 available) the ejected peers got no choice: ejections were not ignored")
	}
}

// A long list's choice stays cheap while peers are in their slow-start
// window (a client's first 10 s) and while a peer is ejected: the
// list-wide figures are worked out once per figuresTTL, not per choice.
func BenchmarkChoose1000(b *testing.B) {
	for _, tc := range []struct {
		name string
		set  func(l *List, clk *clock.Fake)
	}{
		{"settled", func(l *List, clk *clock.Fake) { clk.Add(time.Minute) }},
		{"in-window", func(*List, *clock.Fake) {}},
		{"one-ejected", func(l *List, clk *clock.Fake) {
			clk.Add(time.Minute)
			p := l.Peers()[0]
			for range 5 {
				p.Begin()
				p.End(clk.Now(), time.Millisecond, codes.Unexpected)
			}
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			weights := make([]float64, 1000)
			for i := range weights {
				weights[i] = 1
			}
			l, clk := newBalancedList(b, balance.Config{Ejection: balance.Ejection{BaseTime: time.Hour, MaxTime: time.Hour}}, weights...)
			tc.set(l, clk)
			now := clk.Now()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := l.ChooseAt(nil, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// DECLINED (a server draining) neither counts toward an ejection nor
// breaks a run of errors.
func TestDeclinedIsNeutralForEjection(t *testing.T) {
	l, clk := newBalancedList(t, balance.Config{Ejection: balance.Ejection{MaxPercent: 50}}, 1, 1)
	p := l.Peers()[0]
	for i, code := range []codes.Code{codes.Unexpected, codes.Unexpected, codes.Declined, codes.Declined, codes.Unexpected, codes.Unexpected, codes.Declined, codes.Unexpected} {
		if ej, _ := p.Ejected(clk.Now()); ej {
			t.Fatalf("ejected after answer %d", i)
		}
		p.Begin()
		p.End(clk.Now(), time.Millisecond, code)
	}
	if ej, _ := p.Ejected(clk.Now()); !ej {
		t.Fatal("five UNEXPECTED answers with DECLINED between them did not eject the peer")
	}
}
