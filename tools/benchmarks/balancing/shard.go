package balancing

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/sluice-rpc/sluice/balance"
	"github.com/sluice-rpc/sluice/channel"
	lb "github.com/sluice-rpc/sluice/internal/balancing"
	"github.com/sluice-rpc/sluice/tools/benchmarks/load"
)

// HotKey is the shard scenario's hot key, outside the Zipf-drawn keys.
const HotKey = "hot"

// keyName returns the name of the key of rank r (-1: HotKey).
func keyName(r int) string {
	if r < 0 {
		return HotKey
	}
	return "k" + strconv.Itoa(r)
}

// keySequence draws n keys' ranks, seeded with seed: with probability hot
// -1, the hot key, else one of keys ranks by a Zipf distribution of
// exponent s (rank r with probability in proportion to (r + 1)^-s).
func keySequence(n, keys int, s, hot float64, seed uint64) ([]int32, error) {
	rng := rand.New(rand.NewPCG(seed, 0x5ead))
	z := rand.NewZipf(rng, s, 1, uint64(keys-1))
	if z == nil {
		return nil, fmt.Errorf("balancing: no Zipf distribution of exponent %v over %d keys (the exponent must be > 1)", s, keys)
	}
	out := make([]int32, n)
	for i := range out {
		if hot > 0 && rng.Float64() < hot {
			out[i] = -1
		} else {
			out[i] = int32(z.Uint64())
		}
	}
	return out, nil
}

// ShardResult is the shard scenario's two rows, and how keys move on the
// ring.
type ShardResult struct {
	With    ShardRow `json:"with"`
	Without ShardRow `json:"without"`
	// Loose is shard keys bound by ShardConfig.LooseFactor; nil if not run.
	Loose    *ShardRow `json:"loose"`
	HitRatio float64   `json:"hit_ratio"` // With.HitRate / Without.HitRate
	Ring     RingMoves `json:"ring"`
}

// ShardRow is one run of the shard scenario.
type ShardRow struct {
	ShardKeys     bool    `json:"shard_keys"`     // every call carries its key as its shard key, or none
	BalanceFactor float64 `json:"balance_factor"` // the shardBalanceFactor (0: the default, 1.25)
	Rate          float64 `json:"rate"`
	// Measured is the calls after the warmup; HitRate the share of the
	// requests served then that found their key cached.
	Measured Outcome `json:"measured"`
	HitRate  float64 `json:"hit_rate"`
	// HitCost and MissCost are the mean time a hit and a miss held their
	// worker: the model's costs as served, timer lateness added.
	HitCost  load.Millis `json:"hit_cost_ms"`
	MissCost load.Millis `json:"miss_cost_ms"`
	// AtHome is the share of the measured calls that reached their key's
	// home on the ring, HotAtHome that of the hot key's calls.
	AtHome    float64       `json:"at_home"`
	HotAtHome float64       `json:"hot_at_home"`
	Servers   []ShardServer `json:"servers"`
	// MeanInFlight is the servers' average of their mean in-flight;
	// Busiest the largest, on BusiestServer.
	MeanInFlight  float64    `json:"mean_in_flight"`
	Busiest       float64    `json:"busiest_in_flight"`
	BusiestServer string     `json:"busiest_server"`
	Bound         BoundCheck `json:"bound"`
	Seconds       []float64  `json:"seconds"` // the hit rate second by second, from the first call
}

// BoundCheck is the shard keys' bounded load, checked on the client's
// calls pending to each peer, read every ShardConfig.Sample over the
// measured stretch. The chooser sends a call to a peer only while it has
// fewer than ceil(c x (m + 1) / n) pending, m pending to all n peers
// (internal/balancing.Capacity), counting the call in the same atomic
// step (peerlist.List.ClaimKeyClassAt). A peer's count then falls as its
// calls end, but so may m, and faster (a hot key's home holds its slow
// calls while the others' fast ones end): so each peer's reading is held
// against the bound of the most calls in flight at any moment since the
// oldest of its pending calls began (by the calls' own start and end
// times, which bracket the chooser's counts), plus one, since the chooser
// sums the peers' counts one at a time and a call ending meanwhile can
// count with one beginning. c is the default factor whatever the row's
// own.
type BoundCheck struct {
	Factor      float64 `json:"factor"` // balance.DefaultBalanceFactor
	Samples     int     `json:"samples"`
	MeanPending float64 `json:"mean_pending"` // to all peers, on average
	Over        float64 `json:"over"`         // the share of the samples with a peer over the bound
	// Worst* are of the reading that came nearest the bound or exceeded
	// it most: the peer's pending, the bound, the calls pending to all
	// peers in that reading, and the most in flight the bound was of.
	WorstPending  int64 `json:"worst_pending"`
	WorstBound    int64 `json:"worst_bound"`
	WorstAll      int64 `json:"worst_all"`
	WorstInFlight int64 `json:"worst_in_flight"`
}

