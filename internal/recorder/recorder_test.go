package recorder

import (
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/stats"

	"github.com/uber-go/tally/v4"
)

func TestRecorderTagsAndCaches(t *testing.T) {
	scope := tally.NewTestScope("", nil)
	r := New(scope)
	m := r.Method("kv", "get")
	if r.Method("kv", "get") != m {
		t.Fatal("Method is not cached")
	}
	m.Call(3*time.Millisecond, "")
	m.Call(5*time.Millisecond, "BUSY")
	m.CallAttempts(1)
	m.CallAttempts(2)
	m.Attempt()
	p := r.Peer("kv", "127.0.0.1:1")
	p.Busy.Inc(2)
	p.Limit.Update(38)

	snap := scope.Snapshot()
	counters := snap.Counters()
	want := map[string]int64{
		"calls+method=get,service=kv":                 2,
		"attempts+method=get,service=kv":              1,
		"call.errors+code=BUSY,method=get,service=kv": 1,
		"peer.busy+peer=127.0.0.1:1,service=kv":       2,
	}
	for k, v := range want {
		c, ok := counters[k]
		if !ok {
			t.Errorf("no counter %s; have %v", k, keys(counters))
			continue
		}
		if c.Value() != v {
			t.Errorf("%s = %d, want %d", k, c.Value(), v)
		}
	}
	g, ok := snap.Gauges()["peer.limit+peer=127.0.0.1:1,service=kv"]
	if !ok || g.Value() != 38 {
		t.Errorf("peer.limit gauge missing or wrong: %v", g)
	}
	if len(snap.Timers()) != 0 {
		t.Errorf("timers %v, want none: call.latency is a histogram", keys(snap.Timers()))
	}
}

// The histograms' names, tags and buckets are the documented ones.
func TestHistogramNamesTagsBuckets(t *testing.T) {
	scope := tally.NewTestScope("", nil)
	m := New(scope).Method("kv", "get")
	m.Call(time.Millisecond, "")
	m.CallAttempts(1)
	hs := scope.Snapshot().Histograms()
	wantTags := map[string]string{stats.TagService: "kv", stats.TagMethod: "get"}

	lat, ok := hs["call.latency+method=get,service=kv"]
	if !ok {
		t.Fatalf("no call.latency histogram; have %v", keys(hs))
	}
	if lat.Name() != "call.latency" || !mapsEqual(lat.Tags(), wantTags) {
		t.Errorf("call.latency is %q %v, want call.latency %v", lat.Name(), lat.Tags(), wantTags)
	}
	wantLat := append(slices.Clone([]time.Duration(stats.LatencyBuckets)), math.MaxInt64) // the last, unbounded bucket
	if got := sortedKeys(lat.Durations()); !slices.Equal(got, wantLat) {
		t.Errorf("call.latency bucket bounds %v, want %v", got, wantLat)
	}
	if len(lat.Values()) != 0 {
		t.Errorf("call.latency has value buckets %v, want duration buckets only", lat.Values())
	}

	att, ok := hs["call.attempts+method=get,service=kv"]
	if !ok {
		t.Fatalf("no call.attempts histogram; have %v", keys(hs))
	}
	if att.Name() != "call.attempts" || !mapsEqual(att.Tags(), wantTags) {
		t.Errorf("call.attempts is %q %v, want call.attempts %v", att.Name(), att.Tags(), wantTags)
	}
	wantAtt := []float64{0, 1, 2, 3, 4, 5, math.MaxFloat64}
	if got := sortedKeys(att.Values()); !slices.Equal(got, wantAtt) {
		t.Errorf("call.attempts bucket bounds %v, want %v", got, wantAtt)
	}
	if len(hs) != 2 {
		t.Errorf("histograms %v, want call.latency and call.attempts only", keys(hs))
	}
}

// Each latency lands in exactly one bucket: the first whose bound it does
// not exceed.
func TestCallLatencyBuckets(t *testing.T) {
	for _, tc := range []struct {
		latency, bucket time.Duration
	}{
		{0, 100 * time.Microsecond},
		{50 * time.Microsecond, 100 * time.Microsecond},
		{100 * time.Microsecond, 100 * time.Microsecond}, // bounds are inclusive
		{100*time.Microsecond + 1, 200 * time.Microsecond},
		{300 * time.Microsecond, 500 * time.Microsecond},
		{time.Millisecond, time.Millisecond},
		{3 * time.Millisecond, 5 * time.Millisecond},
		{7 * time.Millisecond, 10 * time.Millisecond},
		{150 * time.Millisecond, 200 * time.Millisecond},
		{time.Second, time.Second},
		{3 * time.Second, 5 * time.Second},
		{10 * time.Second, 10 * time.Second},
		{10*time.Second + 1, math.MaxInt64}, // the last, unbounded bucket
		{time.Hour, math.MaxInt64},
	} {
		scope := tally.NewTestScope("", nil)
		New(scope).Method("kv", "get").Call(tc.latency, "")
		got := scope.Snapshot().Histograms()["call.latency+method=get,service=kv"].Durations()
		for bound, n := range got {
			want := int64(0)
			if bound == tc.bucket {
				want = 1
			}
			if n != want {
				t.Errorf("latency %v: bucket %v has %d, want %d", tc.latency, bound, n, want)
			}
		}
	}
}

