package dns_test

import (
	"context"
	"errors"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/discovery"
	"github.com/sluice-rpc/sluice/discovery/dns"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/internal/watch"
)

// recorder is the Updates of a test: what the resolver reports arrives on
// channels, and ResolveNow's channel is unbuffered, so that a request sent
// on it has been taken by Resolve once the send returns.
type recorder struct {
	updates chan []discovery.Address
	errs    chan error
	now     chan struct{}
}

func (r *recorder) Update(addrs []discovery.Address) { r.updates <- addrs }
func (r *recorder) Error(err error)                  { r.errs <- err }
func (r *recorder) ResolveNow() <-chan struct{}      { return r.now }

func (r *recorder) update(t *testing.T) []discovery.Address {
	t.Helper()
	return testwait.Recv(t, r.updates, "an update")
}

func (r *recorder) err(t *testing.T) error {
	t.Helper()
	return testwait.Recv(t, r.errs, "an error")
}

// resolveNow asks for a lookup and returns once Resolve has taken the
// request.
func (r *recorder) resolveNow(t *testing.T) {
	t.Helper()
	timer := time.NewTimer(testwait.Limit)
	defer timer.Stop()
	select {
	case r.now <- struct{}{}:
	case <-timer.C:
		t.Fatalf("waited %v for Resolve to take a ResolveNow request", testwait.Limit)
	}
}

// quiet fails the test if anything was reported and not yet received.
func (r *recorder) quiet(t *testing.T) {
	t.Helper()
	select {
	case a := <-r.updates:
		t.Fatalf("unexpected update %v", a)
	case err := <-r.errs:
		t.Fatalf("unexpected error %v", err)
	default:
	}
}

// start runs a Resolver of cfg on a goroutine and returns its recorder and
// the function that stops it and waits for Resolve to return (the test's
// cleanup calls it too).
func start(t *testing.T, cfg dns.Config) (*recorder, func()) {
	t.Helper()
	r, err := dns.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{updates: make(chan []discovery.Address, 16), errs: make(chan error, 16), now: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Resolve(ctx, rec)
	}()
	stop := sync.OnceFunc(func() {
		cancel()
		testwait.Recv(t, done, "Resolve to return")
	})
	t.Cleanup(stop)
	return rec, stop
}

// waitTimers waits until n timers are pending on fc: Resolve is waiting
// for its next lookup.
func waitTimers(t *testing.T, fc *clock.Fake, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Limit)
	defer cancel()
	if err := fc.WaitTimers(ctx, n); err != nil {
		t.Fatalf("waited %v for %d pending timers (have %d)", testwait.Limit, n, fc.Timers())
	}
}

func addrs(hostPorts ...string) []discovery.Address {
	a := make([]discovery.Address, len(hostPorts))
	for i, hp := range hostPorts {
		a[i] = discovery.Address{HostPort: hp}
	}
	return a
}

func checkSet(t *testing.T, got, want []discovery.Address) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("set %+v, want %+v", got, want)
	}
}

// A name with a port: its A and AAAA records, each with the port, IPv6 in
// brackets, sorted, weight unset.
func TestAddressRecords(t *testing.T) {
	s := startServer(t)
	s.set(t, "kv.test.", "A 127.0.0.2", "A 127.0.0.1")
	s.set(t, "v6.test.", "AAAA ::1", "AAAA 2001:db8::7")
	s.set(t, "dual.test.", "AAAA ::1", "A 127.0.0.1")
	for _, tc := range []struct {
		name string
		want []discovery.Address
	}{
		{"kv.test.", addrs("127.0.0.1:4040", "127.0.0.2:4040")},
		{"v6.test.", addrs("[2001:db8::7]:4040", "[::1]:4040")},
		{"dual.test.", addrs("127.0.0.1:4040", "[::1]:4040")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := "dns://" + s.addr + "/" + tc.name + ":4040"
			rec, _ := start(t, dns.Config{Target: target, Timeout: lookupTimeout, Clock: clock.NewFake(time.Unix(0, 0))})
			checkSet(t, rec.update(t), tc.want)
			rec.quiet(t)
		})
	}
}

// The Resolver's String is the target, in its canonical form.
func TestString(t *testing.T) {
	for target, want := range map[string]string{
		"dns:///kv.example:4040":              "dns:///kv.example:4040",
		"dns://10.0.0.2/kv.example:4040":      "dns://10.0.0.2:53/kv.example:4040",
		"dns:kv.example:4040":                 "dns:///kv.example:4040",
		"dns://127.0.0.1:5353/_kv._tcp.test.": "dns://127.0.0.1:5353/_kv._tcp.test.",
	} {
		r, err := dns.New(dns.Config{Target: target})
		if err != nil {
			t.Fatal(err)
		}
		if r.String() != want {
			t.Errorf("New(%q).String() = %q, want %q", target, r.String(), want)
		}
	}
}