// pendingSample is one reading of the client's peers, made between from
// and to (from the run's start): the calls pending to each one.
type pendingSample struct {
	from, to time.Duration
	pending  []peerPending
}

// peerPending is one peer's calls pending.
type peerPending struct {
	hostPort string
	n        int64
}

// pendingBound is the most calls one of peers peers may have pending, by
// the bounded load of factor c, after inFlight were in flight to all of
// them: ceil(c x (inFlight + 1) / peers) + 1 (see BoundCheck).
func pendingBound(c float64, inFlight int64, peers int) int64 {
	return lb.Capacity(c, inFlight, 1, float64(peers)) + 1
}

// checkBound checks samples against the bounded load of factor c, the
// calls in flight taken from recs, the run's calls.
func checkBound(c float64, samples []pendingSample, recs []load.Record) BoundCheck {
	b := BoundCheck{Factor: c, Samples: len(samples)}
	fl := newFlights(recs)
	over, sum := 0, int64(0)
	worst := int64(math.MinInt64)
	for _, s := range samples {
		all := int64(0)
		for _, p := range s.pending {
			all += p.n
		}
		sum += all
		isOver := false
		for _, p := range s.pending {
			if p.n == 0 {
				continue
			}
			m := fl.most(fl.oldest(p.hostPort, s.from, s.to), s.to)
			bound := pendingBound(c, m, len(s.pending))
			isOver = isOver || p.n > bound
			if excess := p.n - bound; excess > worst {
				worst = excess
				b.WorstPending, b.WorstBound, b.WorstAll, b.WorstInFlight = p.n, bound, all, m
			}
		}
		if isOver {
			over++
		}
	}
	b.Over = share(float64(over), float64(len(samples)))
	b.MeanPending = share(float64(sum), float64(len(samples)))
	return b
}

// flights are a run's calls as spans of time, for the calls in flight at
// any moment.
type flights struct {
	byPeer map[string][]load.Record // each peer's calls, by start
	// at are the moments calls started or ended, in order, and level[i]
	// the calls in flight just after at[i].
	at    []time.Duration
	level []int64
}

func newFlights(recs []load.Record) *flights {
	type step struct {
		at    time.Duration
		delta int64
	}
	f := &flights{byPeer: map[string][]load.Record{}}
	steps := make([]step, 0, 2*len(recs))
	for _, r := range recs {
		f.byPeer[r.Peer] = append(f.byPeer[r.Peer], r)
		steps = append(steps, step{r.At, 1}, step{r.At + r.Latency, -1})
	}
	for _, rs := range f.byPeer {
		slices.SortFunc(rs, func(a, b load.Record) int { return cmp.Compare(a.At, b.At) })
	}
	// A call ending at the moment another starts is not in flight with it.
	slices.SortFunc(steps, func(a, b step) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.delta, b.delta))
	})
	var n int64
	for _, s := range steps {
		n += s.delta
		f.at, f.level = append(f.at, s.at), append(f.level, n)
	}
	return f
}

// oldest returns when the oldest of hostPort's calls in flight at some
// moment of [from, to] started (from if none was).
func (f *flights) oldest(hostPort string, from, to time.Duration) time.Duration {
	for _, r := range f.byPeer[hostPort] {
		if r.At > to {
			break
		}
		if r.At+r.Latency > from {
			return r.At
		}
	}
	return from
}

// most returns the most calls in flight at any moment of [from, to].
func (f *flights) most(from, to time.Duration) int64 {
	// i: the first step after from; the level at from is the one before.
	i, _ := slices.BinarySearchFunc(f.at, from, func(at, t time.Duration) int {
		return cmp.Or(cmp.Compare(at, t), -1) // past equal ones too
	})
	var most int64
	if i > 0 {
		most = f.level[i-1]
	}
	for ; i < len(f.at) && f.at[i] <= to; i++ {
		most = max(most, f.level[i])
	}
	return most
}