// Each call's attempts land in the bucket of that count; more than 5 in the
// last, unbounded bucket.
func TestCallAttemptsBuckets(t *testing.T) {
	scope := tally.NewTestScope("", nil)
	m := New(scope).Method("kv", "get")
	for _, n := range []int{0, 1, 1, 1, 2, 2, 3, 5, 6, 9} {
		m.CallAttempts(n)
	}
	got := scope.Snapshot().Histograms()["call.attempts+method=get,service=kv"].Values()
	want := map[float64]int64{0: 1, 1: 3, 2: 2, 3: 1, 4: 0, 5: 1, math.MaxFloat64: 2}
	if !mapsEqual(got, want) {
		t.Errorf("call.attempts buckets %v, want %v", got, want)
	}
}

// Retry counts retry attempts; the retry.histogram counters are gone.
func TestRetryCounts(t *testing.T) {
	scope := tally.NewTestScope("", nil)
	m := New(scope).Method("kv", "get")
	for n := 1; n <= 6; n++ {
		m.Retry(n)
		m.RetryFailed()
	}
	m.Retry(0) // not a retry
	m.Hedged(2, true, 1)
	m.Unsent()
	m.SkippedDeadline()
	m.SkippedBudget()
	m.SkippedBudget()
	m.SkippedChained()
	m.AttemptFailed("BUSY")
	want := map[string]int64{
		"attempt.skipped.deadline+method=get,service=kv": 1,
		"attempt.skipped.budget+method=get,service=kv":   2,
		"attempt.skipped.chained+method=get,service=kv":  1,
		"retry.attempts+method=get,service=kv":           6,
		"retry.attempts.failed+method=get,service=kv":    6,
		"hedge.sent+method=get,service=kv":               2,
		"hedge.won+method=get,service=kv":                1,
		"hedge.cancelled+method=get,service=kv":          1,
		"attempt.unsent+method=get,service=kv":           1,
		"attempt.errors+code=BUSY,method=get,service=kv": 1,
		"calls+method=get,service=kv":                    0,
		"attempts+method=get,service=kv":                 0,
	}
	counters := scope.Snapshot().Counters()
	for k, v := range want {
		c, ok := counters[k]
		if !ok {
			t.Errorf("no counter %s", k)
			continue
		}
		if c.Value() != v {
			t.Errorf("%s = %d, want %d", k, c.Value(), v)
		}
	}
	if len(counters) != len(want) {
		t.Errorf("counters %v, want exactly %v", keys(counters), keys(want))
	}
}

// The Recorder's buckets are copies: they hold the documented values, and
// a change to the exported variables could not reach them.
func TestBucketsAreCopies(t *testing.T) {
	if !slices.Equal(latencyBuckets, stats.LatencyBuckets) || &latencyBuckets[0] == &stats.LatencyBuckets[0] {
		t.Error("latencyBuckets is not a copy of stats.LatencyBuckets")
	}
	if !slices.Equal(attemptBuckets, stats.AttemptBuckets) || &attemptBuckets[0] == &stats.AttemptBuckets[0] {
		t.Error("attemptBuckets is not a copy of stats.AttemptBuckets")
	}
	if !slices.IsSorted(stats.LatencyBuckets) || stats.LatencyBuckets[0] != 100*time.Microsecond || stats.LatencyBuckets[len(stats.LatencyBuckets)-1] != 10*time.Second {
		t.Errorf("stats.LatencyBuckets %v: want sorted, from 100µs to 10s", stats.LatencyBuckets)
	}
}