// An IP address with a port needs no DNS server: it is its own answer.
func TestIPTarget(t *testing.T) {
	rec, _ := start(t, dns.Config{Target: "dns:///[::1]:4040", Clock: clock.NewFake(time.Unix(0, 0))})
	checkSet(t, rec.update(t), addrs("[::1]:4040"))
}

// Config.Resolver does the lookups of a target that names no server.
func TestConfigResolver(t *testing.T) {
	s := startServer(t)
	s.set(t, "kv.test.", "A 127.0.0.1")
	var d net.Dialer
	res := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, s.addr)
	}}
	rec, _ := start(t, dns.Config{Target: "dns:///kv.test.:80", Resolver: res, Timeout: lookupTimeout, Clock: clock.NewFake(time.Unix(0, 0))})
	checkSet(t, rec.update(t), addrs("127.0.0.1:80"))
}

// A name without a port: its SRV records of the lowest priority, each
// target looked up and each of its addresses a peer with the record's port
// and weight, as a Kubernetes headless service lists one record per pod.
// A target whose name is gone is left out and reported; a target of "."
// alone is an empty set.
func TestSRV(t *testing.T) {
	s := startServer(t)
	const name = "_kv._tcp.test."
	s.set(t, name,
		"SRV 0 10 4041 a.kv.test.",
		"SRV 0 20 4042 b.kv.test.",
		"SRV 0 0 4043 c.kv.test.",
		"SRV 1 5 4044 d.kv.test.") // a backup, not used while priority 0 is listed
	for _, h := range []string{"a", "b", "c", "d"} {
		s.set(t, h+".kv.test.", "A 127.0.0.1")
	}
	fc := clock.NewFake(time.Unix(0, 0))
	rec, _ := start(t, dns.Config{Target: "dns://" + s.addr + "/" + name, Period: time.Minute, Timeout: lookupTimeout, Clock: fc})
	inst := func(port string, weight float64, target string) discovery.Address {
		return discovery.Address{HostPort: "127.0.0.1:" + port, Weight: weight, Metadata: map[string]any{"target": target}}
	}
	checkSet(t, rec.update(t), []discovery.Address{
		inst("4041", 10, "a.kv.test."), inst("4042", 20, "b.kv.test."), inst("4043", 0, "c.kv.test."),
	})
	if n := s.count(mdns.TypeA, "d.kv.test."); n != 0 {
		t.Fatalf("the backup target was looked up %d times, want 0", n)
	}

	// b's pod is gone, its SRV record not yet.
	s.set(t, "b.kv.test.")
	waitTimers(t, fc, 1)
	fc.Add(time.Minute)
	checkSet(t, rec.update(t), []discovery.Address{inst("4041", 10, "a.kv.test."), inst("4043", 0, "c.kv.test.")})
	err := rec.err(t)
	t.Logf("reported: %v", err)
	var de *net.DNSError
	if !errors.As(err, &de) || !de.IsNotFound || !strings.Contains(err.Error(), "b.kv.test.") || !strings.Contains(err.Error(), "left out") {
		t.Fatalf("error %v, want b.kv.test. named as not found and left out", err)
	}

	// The service is declared absent.
	s.set(t, name, "SRV 0 0 0 .")
	waitTimers(t, fc, 1)
	fc.Add(time.Minute)
	if got := rec.update(t); len(got) != 0 {
		t.Fatalf("set %v, want an empty one", got)
	}
	rec.quiet(t)
}

// A record added or removed is seen at the next period, not before.
func TestPeriod(t *testing.T) {
	s := startServer(t)
	s.set(t, "kv.test.", "A 127.0.0.1")
	fc := clock.NewFake(time.Unix(0, 0))
	rec, _ := start(t, dns.Config{Target: "dns://" + s.addr + "/kv.test.:4040", Period: time.Minute, Timeout: lookupTimeout, Clock: fc})
	checkSet(t, rec.update(t), addrs("127.0.0.1:4040"))

	s.set(t, "kv.test.", "A 127.0.0.1", "A 127.0.0.2")
	waitTimers(t, fc, 1)
	fc.Add(time.Minute - time.Nanosecond)
	if n, q := fc.Timers(), s.count(mdns.TypeA, "kv.test."); n != 1 || q != 1 {
		t.Fatalf("before the period: %d pending timers, %d A queries; want 1 and 1", n, q)
	}
	fc.Add(time.Nanosecond)
	checkSet(t, rec.update(t), addrs("127.0.0.1:4040", "127.0.0.2:4040"))

	s.set(t, "kv.test.", "A 127.0.0.2")
	waitTimers(t, fc, 1)
	fc.Add(time.Minute)
	checkSet(t, rec.update(t), addrs("127.0.0.2:4040"))
	rec.quiet(t)
}