// ShardServer is one server's figures.
type ShardServer struct {
	HostPort     string  `json:"host_port"`
	Calls        int     `json:"calls"`
	HitRate      float64 `json:"hit_rate"`
	MeanInFlight float64 `json:"mean_in_flight"`
	PeakInFlight int64   `json:"peak_in_flight"`
}

// RingMoves is how the shard keys' homes move on the chooser's ring
// (internal/balancing.Ring) when a server leaves and when one joins,
// computed, and checked by routing calls.
type RingMoves struct {
	Keys int `json:"keys"`
	// Leave is the share of the keys whose home moves when Leaving (the
	// last server) leaves; LeaveMax the largest over each server leaving.
	Leaving  string  `json:"leaving"`
	Leave    float64 `json:"leave"`
	LeaveMax float64 `json:"leave_max"`
	// Over Fleets more fleets on random ports, FleetsLeaveMax is the
	// largest share a leave moved, FleetsOver12 the share of leaves that
	// moved more than 12%.
	Fleets         int     `json:"fleets"`
	FleetsLeaveMax float64 `json:"fleets_leave_max"`
	FleetsOver12   float64 `json:"fleets_over_12"`
	Joining        string  `json:"joining"`
	Join           float64 `json:"join"`
	// Probe keys were then called one at a time (slow start off), with
	// all the servers, without Leaving, with Joining: AtHome* are the
	// shares that landed on their home, Routed* those whose server changed.
	Probe       int     `json:"probe"`
	AtHome      float64 `json:"at_home"`
	AtHomeLeave float64 `json:"at_home_leave"`
	AtHomeJoin  float64 `json:"at_home_join"`
	RoutedLeave float64 `json:"routed_leave"`
	RoutedJoin  float64 `json:"routed_join"`
}

// runShardScenario runs the two rows on the same key sequence, shard
// keys first, then the ring's figures.
func runShardScenario(ctx context.Context, c Config) (*ShardResult, error) {
	sh := c.Shard
	n := int(math.Ceil(sh.Rate*(sh.Warmup+sh.Duration).D().Seconds())) + 1
	seq, err := keySequence(n, sh.Keys, sh.Zipf, sh.HotShare, c.Seed)
	if err != nil {
		return nil, err
	}
	res := &ShardResult{}
	c.progress("shard, shard keys: %d servers with caches of %d, %d keys (Zipf %v, %.0f%% hot); %v",
		sh.Servers, sh.CacheSize, sh.Keys, sh.Zipf, 100*sh.HotShare, sh.Warmup+sh.Duration)
	if res.With, res.Ring, err = runShard(ctx, c, true, seq, 0); err != nil {
		return nil, err
	}
	if sh.LooseFactor > 0 {
		c.progress("shard, shard keys with balance factor %g: %v", sh.LooseFactor, sh.Warmup+sh.Duration)
		loose, _, err := runShard(ctx, c, true, seq, sh.LooseFactor)
		if err != nil {
			return nil, err
		}
		res.Loose = &loose
	}
	c.progress("shard, no shard keys: %v", sh.Warmup+sh.Duration)
	if res.Without, _, err = runShard(ctx, c, false, seq, 0); err != nil {
		return nil, err
	}
	res.HitRatio = share(res.With.HitRate, res.Without.HitRate)
	return res, nil
}

// server is the config of each of the scenario's servers.
func (sh ShardConfig) server() serverConfig {
	return serverConfig{workers: sh.Workers, cache: sh.CacheSize, hit: sh.Hit.D(), miss: sh.Miss.D()}
}

