package stats

import (
	"testing"
	"time"

	"github.com/uber-go/tally/v4"
)

func TestRecorderTagsAndCaches(t *testing.T) {
	scope := tally.NewTestScope("", nil)
	r := NewRecorder(scope)
	m := r.Method("kv", "get")
	if r.Method("kv", "get") != m {
		t.Fatal("Method is not cached")
	}
	m.Call(3*time.Millisecond, "")
	m.Call(5*time.Millisecond, "BUSY")
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
	tm, ok := snap.Timers()["call.latency+method=get,service=kv"]
	if !ok || len(tm.Values()) != 2 {
		t.Errorf("call.latency timer missing or wrong: %v", tm)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func BenchmarkMethodCallSuccess(b *testing.B) {
	r := NewRecorder(tally.NewTestScope("", nil))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		r.Method("kv", "get").Call(time.Millisecond, "")
	}
}

// The retry design's histogram: each retry attempt increments exactly one
// bucket; a call with 6 retries increments >=1, >=2, >=3, >=4, >=5 and >=5
// again.
func TestRetryHistogramBuckets(t *testing.T) {
	scope := tally.NewTestScope("", nil)
	m := NewRecorder(scope).Method("kv", "get")
	for n := 1; n <= 6; n++ {
		m.Retry(n)
	}
	m.Retry(0) // not a retry
	counters := scope.Snapshot().Counters()
	want := map[string]int64{">=1": 1, ">=2": 1, ">=3": 1, ">=4": 1, ">=5": 2, ">=10": 0, ">=100": 0, ">=1000": 0}
	for b, v := range want {
		c := counters["retry.histogram+bucket="+b+",method=get,service=kv"]
		if c == nil {
			t.Fatalf("bucket %s missing", b)
		}
		if c.Value() != v {
			t.Errorf("bucket %s = %d, want %d", b, c.Value(), v)
		}
	}
	if got := counters["retry.attempts+method=get,service=kv"].Value(); got != 6 {
		t.Errorf("retry.attempts = %d, want 6", got)
	}
	for n, want := range map[int]int{1: 0, 4: 3, 5: 4, 9: 4, 10: 5, 99: 5, 100: 6, 999: 6, 1000: 7, 5000: 7} {
		if got := RetryBucket(n); got != want {
			t.Errorf("RetryBucket(%d) = %d, want %d", n, got, want)
		}
	}
}