// ResolveNow looks up at once when the last lookup is MinInterval old;
// sooner, it waits for MinInterval, and the requests made meanwhile count
// as one.
func TestResolveNowRateLimited(t *testing.T) {
	s := startServer(t)
	s.set(t, "kv.test.", "A 127.0.0.1")
	fc := clock.NewFake(time.Unix(0, 0))
	const minInterval = 10 * time.Second
	rec, _ := start(t, dns.Config{Target: "dns://" + s.addr + "/kv.test.:4040", Period: time.Minute, MinInterval: minInterval, Timeout: lookupTimeout, Clock: fc})
	queries := func() int { return s.count(mdns.TypeA, "kv.test.") }
	rec.update(t)
	waitTimers(t, fc, 1)

	fc.Add(minInterval)
	s.set(t, "kv.test.", "A 127.0.0.2")
	rec.resolveNow(t)
	checkSet(t, rec.update(t), addrs("127.0.0.2:4040"))
	if q := queries(); q != 2 {
		t.Fatalf("%d A queries after a ResolveNow, want 2", q)
	}

	waitTimers(t, fc, 1)
	rec.resolveNow(t) // the last lookup just ended: too soon
	waitTimers(t, fc, 2)
	rec.resolveNow(t)
	rec.resolveNow(t)
	fc.Add(minInterval - time.Nanosecond)
	if n, q := fc.Timers(), queries(); n != 2 || q != 2 {
		t.Fatalf("before MinInterval: %d pending timers, %d A queries; want 2 and 2", n, q)
	}
	rec.quiet(t)
	fc.Add(time.Nanosecond)
	rec.update(t)
	if q := queries(); q != 3 {
		t.Fatalf("%d A queries after three ResolveNow within MinInterval, want 3", q)
	}
	// The requests made while the lookup was due were answered by it:
	// nothing more is due before the period.
	waitTimers(t, fc, 1)
	fc.Add(minInterval)
	if n, q := fc.Timers(), queries(); n != 1 || q != 3 {
		t.Fatalf("after the rate-limited lookup: %d pending timers, %d A queries; want 1 and 3", n, q)
	}
	rec.quiet(t)
}

// tap passes a resolver's reports on to the Updates it is given and
// signals each error once the Updates has it.
type tap struct {
	discovery.Resolver
	errs chan error
}

func (t tap) Resolve(ctx context.Context, u discovery.Updates) {
	t.Resolver.Resolve(ctx, tapUpdates{u, t.errs})
}

type tapUpdates struct {
	discovery.Updates
	errs chan error
}

func (u tapUpdates) Error(err error) {
	u.Updates.Error(err)
	u.errs <- err
}