// runShard runs one row, with shard keys or not, and the balance factor
// factor (0: the default); with shard keys and the default, it then
// probes the ring.
func runShard(ctx context.Context, c Config, keyed bool, seq []int32, factor float64) (ShardRow, RingMoves, error) {
	sh := c.Shard
	row := ShardRow{ShardKeys: keyed, BalanceFactor: factor, Rate: sh.Rate}
	cfgJSON := defaultsConfig
	if factor > 0 {
		cfgJSON = `{"balancing": [{"shardBalanceFactor": ` + strconv.FormatFloat(factor, 'g', -1, 64) + `}]}`
	}
	var moves RingMoves
	b, err := setup(slices.Repeat([]serverConfig{sh.server()}, sh.Servers), cfgJSON, nil)
	if err != nil {
		return row, moves, err
	}
	defer b.close()
	f := b.f
	var pending []pendingSample  // from t0 until the run's start is known
	samples := []cacheCounts{{}} // a second apart
	stop := load.Every(time.Second, func(time.Time) {
		var all cacheCounts
		for _, s := range f {
			all = all.add(s.counts())
		}
		samples = append(samples, all)
	})
	// The reading's own times, not the tick's: on a loaded machine the
	// reader may run milliseconds after its tick.
	t0 := time.Now()
	stopPending := load.Every(sh.Sample.D(), func(time.Time) {
		s := pendingSample{from: time.Since(t0)}
		for _, p := range b.client.Peers() {
			s.pending = append(s.pending, peerPending{p.HostPort, max(p.Pending, 0)})
		}
		s.to = time.Since(t0)
		pending = append(pending, s)
	})
	vary := func(i int) (*channel.Request, []channel.CallOption) {
		key := keyName(int(seq[i%len(seq)]))
		req := &channel.Request{Format: "raw", Arg3: []byte(key)}
		if keyed {
			return req, []channel.CallOption{channel.WithShardKey(key)}
		}
		return req, nil
	}
	measured := span{sh.Warmup.D(), (sh.Warmup + sh.Duration).D()}
	rep, before, after, err := b.run(ctx, c, sh.Rate, measured.from, measured.to, vary)
	stop()
	stopPending()
	if err != nil {
		return row, moves, err
	}

	recs := rep.Records
	row.Measured = count(recs, measured.has).outcome()
	shift := rep.Start.Sub(t0)
	var inWindow []pendingSample
	for _, s := range pending {
		s.from, s.to = s.from-shift, s.to-shift
		if s.from >= measured.from && s.from < measured.to {
			inWindow = append(inWindow, s)
		}
	}
	row.Bound = checkBound(balance.DefaultBalanceFactor, inWindow, recs)
	calls := byServer(recs, f, measured)
	var cache cacheCounts
	for i, srv := range f {
		c := after[i].cache.sub(before[i].cache)
		cache = cache.add(c)
		s := ShardServer{HostPort: srv.hostPort(), Calls: calls[i].Calls, HitRate: c.hitRate(),
			MeanInFlight: load.MeanInFlight(before[i].pool, after[i].pool), PeakInFlight: after[i].pool.Peak}
		row.MeanInFlight += s.MeanInFlight / float64(len(f))
		if s.MeanInFlight > row.Busiest || row.BusiestServer == "" {
			row.Busiest, row.BusiestServer = s.MeanInFlight, s.HostPort
		}
		row.Servers = append(row.Servers, s)
	}
	row.HitRate = cache.hitRate()
	hit, miss := cache.costs()
	row.HitCost, row.MissCost = load.Millis(hit), load.Millis(miss)
	names := f.hostPorts()
	ring, err := lb.NewRing(names, nil)
	if err != nil {
		return row, moves, err
	}
	// atHome is the share of the measured calls (the hot key's if hot)
	// that reached their key's home.
	atHome := func(hot bool) float64 {
		n, home := 0, 0
		for i, r := range recs {
			k := int(seq[i%len(seq)])
			if measured.has(r) && r.Peer != "" && (k < 0 || !hot) {
				n++
				if r.Peer == names[ring.Home(lb.KeyHash(keyName(k)))] {
					home++
				}
			}
		}
		return share(float64(home), float64(n))
	}
	row.AtHome, row.HotAtHome = atHome(false), atHome(true)
	// The samples' seconds start a moment before the first call.
	for i := 1; i < len(samples); i++ {
		row.Seconds = append(row.Seconds, samples[i].sub(samples[i-1]).hitRate())
	}

	if keyed && factor == 0 {
		c.progress("shard: the ring, and %d keys routed one at a time", sh.Probe)
		if moves, err = ringMoves(ctx, c, f); err != nil {
			return row, moves, err
		}
	}
	return row, moves, nil
}

// homes returns the home on a ring over names of each of the first n
// keys.
func homes(names []string, n int) ([]string, error) {
	r, err := lb.NewRing(names, nil)
	if err != nil {
		return nil, err
	}
	out := make([]string, n)
	for k := range out {
		out[k] = names[r.Home(lb.KeyHash(keyName(k)))]
	}
	return out, nil
}

