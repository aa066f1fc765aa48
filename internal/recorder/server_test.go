package recorder

import (
	"strconv"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/stats"
	"github.com/uber-go/tally/v4"
)

// A request's metrics carry service, method and caller; its errors their
// code, application errors apart; tchannel-go's names theirs.
func TestServerSeriesTags(t *testing.T) {
	scope := tally.NewTestScope("", nil)
	m := New(scope).Server("kv", "get", true)
	s := m.Caller("alice")
	if m.Caller("alice") != s {
		t.Fatal("Caller is not cached")
	}
	for _, o := range []struct {
		code codes.Code
		app  bool
	}{{codes.OK, false}, {codes.OK, true}, {codes.Busy, false}, {codes.Protocol, false}, {codes.Code(0x42), false}} {
		s.Received()
		s.Done(time.Millisecond, o.code, o.app)
	}
	s.Shed(ShedAdaptive)
	const tags = ",method=get,service=kv"
	const tch = "calling-service=alice,endpoint=get,service=kv"
	want := map[string]int64{
		"server.calls+caller=alice" + tags:                               5,
		"server.call.app_errors+caller=alice" + tags:                     1,
		"server.call.errors+caller=alice,code=BUSY" + tags:               1,
		"server.call.errors+caller=alice,code=PROTOCOL" + tags:           1,
		"server.call.errors+caller=alice,code=_other" + tags:             1,
		"server.shed+caller=alice,method=get,reason=adaptive,service=kv": 1,
		"inbound.calls.recvd+" + tch:                                     5,
		"inbound.calls.success+" + tch:                                   1,
		"inbound.calls.app-errors+" + tch:                                1,
		"inbound.calls.system-errors+" + tch + ",type=busy":              1,
		"inbound.calls.system-errors+" + tch + ",type=protocol-error":    1,
		"inbound.calls.system-errors+" + tch + ",type=_other":            1,
	}
	counters := scope.Snapshot().Counters()
	for k, v := range want {
		if c, ok := counters[k]; !ok || c.Value() != v {
			t.Errorf("%s = %v, want %d", k, c, v)
		}
	}
	if len(counters) != len(want) {
		t.Errorf("counters %v, want exactly %v", keys(counters), keys(want))
	}
}

// The first stats.MaxCallerSeries callers of a method get series of their
// own and keep them; later ones share stats.CallerOther's, per method.
func TestServerCallersCapped(t *testing.T) {
	scope := tally.NewTestScope("", nil)
	r := New(scope)
	get, set := r.Server("kv", "get", false), r.Server("kv", "set", false)
	first := get.Caller("c0")
	for i := range 2 * stats.MaxCallerSeries {
		get.Caller("c" + strconv.Itoa(i)).Received()
	}
	set.Caller("late").Received() // set's own first caller
	if get.Caller("c0") != first {
		t.Error("a caller that had a series of its own lost it")
	}
	n := 0
	for _, c := range scope.Snapshot().Counters() {
		if c.Name() == stats.ServerCalls && c.Tags()[stats.TagMethod] == "get" {
			n++
		}
	}
	if n != stats.MaxCallerSeries+1 {
		t.Errorf("%d server.calls series for get, want %d", n, stats.MaxCallerSeries+1)
	}
	counters := scope.Snapshot().Counters()
	for k, v := range map[string]int64{
		"server.calls+caller=_other,method=get,service=kv": stats.MaxCallerSeries,
		"server.calls+caller=late,method=set,service=kv":   1,
	} {
		if c, ok := counters[k]; !ok || c.Value() != v {
			t.Errorf("%s = %v, want %d", k, c, v)
		}
	}
}

// With no scope the server has no metrics, so it reads no clock for them.
func TestServerNilScope(t *testing.T) {
	if m := New(nil).Server("kv", "get", true); m != nil {
		t.Errorf("Server with a nil scope = %v, want nil", m)
	}
}

// Recording a request on a cached series allocates nothing, for a known
// caller, for one past the cap, and with tchannel-go's names.
func TestServerRecordingAllocatesNothing(t *testing.T) {
	for _, tch := range []bool{false, true} {
		m := New(tally.NewTestScope("", nil)).Server("kv", "get", tch)
		for i := range stats.MaxCallerSeries + 1 {
			s := m.Caller("c" + strconv.Itoa(i)) // c64 makes _other's
			s.Done(time.Millisecond, codes.Busy, false)
			s.Done(time.Millisecond, codes.OK, true)
			s.Shed(ShedRate)
		}
		allocs := testing.AllocsPerRun(100, func() {
			for _, c := range []string{"c1", "someone-else"} {
				s := m.Caller(c)
				s.Received()
				s.Done(3*time.Millisecond, codes.OK, false)
				s.Done(3*time.Millisecond, codes.OK, true)
				s.Done(3*time.Millisecond, codes.Busy, false)
				s.Shed(ShedRate)
				s.Unclassified(time.Millisecond)
			}
		})
		if allocs != 0 {
			t.Errorf("tchannel names %v: %v allocs per request, want 0", tch, allocs)
		}
	}
}

// BenchmarkServerRequest records a successful request as the guard does:
// the caller's series, Received and Done.
func BenchmarkServerRequest(b *testing.B) {
	m := New(tally.NewTestScope("", nil)).Server("kv", "get", false)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s := m.Caller("alice")
		s.Received()
		s.Done(time.Duration(i%20)*time.Millisecond, codes.OK, false)
	}
}