// Recording a call, its attempts and each attempt on a cached Method
// allocates nothing, with a real scope or none.
func TestRecordingAllocatesNothing(t *testing.T) {
	for name, scope := range map[string]tally.Scope{"test scope": tally.NewTestScope("", nil), "nil scope": nil} {
		r := New(scope)
		m := r.Method("kv", "get")
		m.Call(time.Millisecond, "BUSY") // the first error code makes its counter
		m.AttemptFailed("BUSY")
		allocs := testing.AllocsPerRun(100, func() {
			m := r.Method("kv", "get")
			m.Attempt()
			m.Retry(1)
			m.AttemptFailed("BUSY")
			m.RetryFailed()
			m.Hedged(1, true, 1)
			m.Unsent()
			m.CallAttempts(2)
			m.Call(3*time.Millisecond, "")
			m.Call(3*time.Millisecond, "BUSY")
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocs per call, want 0", name, allocs)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func sortedKeys[K float64 | time.Duration, V any](m map[K]V) []K {
	var out []K
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func mapsEqual[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// BenchmarkMethodCallSuccess records a successful call as a Channel does:
// the Method lookup, the call (counter and latency histogram) and its
// attempts.
func BenchmarkMethodCallSuccess(b *testing.B) {
	r := New(tally.NewTestScope("", nil))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		m := r.Method("kv", "get")
		m.Call(time.Duration(i%20)*time.Millisecond, "")
		m.CallAttempts(1)
	}
}

// BenchmarkMethodCall is Call alone on a cached Method.
func BenchmarkMethodCall(b *testing.B) {
	m := New(tally.NewTestScope("", nil)).Method("kv", "get")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		m.Call(time.Duration(i%20)*time.Millisecond, "")
	}
}

// BenchmarkMethodCallAttempts is CallAttempts alone on a cached Method.
func BenchmarkMethodCallAttempts(b *testing.B) {
	m := New(tally.NewTestScope("", nil)).Method("kv", "get")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		m.CallAttempts(1 + i%3)
	}
}

// BenchmarkMethodCallParallel records successful calls from every P at
// once.
func BenchmarkMethodCallParallel(b *testing.B) {
	r := New(tally.NewTestScope("", nil))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m := r.Method("kv", "get")
			m.Call(3*time.Millisecond, "")
			m.CallAttempts(1)
		}
	})
}

// BenchmarkMethodCallNilScope is a successful call's recording with no scope.
func BenchmarkMethodCallNilScope(b *testing.B) {
	r := New(nil)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		m := r.Method("kv", "get")
		m.Call(time.Millisecond, "")
		m.CallAttempts(1)
	}
}

// Guards the cap on per-peer series: the first stats.MaxPeerSeries peers (and
// connections) get series of their own, and keep them; every later one
// counts under stats.PeerOther, one series per service, so that rotating
// addresses cannot multiply the series tally keeps for ever. Without the
// cap, each of the 3 x stats.MaxPeerSeries host:ports would have its own.
func TestPeerSeriesCapped(t *testing.T) {
	scope := tally.NewTestScope("", nil)
	r := New(scope)
	hp := func(i int) string { return "127.0.0.1:" + strconv.Itoa(1+i) }
	first := r.Peer("kv", hp(0))
	for i := range 3 * stats.MaxPeerSeries {
		r.Peer("kv", hp(i)).Sent.Inc(1)
		r.Conn(hp(i)).Failures.Inc(1)
	}
	r.Peer("other", hp(0)).Sent.Inc(1) // over the cap: the service's own _other series
	if r.Peer("kv", hp(0)) != first {
		t.Error("a peer that had a series of its own lost it")
	}
	snap := scope.Snapshot()
	sent, failures := 0, 0
	for _, c := range snap.Counters() {
		switch c.Name() {
		case stats.PeerSent:
			sent++
		case stats.PeerConnectFailures:
			failures++
		}
	}
	if sent != stats.MaxPeerSeries+2 || failures != stats.MaxPeerSeries+1 {
		t.Errorf("%d peer.sent and %d peer.connect_failures series, want %d and %d (stats.MaxPeerSeries, and _other's)",
			sent, failures, stats.MaxPeerSeries+2, stats.MaxPeerSeries+1)
	}
	counters := snap.Counters()
	for k, want := range map[string]int64{
		"peer.sent+peer=_other,service=kv":      2 * stats.MaxPeerSeries,
		"peer.sent+peer=_other,service=other":   1,
		"peer.connect_failures+peer=_other":     2 * stats.MaxPeerSeries,
		"peer.sent+peer=127.0.0.1:1,service=kv": 1,
	} {
		if c, ok := counters[k]; !ok || c.Value() != want {
			t.Errorf("%s = %v, want %d", k, c, want)
		}
	}
}

// A Recorder without a scope marks its metrics as reporting nowhere, so
// that the call path skips them (and what their values would cost); one
// with a scope does not, and its calls are counted.
func TestNopMarked(t *testing.T) {
	r := New(nil)
	if m, p := r.Method("kv", "get"), r.Peer("kv", "127.0.0.1:1"); !m.nop || !p.Nop {
		t.Fatalf("nil scope: Method.nop %v, Peer.Nop %v; want both true", m.nop, p.Nop)
	}
	scope := tally.NewTestScope("", nil)
	r = New(scope)
	m, p := r.Method("kv", "get"), r.Peer("kv", "127.0.0.1:1")
	if m.nop || p.Nop {
		t.Fatalf("test scope: Method.nop %v, Peer.Nop %v; want both false", m.nop, p.Nop)
	}
	m.Attempt()
	m.Call(time.Millisecond, "")
	counters := scope.Snapshot().Counters()
	for _, name := range []string{stats.Calls, stats.Attempts} {
		found := false
		for _, c := range counters {
			found = found || (c.Name() == name && c.Value() == 1)
		}
		if !found {
			t.Errorf("test scope: %s not counted once", name)
		}
	}
}