// A DNS server that fails (SERVFAIL), or answers that the name has no
// records, is reported as an error, and the Watcher keeps the last good
// set, its State naming the cause; the next good answer replaces it.
func TestFailureKeepsLastGoodSet(t *testing.T) {
	s := startServer(t)
	s.set(t, "kv.test.", "A 127.0.0.1", "A 127.0.0.2")
	fc := clock.NewFake(time.Unix(0, 0))
	target := "dns://" + s.addr + "/kv.test.:4040"
	r, err := dns.New(dns.Config{Target: target, Period: time.Minute, Timeout: lookupTimeout, Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	applied := make(chan []discovery.Address, 16)
	errs := make(chan error, 16)
	w, err := watch.New(watch.Config{Resolver: tap{r, errs}, Clock: fc, Apply: func(a []discovery.Address) error {
		applied <- a
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if got := testwait.Recv(t, applied, "the first set"); len(got) != 2 {
		t.Fatalf("first set %v", got)
	}

	for _, step := range []struct {
		name   string
		change func()
		cause  string
	}{
		{"SERVFAIL", func() { s.setServfail("kv.test.", true) }, "server misbehaving"},
		{"no records", func() { s.setServfail("kv.test.", false); s.set(t, "kv.test.", `TXT "moved"`) }, "no records of that type"},
		{"no such name", func() { s.set(t, "kv.test.") }, "no such host"},
	} {
		step.change()
		waitTimers(t, fc, 1)
		fc.Add(time.Minute)
		t.Logf("%s reported: %v", step.name, testwait.Recv(t, errs, step.name+" reported"))
		st := w.State()
		if st.Status != watch.Failing || st.Peers != 2 || !strings.Contains(st.LastError, target) || !strings.Contains(st.LastError, step.cause) {
			t.Fatalf("after %s: state %+v; want FAILING, the 2 peers kept, the error naming %s and %q", step.name, st, target, step.cause)
		}
	}

	s.set(t, "kv.test.", "A 127.0.0.3")
	waitTimers(t, fc, 1)
	fc.Add(time.Minute)
	checkSet(t, testwait.Recv(t, applied, "the set after recovery"), []discovery.Address{{HostPort: "127.0.0.3:4040", Weight: 1}})
	if st := w.State(); st.Status != watch.OK || st.Peers != 1 {
		t.Fatalf("after recovery: state %+v", st)
	}
}

// A DNS server that does not answer fails the lookup once Timeout has
// passed, not later, for an A/AAAA lookup as for an SRV one.
func TestTimeout(t *testing.T) {
	s := startServer(t)
	s.setSilent(true)
	const timeout = 200 * time.Millisecond
	for _, name := range []string{"kv.test.:4040", "_kv._tcp.test."} {
		t.Run(name, func(t *testing.T) {
			begin := time.Now()
			rec, _ := start(t, dns.Config{Target: "dns://" + s.addr + "/" + name, Timeout: timeout, Clock: clock.NewFake(time.Unix(0, 0))})
			err := rec.err(t)
			took := time.Since(begin)
			t.Logf("reported after %v: %v", took, err)
			var de *net.DNSError
			if !errors.As(err, &de) || !de.IsTimeout || !strings.Contains(err.Error(), "no answer within 200ms") {
				t.Fatalf("error %v, want a timeout that says so", err)
			}
			// Go's resolver would wait for /etc/resolv.conf's timeout (5 s
			// by default) were the query not cut short.
			if took < timeout || took > timeout+2*time.Second {
				t.Fatalf("the timeout came after %v, want about %v", took, timeout)
			}
			rec.quiet(t)
		})
	}
}

// Resolve returns as soon as its context ends, even in the middle of a
// lookup that would take an hour, and reports nothing of it; goleak (in
// TestMain) checks that the lookup's goroutines ended too.
func TestResolveReturnsMidLookup(t *testing.T) {
	s := startServer(t)
	s.setSilent(true)
	for _, tc := range []struct {
		target string
		qtype  uint16
		name   string
	}{
		{"kv.test.:4040", mdns.TypeA, "kv.test."},
		{"_kv._tcp.test.", mdns.TypeSRV, "_kv._tcp.test."},
	} {
		t.Run(tc.target, func(t *testing.T) {
			rec, stop := start(t, dns.Config{Target: "dns://" + s.addr + "/" + tc.target, Timeout: time.Hour, Clock: clock.NewFake(time.Unix(0, 0))})
			s.waitQueries(t, tc.qtype, tc.name, 1)
			begin := time.Now()
			stop()
			if took := time.Since(begin); took > 2*time.Second {
				t.Fatalf("Resolve took %v to return after its context ended", took)
			}
			rec.quiet(t)
		})
	}
}

// After a lookup that found no set the next comes MinInterval after it,
// then twice as long after each failure in a row, up to Period; a success
// brings back Period.
func TestFailureLooksUpSooner(t *testing.T) {
	s := startServer(t)
	s.setServfail("kv.test.", true)
	fc := clock.NewFake(time.Unix(0, 0))
	rec, _ := start(t, dns.Config{Target: "dns://" + s.addr + "/kv.test.:4040", Period: time.Minute, MinInterval: 5 * time.Second,
		Timeout: lookupTimeout, Clock: fc})
	rec.err(t)
	for i, wait := range []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, time.Minute, time.Minute} {
		waitTimers(t, fc, 1)
		fc.Add(wait - time.Nanosecond)
		if n := fc.Timers(); n != 1 {
			t.Fatalf("failure %d: %d pending timers before %v, want 1 (no lookup yet)", i+1, n, wait)
		}
		fc.Add(time.Nanosecond)
		rec.err(t)
	}
	s.setServfail("kv.test.", false)
	s.set(t, "kv.test.", "A 127.0.0.1")
	waitTimers(t, fc, 1)
	fc.Add(time.Minute)
	checkSet(t, rec.update(t), addrs("127.0.0.1:4040"))
	waitTimers(t, fc, 1)
	fc.Add(40 * time.Second)
	rec.quiet(t) // Period again, not the backoff's step
}
