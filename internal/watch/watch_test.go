package watch_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/balance"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/discovery"
	"github.com/sluice-rpc/sluice/internal/watch"
	"github.com/uber-go/tally/v4"
)

// scripted is a resolver driven by the test: each function sent on steps
// runs on the resolver's goroutine with its Updates.
type scripted struct{ steps chan func(discovery.Updates) }

func (s scripted) Resolve(ctx context.Context, u discovery.Updates) {
	for {
		select {
		case f := <-s.steps:
			f(u)
		case <-ctx.Done():
			return
		}
	}
}

func (s scripted) String() string { return "scripted:test" }

// do runs f on the resolver's goroutine and waits for it.
func (s scripted) do(f func(discovery.Updates)) {
	done := make(chan struct{})
	s.steps <- func(u discovery.Updates) { f(u); close(done) }
	<-done
}

func hostPorts(addrs []discovery.Address) []string {
	var hps []string
	for _, a := range addrs {
		hps = append(hps, a.HostPort)
	}
	return hps
}

// A registry that fails never empties the set: an error, then an empty
// answer, leave the last good set applied, and the State and metrics say
// so; the next good answer applies and clears the failing status.
func TestWatcherKeepsLastGoodSet(t *testing.T) {
	res := scripted{make(chan func(discovery.Updates))}
	var mu sync.Mutex
	var applied [][]string
	scope := tally.NewTestScope("", nil)
	fc := clock.NewFake(time.Unix(1000, 0))
	w, err := watch.New(watch.Config{Resolver: res, Clock: fc, Scope: scope, Apply: func(a []discovery.Address) error {
		mu.Lock()
		defer mu.Unlock()
		applied = append(applied, hostPorts(a))
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if st := w.State(); st.Status != watch.Resolving || st.Target != "scripted:test" {
		t.Fatalf("before any answer: %+v", st)
	}
	res.do(func(u discovery.Updates) {
		u.Update([]discovery.Address{{HostPort: "127.0.0.1:1"}, {HostPort: "127.0.0.1:2", Weight: 3}})
	})
	fc.Add(time.Second)
	res.do(func(u discovery.Updates) { u.Error(errors.New("SERVFAIL")) })
	st := w.State()
	if st.Status != watch.Failing || st.Peers != 2 || st.LastError != "SERVFAIL" || !st.LastErrorTime.Equal(time.Unix(1001, 0)) || !st.LastUpdate.Equal(time.Unix(1000, 0)) {
		t.Fatalf("after an error: %+v", st)
	}
	res.do(func(u discovery.Updates) { u.Update(nil) })
	st = w.State()
	if st.Status != watch.Failing || st.Peers != 2 || !strings.Contains(st.LastError, "empty") || st.Errors != 2 {
		t.Fatalf("after an empty answer: %+v", st)
	}
	if g := scope.Snapshot().Gauges()["discovery.failing+"]; g == nil || g.Value() != 1 {
		t.Fatalf("discovery.failing gauge = %v, want 1", g)
	}
	res.do(func(u discovery.Updates) { u.Update([]discovery.Address{{HostPort: "127.0.0.1:3"}}) })
	st = w.State()
	if st.Status != watch.OK || st.Peers != 1 || st.Updates != 2 {
		t.Fatalf("after a good answer: %+v", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := [][]string{{"127.0.0.1:1", "127.0.0.1:2"}, {"127.0.0.1:3"}}; !reflect.DeepEqual(applied, want) {
		t.Fatalf("applied %v, want %v", applied, want)
	}
	snap := scope.Snapshot()
	if c := snap.Counters()["discovery.errors+"]; c == nil || c.Value() != 2 {
		t.Fatalf("discovery.errors = %v, want 2", c)
	}
	if g := snap.Gauges()["discovery.peers+"]; g == nil || g.Value() != 1 {
		t.Fatalf("discovery.peers = %v, want 1", g)
	}
}

// Invalid entries are left out and reported; duplicates count once;
// weights default to 1; a set with no valid entry after a good one is kept.
func TestWatcherCleansSets(t *testing.T) {
	res := scripted{make(chan func(discovery.Updates))}
	var got []discovery.Address
	w, err := watch.New(watch.Config{Resolver: res, Apply: func(a []discovery.Address) error { got = a; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	res.do(func(u discovery.Updates) {
		u.Update([]discovery.Address{{HostPort: "127.0.0.1:1"}, {HostPort: "nonsense"}, {HostPort: "127.0.0.1:1", Weight: 9},
			{HostPort: "127.0.0.1:2", Weight: -1}, {HostPort: "127.0.0.1:3", Weight: 2}})
	})
	want := []discovery.Address{{HostPort: "127.0.0.1:1", Weight: 1}, {HostPort: "127.0.0.1:3", Weight: 2}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("applied %+v, want %+v", got, want)
	}
	st := w.State()
	if st.Status != watch.Failing || !strings.Contains(st.LastError, `entry 2`) || !strings.Contains(st.LastError, "1 more invalid") {
		t.Fatalf("state %+v, want the bad entries named", st)
	}
	res.do(func(u discovery.Updates) { u.Update([]discovery.Address{{HostPort: "::"}}) })
	if !reflect.DeepEqual(got, want) || w.State().Peers != 2 {
		t.Fatalf("a set of only invalid entries replaced the good one: %+v", got)
	}
}

// An Apply that fails is a failure: the State says so and the count of
// peers stays that of the set in force.
func TestWatcherApplyError(t *testing.T) {
	res := scripted{make(chan func(discovery.Updates))}
	fail := false
	w, err := watch.New(watch.Config{Resolver: res, Apply: func(a []discovery.Address) error {
		if fail {
			return errors.New("closed")
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	res.do(func(u discovery.Updates) { u.Update([]discovery.Address{{HostPort: "127.0.0.1:1"}}) })
	fail = true
	res.do(func(u discovery.Updates) {
		u.Update([]discovery.Address{{HostPort: "127.0.0.1:1"}, {HostPort: "127.0.0.1:2"}})
	})
	if st := w.State(); st.Status != watch.Failing || st.Peers != 1 || !strings.Contains(st.LastError, "applying 2 peers: closed") {
		t.Fatalf("state %+v", st)
	}
}

// ResolveNow requests reach the resolver, coalesced while it has not
// taken the last one.
func TestWatcherResolveNow(t *testing.T) {
	res := scripted{make(chan func(discovery.Updates))}
	w, err := watch.New(watch.Config{Resolver: res, Apply: func([]discovery.Address) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.ResolveNow()
	w.ResolveNow()
	n := 0
	res.do(func(u discovery.Updates) {
		for {
			select {
			case <-u.ResolveNow():
				n++
				continue
			default:
			}
			return
		}
	})
	if n != 1 {
		t.Fatalf("two ResolveNow before the resolver looked: %d requests seen, want 1", n)
	}
}

func TestWatchConfigErrors(t *testing.T) {
	if _, err := watch.New(watch.Config{Apply: func([]discovery.Address) error { return nil }}); err == nil || !strings.Contains(err.Error(), "Resolver") {
		t.Fatalf("no resolver: %v", err)
	}
	if _, err := watch.New(watch.Config{Resolver: discovery.StaticHostPorts("127.0.0.1:1")}); err == nil || !strings.Contains(err.Error(), "Apply") {
		t.Fatalf("no Apply: %v", err)
	}
}

// Close stops the resolver and returns once it has.
func TestStaticResolver(t *testing.T) {
	got := make(chan []discovery.Address, 1)
	r := discovery.StaticHostPorts("127.0.0.1:4040", "127.0.0.1:4041")
	if r.String() != "static:127.0.0.1:4040,127.0.0.1:4041" {
		t.Fatalf("String() = %q", r.String())
	}
	w, err := watch.New(watch.Config{Resolver: r, Apply: func(a []discovery.Address) error { got <- a; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	a := <-got
	w.Close()
	if len(a) != 2 || a[1].HostPort != "127.0.0.1:4041" || a[1].Weight != 1 {
		t.Fatalf("static set %+v", a)
	}
}

// A set larger than MaxPeers is a failure: the last good set stays.
func TestWatcherBoundsTheSet(t *testing.T) {
	res := scripted{make(chan func(discovery.Updates))}
	var got []discovery.Address
	w, err := watch.New(watch.Config{Resolver: res, MaxPeers: 2, Apply: func(a []discovery.Address) error { got = a; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	res.do(func(u discovery.Updates) { u.Update([]discovery.Address{{HostPort: "127.0.0.1:1"}}) })
	res.do(func(u discovery.Updates) {
		u.Update([]discovery.Address{{HostPort: "127.0.0.1:1"}, {HostPort: "127.0.0.1:2"}, {HostPort: "127.0.0.1:3"}})
	})
	if st := w.State(); len(got) != 1 || st.Status != watch.Failing || !strings.Contains(st.LastError, "3 peers, more than MaxPeers (2)") {
		t.Fatalf("applied %v, state %+v", got, st)
	}
	if _, err := watch.New(watch.Config{Resolver: res, MaxPeers: -1, Apply: func([]discovery.Address) error { return nil }}); err == nil || !strings.Contains(err.Error(), "MaxPeers is -1") {
		t.Fatalf("MaxPeers -1: %v", err)
	}
}

// An unspecified address (what a server listening on every interface would
// register) and a weight past MaxWeight or below balance.MinWeight are
// invalid entries, left out.
func TestWatcherRefusesUndialableAndHugeWeights(t *testing.T) {
	res := scripted{make(chan func(discovery.Updates))}
	var got []discovery.Address
	w, err := watch.New(watch.Config{Resolver: res, Apply: func(a []discovery.Address) error { got = a; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	res.do(func(u discovery.Updates) {
		u.Update([]discovery.Address{{HostPort: "0.0.0.0:4040"}, {HostPort: "[::]:4040"}, {HostPort: "127.0.0.1:1", Weight: 1e308},
			{HostPort: "127.0.0.1:3", Weight: 1e-320}, {HostPort: "127.0.0.1:2", Weight: balance.MaxWeight}})
	})
	want := []discovery.Address{{HostPort: "127.0.0.1:2", Weight: balance.MaxWeight}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("applied %+v, want %+v", got, want)
	}
	if st := w.State(); !strings.Contains(st.LastError, "0.0.0.0:4040: an unspecified address") || !strings.Contains(st.LastError, "3 more invalid") {
		t.Fatalf("state %+v, want the bad entries named", st)
	}
}