// spread returns the largest share of the keys homed on one member,
// which that member's leave moves, and how many members hold over 12%.
func spread(homes []string) (most float64, over int) {
	counts := map[string]int{}
	for _, h := range homes {
		counts[h]++
	}
	for _, n := range counts {
		x := share(float64(n), float64(len(homes)))
		most = max(most, x)
		if x > 0.12 {
			over++
		}
	}
	return most, over
}

// fleetSpread places keys on rings of n members named 127.0.0.1:PORT,
// ports drawn from a source seeded with seed, for each of fleets fleets,
// and returns the largest share of the keys homed on one member, and the
// share of members holding more than 12%.
func fleetSpread(fleets, n, keys int, seed uint64) (most, over float64, err error) {
	rng := rand.New(rand.NewPCG(seed, 0xf1ee7))
	overs := 0
	for range fleets {
		var names []string
		for len(names) < n {
			if name := "127.0.0.1:" + strconv.Itoa(1024+rng.IntN(65536-1024)); !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
		h, err := homes(names, keys)
		if err != nil {
			return 0, 0, err
		}
		m, o := spread(h)
		most, overs = max(most, m), overs+o
	}
	return most, share(float64(overs), float64(fleets*n)), nil
}

// changed returns the share of the places where a and b differ.
func changed(a, b []string) float64 {
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return share(float64(n), float64(len(a)))
}

// ringMoves computes how keys move on the ring of f's servers when the
// last one leaves and when one more joins (a server it starts), then
// checks by routing Probe keys through a client of its own.
func ringMoves(ctx context.Context, c Config, f fleet) (RingMoves, error) {
	sh := c.Shard
	names := f.hostPorts()
	extra, err := startServer(sh.server())
	if err != nil {
		return RingMoves{}, err
	}
	defer extra.close()
	m := RingMoves{Keys: sh.Keys, Leaving: names[len(names)-1], Joining: extra.hostPort(), Probe: sh.Probe, Fleets: sh.Fleets}
	stages := []struct {
		servers fleet
		homes   []string
		atHome  *float64
	}{
		{f, nil, &m.AtHome},
		{f[:len(f)-1], nil, &m.AtHomeLeave},
		{append(append(fleet{}, f...), extra), nil, &m.AtHomeJoin},
	}
	for i := range stages {
		if stages[i].homes, err = homes(stages[i].servers.hostPorts(), sh.Keys); err != nil {
			return m, err
		}
	}
	// The keys that move when a server leaves are those homed on it: a
	// member's points do not depend on the others (internal/balancing.Ring);
	// the leave is computed on the smaller ring too, as a check.
	m.LeaveMax, _ = spread(stages[0].homes)
	m.Leave, m.Join = changed(stages[0].homes, stages[1].homes), changed(stages[0].homes, stages[2].homes)
	if m.FleetsLeaveMax, m.FleetsOver12, err = fleetSpread(sh.Fleets, len(names), sh.Keys, c.Seed); err != nil {
		return m, err
	}

	// Route the probe keys, spread over the ranks.
	probe := make([]int, sh.Probe)
	for i := range probe {
		probe[i] = i * sh.Keys / sh.Probe
	}
	ch, client, err := newClient(noSlowStart)
	if err != nil {
		return m, err
	}
	defer ch.Close()
	landed := make([][]string, len(stages))
	for si, st := range stages {
		if err := client.SetPeers(st.servers.members(nil)); err != nil {
			return m, err
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := client.Connect(cctx) // every peer ready
		cancel()
		if err != nil {
			return m, err
		}
		home := 0
		for _, k := range probe {
			key := keyName(k)
			cctx, cancel := context.WithTimeout(ctx, c.Timeout.D())
			res, err := client.Call(cctx, Method, &channel.Request{Format: "raw", Arg3: []byte(key)}, channel.WithShardKey(key))
			cancel()
			hp := ""
			if err == nil {
				hp = res.Peer
			}
			landed[si] = append(landed[si], hp)
			if hp == st.homes[k] {
				home++
			}
		}
		*st.atHome = share(float64(home), float64(len(probe)))
	}
	m.RoutedLeave = changed(landed[0], landed[1])
	m.RoutedJoin = changed(landed[0], landed[2])
	return m, nil
}
